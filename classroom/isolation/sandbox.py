"""The kernel launcher: how nbgrader starts a learner's kernel in the sandbox.

nbgrader starts the kernel of every notebook it grades from a kernel spec. The spec
written by :func:`install_kernelspec` does not start ``ipykernel`` directly: it starts
this file as a small launcher (standard library and the standard-library modules of
this package only), which

1. copies the notebook's working directory (``autograded/<student>/<assignment>``)
   into a private scratch directory, regular files only, owned by the sandbox user,
   leaving out the notebooks themselves (nbgrader has put the hidden tests in them);
2. asks the worker's kernel zygote (:mod:`classroom.isolation.zygote`) for a kernel
   forked from a process that has PyTorch imported already, or else
3. execs ``bwrap`` (:func:`classroom.isolation.bwrap.bwrap_argv`) with
   ``python -m ipykernel_launcher`` inside, and stays its parent until it ends.

The kernel talks to nbgrader over ZeroMQ *ipc* sockets (unix socket files) in the
worker's runtime directory, bound into the sandbox: that is the only channel out,
and it works without a network namespace in common. Killing the ``bwrap`` process
kills every process of the sandbox (it is the parent of the PID namespace's init,
which runs with ``--die-with-parent``).

Usage by nbgrader (through the kernel spec)::

    python -I sandbox.py launch SPEC.json CONNECTION_FILE [kernel args...]
"""
from __future__ import annotations

import json
import os
import signal
import socket
import sys
import tempfile
from pathlib import Path

if __name__ == "__main__":  # run by python -I, which puts nothing on sys.path: the package's root
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from classroom.isolation.bwrap import (SandboxSpec, bwrap_argv, copy_regular_tree, course_language,  # noqa: E402
                                       empty_dir, prepare_dir, which)
from classroom.isolation.processes import PARENT_ENV, die_with_parent, join_cgroup  # noqa: E402

KERNEL_NAME = "andrea-sandbox"


def launch(spec_path: str, connection_file: str, kernel_args: list[str], parent: int | None = None) -> None:
    """Called by nbgrader (through the kernel spec) with cwd = the notebook's directory;
    ``parent``: the grading worker's pid, read when this process started."""
    die_with_parent(parent)
    spec = SandboxSpec.load(spec_path)
    workdir = Path(os.getcwd())
    if Path(spec.scratch_root).resolve().is_relative_to(workdir.resolve()):
        sys.exit(f"sandbox launcher: the working directory {workdir} contains the scratch folder")
    scratch = Path(tempfile.mkdtemp(prefix="k-", dir=spec.scratch_root))
    prepare_dir(scratch, spec.uid, 0o755)
    parts = {}
    for name in ("work", "home", "tmp"):
        parts[name] = scratch / name
        parts[name].mkdir()
        prepare_dir(parts[name], spec.uid, 0o700 if name != "work" else 0o755)
    # the notebooks being graded stay out: nbgrader has put the hidden tests into them
    copy_regular_tree(workdir, parts["work"], spec.uid, skip_top=(".ipynb",))

    conn = Path(connection_file).resolve()
    info = json.loads(conn.read_text())
    if info.get("transport") != "ipc" or conn.parent != Path(spec.runtime_dir).resolve():
        sys.exit(f"sandbox launcher: the kernel connection must use ipc sockets in {spec.runtime_dir}; "
                 f"got {info.get('transport')} in {conn.parent}")
    # sockets and files an earlier kernel of this worker left there are gone before it starts
    empty_dir(conn.parent, keep={conn.name})
    if spec.uid is not None:
        os.chown(conn, spec.uid, spec.uid)
    os.chmod(conn, 0o600)

    join_cgroup(spec.cgroup_procs)
    if spec.zygote_socket and spec.work_anchor and workdir.is_relative_to(spec.work_anchor):
        _launch_in_zygote(spec, workdir, parts["work"], conn, kernel_args, scratch / "kernel.log")
    command = [spec.python, "-Xfrozen_modules=off", "-m", "ipykernel_launcher", "-f", str(conn),
               "--IPKernelApp.ignore_cwd=True", *kernel_args]
    run_sandboxed(spec, argv_for=lambda sfd: bwrap_argv(spec, workdir, parts["work"], command, parts["home"],
                                                         parts["tmp"], seccomp_fd=sfd),
                  log_path=scratch / "kernel.log")


def _launch_in_zygote(spec: SandboxSpec, workdir: Path, work: Path, conn: Path, kernel_args: list[str],
                      log_path: Path) -> None:
    """Ask the worker's kernel zygote for the kernel; on success stay until it ends
    (draining its output) and exit. Returns only if the zygote could not do it."""
    r, w = os.pipe()
    request = {"op": "kernel", "anchor": spec.work_anchor, "workdir": str(workdir), "work": str(work),
               "scratch_root": spec.scratch_root, "runtime_dir": spec.runtime_dir,
               "connection_file": str(conn), "args": kernel_args,
               "env": {"NBGRADER_EXECUTION": os.environ.get("NBGRADER_EXECUTION", ""),
                       "ANDREA_LANG": course_language()}}
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
            s.settimeout(30)
            s.connect(spec.zygote_socket)
            socket.send_fds(s, [json.dumps(request).encode()], [w])
            reply = s.recv(16)
    except OSError:
        reply = b""
    os.close(w)
    if reply != b"ok":
        os.close(r)
        return
    Path(spec.pidfile).write_text("zygote")
    _drain(r, spec.output_cap, log_path)  # ends when the kernel and all it started are gone
    os._exit(0)


def _drain(fd: int, cap: int, log_path: Path) -> None:
    """Read ``fd`` to its end, keeping the first ``cap`` bytes in ``log_path``."""
    kept = 0
    with open(log_path, "wb") as log:
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except InterruptedError:
                continue
            if not chunk:
                break
            if kept < cap:
                part = chunk[: cap - kept]
                log.write(part)
                kept += len(part)
    os.close(fd)


def run_sandboxed(spec: SandboxSpec, argv_for, log_path: Path) -> None:
    """Start bubblewrap as a child and stay as its parent until it ends, then exit
    with its status.

    The sandbox's own stdout and stderr (a kernel's banner or crash message) go into a
    pipe that this process drains: the first ``spec.output_cap`` bytes are kept in
    ``log_path`` (in the job's scratch folder, removed with the job), the rest is
    read and dropped. Nothing the sandbox writes reaches a file that outlives the job
    or any other learner's job. The child dies with this process (PDEATHSIG), and the
    sandbox's pid is written to ``spec.pidfile`` for the worker's watchdog.
    """
    sfd = None
    if spec.seccomp_file:
        sfd = os.open(spec.seccomp_file, os.O_RDONLY)
        os.set_inheritable(sfd, True)
    argv = argv_for(sfd)
    bwrap = which("bwrap")
    r, w = os.pipe()
    launcher = os.getpid()
    pid = os.fork()
    if pid == 0:  # the sandbox
        try:
            os.close(r)
            os.dup2(w, 1)
            os.dup2(w, 2)
            os.close(w)
            die_with_parent(launcher)
            os.execv(bwrap, argv)
        finally:
            os._exit(127)
    os.close(w)
    if sfd is not None:
        os.close(sfd)
    Path(spec.pidfile).write_text(str(pid))
    # a polite stop of the launcher stops the sandbox too
    signal.signal(signal.SIGTERM, lambda *a: (os.kill(pid, signal.SIGKILL), os._exit(143)))
    _drain(r, spec.output_cap, log_path)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            status = 0
            break
    code = os.waitstatus_to_exitcode(status)
    os._exit(code if 0 <= code < 256 else 128 + (-code))


def install_kernelspec(data_dir: Path, spec_path: Path, display_name: str = "Python 3 (sandboxed grading)") -> Path:
    """Write ``<data_dir>/kernels/andrea-sandbox/kernel.json`` (put data_dir on JUPYTER_PATH)."""
    kdir = Path(data_dir) / "kernels" / KERNEL_NAME
    kdir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-I", str(Path(__file__).resolve()), "launch", str(spec_path),
                 "{connection_file}"],
        "display_name": display_name,
        "language": "python",
        # the kernel runs in its own session: interrupt it with a message, not a signal
        "interrupt_mode": "message",
        "metadata": {"debugger": False},
    }
    (kdir / "kernel.json").write_text(json.dumps(spec, indent=1))
    return kdir


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "launch":
        # the worker names itself: a pid read here could already be the reaper's
        launch(sys.argv[2], sys.argv[3], sys.argv[4:],
               parent=int(os.environ.get(PARENT_ENV) or os.getppid()))
    else:
        sys.exit(__doc__)
