"""Run a learner's Jupyter kernel in a sandbox (bubblewrap + resource limits).

nbgrader starts the kernel of every notebook it grades from a kernel spec. The
spec written by :func:`install_kernelspec` does not start ``ipykernel`` directly:
it starts this file as a small launcher (standard library only), which

1. copies the notebook's working directory (``autograded/<student>/<assignment>``)
   into a private scratch directory, regular files only, owned by the sandbox user,
   leaving out the notebooks themselves (nbgrader has put the hidden tests in them);
2. execs ``bwrap`` with a new mount, PID, network, IPC and UTS namespace, in which
   only the Python installation, the virtual environment and ``andrea_ref/`` are
   visible (read-only), the scratch copy appears, writable, at the working
   directory's own path, ``/tmp`` and ``$HOME`` are private, and there is no
   network at all (only a loopback device of its own);
3. inside, ``prlimit`` sets the resource limits (address space, processes,
   CPU time, file size, open files, no core dumps) and, when the grader runs as
   root, ``setpriv`` drops to a dedicated unprivileged uid with no capabilities
   and ``no_new_privs`` before ``python -m ipykernel_launcher`` starts.

The kernel talks to nbgrader over ZeroMQ *ipc* sockets (unix socket files) in the
worker's runtime directory, bound into the sandbox: that is the only channel out,
and it works without a network namespace in common. Killing the ``bwrap`` process
kills every process of the sandbox (it is the parent of the PID namespace's init,
which runs with ``--die-with-parent``).

Where the sandbox user is a dedicated uid (grader runs as root), ``RLIMIT_NPROC``
bounds that uid's processes and threads: each worker has its own uid, so one
learner's fork bomb cannot starve another worker. Run as an ordinary user, the
kernel keeps that user's uid inside a user namespace and the process limit is
counted on top of the processes that user already runs.

What the sandbox cannot do: it cannot stop a learner's code from reading or
changing what is inside its own kernel -- the checks are imported there, and the
hidden test cells run there after the learner's cells, so code that patches the
checks or hooks the cell execution can still cheat its own notebook -- and it
sets no disk quota (only a per-file size limit). It exposes no GPU: the checks
run on the CPU inside it.

Usage by nbgrader (through the kernel spec)::

    python sandbox.py launch SPEC.json CONNECTION_FILE [kernel args...]
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

KERNEL_NAME = "andrea-sandbox"
HOME_IN_SANDBOX = "/home/learner"
GiB = 1 << 30
MiB = 1 << 20


class SandboxUnavailable(RuntimeError):
    """The grading machine cannot run the sandbox; the message says why and what to do."""


@dataclass
class Limits:
    memory: int = 4 * GiB  # RLIMIT_AS of the kernel (torch alone maps about 1.5 GiB)
    processes: int = 256  # RLIMIT_NPROC: processes *and threads* of the sandbox uid
    cpu_seconds: int = 600  # RLIMIT_CPU of the kernel
    file_size: int = 256 * MiB  # RLIMIT_FSIZE: largest file the kernel may write
    open_files: int = 1024  # RLIMIT_NOFILE


@dataclass
class SandboxSpec:
    """Everything the launcher needs, written to JSON next to the kernel spec."""
    scratch_root: str  # per-worker directory for the kernels' private copies
    runtime_dir: str  # per-worker JUPYTER_RUNTIME_DIR: connection files and ipc sockets
    pidfile: str  # the launcher writes the sandbox's pid here (for the worker's watchdog)
    uid: int | None = None  # run as this uid (needs root); None: the caller's uid in a user namespace
    python: str = sys.executable
    ro_paths: list[str] = field(default_factory=list)  # visible read-only at the same path
    pythonpath: list[str] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    env: dict[str, str] = field(default_factory=dict)
    seccomp_file: str | None = None  # a BPF program (classroom.seccomp) given to bwrap --seccomp
    cgroup_procs: list[str] = field(default_factory=list)  # files the launcher writes its pid into
    # a kernel zygote's listening socket (classroom.answer_server): when set, the launcher
    # asks it for a kernel forked from a process that has PyTorch imported already, for
    # working folders below ``work_anchor``; otherwise (or if it fails) bubblewrap per kernel
    zygote_socket: str | None = None
    work_anchor: str | None = None
    output_cap: int = 64 << 10  # bytes of the kernel's own stdout/stderr kept (crash messages)

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path) -> "SandboxSpec":
        data = json.loads(Path(path).read_text())
        data["limits"] = Limits(**data["limits"])
        return cls(**data)


def default_ro_paths(repo: Path) -> tuple[list[str], list[str]]:
    """(read-only paths, PYTHONPATH) for a kernel that can import torch and andrea_ref.

    Only the ``andrea_ref`` package of the repository is visible -- never the
    repository root, which holds solutions/ and the gradebook.
    """
    paths = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix), sys.prefix}
    exe = Path(sys.executable)
    paths.add(str(exe.parent))
    paths.add(os.path.dirname(os.path.realpath(exe)))
    paths.add(str(Path(repo) / "andrea_ref"))
    paths.add(str(Path(repo) / "classroom"))  # the answer server (no secret in it)
    # drop paths inside other paths of the set
    ordered = sorted(paths, key=len)
    kept: list[str] = []
    for p in ordered:
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return kept, [str(repo)]


# ----------------------------------------------------------------------------- checks
def _which(name: str) -> str | None:
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/bin:/bin:/usr/sbin:/sbin")


def requirements_message() -> str:
    return (
        "The grading machine must allow: bubblewrap (Debian/Ubuntu package `bubblewrap`), "
        "prlimit and setpriv (package `util-linux`); when grading as an ordinary user, "
        "unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 on Debian, "
        "user.max_user_namespaces > 0, and on Ubuntu 24.04+ an AppArmor profile that lets "
        "bwrap use them); when grading as root, mount and PID namespaces (a plain VM or "
        "host; in a container, one allowed to create namespaces)."
    )


def check(spec: SandboxSpec) -> None:
    """Start a tiny program through exactly the sandbox a kernel gets, or raise
    :class:`SandboxUnavailable` with a message that says what the machine lacks."""
    for tool in ("bwrap", "prlimit") + (("setpriv",) if spec.uid is not None else ()):
        if _which(tool) is None:
            raise SandboxUnavailable(f"`{tool}` is not installed. " + requirements_message())
    probe = Path(tempfile.mkdtemp(prefix="probe-", dir=spec.scratch_root))
    try:
        _prepare_dir(probe, spec.uid)
        code = ("import os, socket, sys\n"
                "s = socket.socket(); s.settimeout(1)\n"
                "try:\n    s.connect(('192.0.2.1', 9)); print('NET')\n"
                "except OSError:\n    pass\n"
                "print(os.getuid(), os.getcwd())\n")
        sfd = os.open(spec.seccomp_file, os.O_RDONLY) if spec.seccomp_file else None
        argv = bwrap_argv(spec, probe, probe, [spec.python, "-I", "-c", code], seccomp_fd=sfd)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                                  pass_fds=() if sfd is None else (sfd,))
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"bubblewrap could not be started: {exc}. " + requirements_message())
        finally:
            if sfd is not None:
                os.close(sfd)
        if proc.returncode != 0:
            raise SandboxUnavailable(
                "bubblewrap could not create the sandbox:\n  " + (proc.stderr.strip() or proc.stdout.strip())
                + "\n" + requirements_message())
        out = proc.stdout.split()
        want_uid = spec.uid if spec.uid is not None else os.getuid()
        if "NET" in out or not out or out[0] != str(want_uid):
            raise SandboxUnavailable(f"the sandbox does not isolate as expected (got {proc.stdout!r}). "
                                     + requirements_message())
    finally:
        shutil.rmtree(probe, ignore_errors=True)


# ----------------------------------------------------------------------------- launcher
def _prepare_dir(path: Path, uid: int | None, mode: int = 0o700) -> None:
    if uid is not None:
        os.chown(path, uid, uid)
    os.chmod(path, mode)


def copy_regular_tree(src: Path, dst: Path, uid: int | None, skip_top: tuple[str, ...] = ()) -> None:
    """Copy ``src`` into the existing ``dst``: regular files and directories only
    (a symlink planted by anyone is not followed), owned by ``uid``; files directly
    in ``src`` whose name ends with one of ``skip_top`` are left out."""
    for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
        rel = Path(dirpath).relative_to(src)
        for d in list(dirnames):
            s = Path(dirpath) / d
            if s.is_symlink():
                dirnames.remove(d)
                continue
            target = dst / rel / d
            target.mkdir()
            _prepare_dir(target, uid, 0o755)
        for f in filenames:
            s = Path(dirpath) / f
            st = os.lstat(s)
            if not stat.S_ISREG(st.st_mode) or (rel == Path(".") and f.endswith(skip_top)):
                continue
            target = dst / rel / f
            shutil.copyfile(s, target, follow_symlinks=False)
            _prepare_dir(target, uid, 0o644)


def _ancestors(paths) -> list[str]:
    out = set()
    for p in paths:
        parent = os.path.dirname(p.rstrip("/"))
        while parent and parent != "/":
            out.add(parent)
            parent = os.path.dirname(parent)
    return sorted(out, key=lambda s: (s.count("/"), s))


def bwrap_argv(spec: SandboxSpec, workdir_in_sandbox: Path, scratch_work: Path, command: list[str],
               scratch_home: Path | None = None, scratch_tmp: Path | None = None,
               seccomp_fd: int | None = None, extra: list[str] = ()) -> list[str]:
    """The full command line: bwrap, then prlimit, then (as root) setpriv, then ``command``.
    ``seccomp_fd``: an open file descriptor of a BPF program that bwrap installs."""
    lim = spec.limits
    root_mode = spec.uid is not None
    workdir = str(workdir_in_sandbox)
    binds = list(spec.ro_paths) + [workdir, spec.runtime_dir, HOME_IN_SANDBOX]
    argv = ["bwrap", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--hostname", "sandbox"]
    if not root_mode:
        argv += ["--unshare-user", "--cap-drop", "ALL"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib32", "lib64", "libx32", "sbin"):
        p = Path("/") / name
        if p.is_symlink():
            argv += ["--symlink", os.readlink(p), str(p)]
        elif p.is_dir():
            argv += ["--ro-bind", str(p), str(p)]
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/localtime", "/etc/nsswitch.conf"):
        argv += ["--ro-bind-try", f, f]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    if scratch_tmp is not None:
        argv += ["--bind", str(scratch_tmp), "/tmp"]
    else:
        argv += ["--perms", "1777", "--tmpfs", "/tmp"]
    for d in _ancestors(binds):
        if d != "/tmp":
            argv += ["--perms", "0755", "--dir", d]
    for p in spec.ro_paths:
        argv += ["--ro-bind", p, p]
    argv += ["--bind", spec.runtime_dir, spec.runtime_dir]
    argv += ["--bind", str(scratch_work), workdir]
    if scratch_home is not None:
        argv += ["--bind", str(scratch_home), HOME_IN_SANDBOX]
    else:
        argv += ["--perms", "0700", "--tmpfs", HOME_IN_SANDBOX]
    argv += list(extra)
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    argv += ["--chdir", workdir, "--clearenv"]
    env = {
        "HOME": HOME_IN_SANDBOX,
        "PATH": f"{os.path.dirname(spec.python)}:/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join(spec.pythonpath),
        "PYTHONDONTWRITEBYTECODE": "1",
        # never import from the working folder, whatever a learner hands in beside the notebook
        "PYTHONSAFEPATH": "1",
        "PYTHONNOUSERSITE": "1",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "LANG": "C.UTF-8",
        "ANDREA_KERNEL": "off",
        "NBGRADER_EXECUTION": os.environ.get("NBGRADER_EXECUTION", ""),
        "ANDREA_LANG": course_language(),
        **spec.env,
    }
    for k, v in env.items():
        argv += ["--setenv", k, v]
    if not root_mode:
        argv += ["--uid", str(os.getuid()), "--gid", str(os.getgid())]
    nproc = lim.processes if root_mode else _current_tasks(os.getuid()) + lim.processes
    argv += ["--", "prlimit", f"--as={lim.memory}", f"--nproc={nproc}", f"--cpu={lim.cpu_seconds}",
             f"--fsize={lim.file_size}", f"--nofile={lim.open_files}", "--core=0", "--"]
    if root_mode:
        argv += ["setpriv", f"--reuid={spec.uid}", f"--regid={spec.uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return argv + command


def _current_tasks(uid: int) -> int:
    """Processes and threads this uid runs now (RLIMIT_NPROC counts both)."""
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{d}")
            if st.st_uid == uid:
                n += len(os.listdir(f"/proc/{d}/task"))
        except OSError:
            continue
    return n


def launch(spec_path: str, connection_file: str, kernel_args: list[str], parent: int | None = None) -> None:
    """Called by nbgrader (through the kernel spec) with cwd = the notebook's directory;
    ``parent``: the grading worker's pid, read when this process started."""
    _die_with_parent(parent)
    spec = SandboxSpec.load(spec_path)
    workdir = Path(os.getcwd())
    if Path(spec.scratch_root).resolve().is_relative_to(workdir.resolve()):
        sys.exit(f"sandbox launcher: the working directory {workdir} contains the scratch folder")
    scratch = Path(tempfile.mkdtemp(prefix="k-", dir=spec.scratch_root))
    _prepare_dir(scratch, spec.uid, 0o755)
    parts = {}
    for name in ("work", "home", "tmp"):
        parts[name] = scratch / name
        parts[name].mkdir()
        _prepare_dir(parts[name], spec.uid, 0o700 if name != "work" else 0o755)
    # the notebooks being graded stay out: nbgrader has put the hidden tests into them
    copy_regular_tree(workdir, parts["work"], spec.uid, skip_top=(".ipynb",))

    conn = Path(connection_file).resolve()
    info = json.loads(conn.read_text())
    if info.get("transport") != "ipc" or conn.parent != Path(spec.runtime_dir).resolve():
        sys.exit(f"sandbox launcher: the kernel connection must use ipc sockets in {spec.runtime_dir}; "
                 f"got {info.get('transport')} in {conn.parent}")
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


def join_cgroup(procs_files: list[str], pid: int | None = None) -> None:
    """Move this process, or ``pid`` (and so everything it starts), into the cgroup(s)
    whose ``cgroup.procs`` files are given."""
    for f in procs_files:
        with open(f, "w") as fh:
            fh.write(str(os.getpid() if pid is None else pid))


# The course's languages, as andrea_ref.i18n.LANGUAGES (a test keeps the two equal): the
# sandbox is set up by interpreters that cannot import the course package (no torch).
LANGUAGES = ("en", "de", "ka")


def course_language() -> str:
    """ANDREA_LANG for a learner's kernel: the grader's, if it is one of the course's languages."""
    value = os.environ.get("ANDREA_LANG", "")
    return value if value in LANGUAGES else "en"


def _launch_in_zygote(spec: SandboxSpec, workdir: Path, work: Path, conn: Path, kernel_args: list[str],
                      log_path: Path) -> None:
    """Ask the worker's kernel zygote for the kernel; on success stay until it ends
    (draining its output) and exit. Returns only if the zygote could not do it."""
    import socket
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
    import signal
    sfd = None
    if spec.seccomp_file:
        sfd = os.open(spec.seccomp_file, os.O_RDONLY)
        os.set_inheritable(sfd, True)
    argv = argv_for(sfd)
    bwrap = _which("bwrap")
    r, w = os.pipe()
    launcher = os.getpid()
    pid = os.fork()
    if pid == 0:  # the sandbox
        try:
            os.close(r)
            os.dup2(w, 1)
            os.dup2(w, 2)
            os.close(w)
            _die_with_parent(launcher)
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


PARENT_ENV = "ANDREA_SANDBOX_PARENT"  # the grading worker's pid, for the kernel launchers it starts


def _die_with_parent(parent: int | None = None) -> None:
    """SIGKILL this process (soon bwrap, whose own --die-with-parent covers only the
    processes inside) when the grading worker that started it dies.

    ``parent``: the pid this process was started by, taken as early as it can be (a
    process that reads it only here, after the parent has already died, would read
    the reaper's pid and outlive the run)."""
    import ctypes
    import signal
    if parent is None:
        parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_PDEATHSIG = 1
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        sys.exit("sandbox launcher: prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent died before the line above
        os._exit(1)


def popen_confined(argv: list[str], cgroup_procs: list[str], pass_fds: tuple[int, ...]) -> subprocess.Popen:
    """Start ``argv`` (a bubblewrap command line) with no stdin or output, inside the
    cgroup(s) given, from its first instruction on, and dying with this process."""
    procs, parent = list(cgroup_procs), os.getpid()

    def enter():
        join_cgroup(procs)
        _die_with_parent(parent)

    return subprocess.Popen(argv, pass_fds=pass_fds, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=enter)


def kill_uid(uid: int) -> int:
    """SIGKILL every process of ``uid`` (a dedicated sandbox uid: all of them are
    learner code). Returns how many were signalled."""
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.stat(f"/proc/{d}").st_uid == uid:
                os.kill(int(d), 9)
                n += 1
        except (OSError, ProcessLookupError):
            continue
    return n


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


def kill_sandbox(pidfile: str) -> bool:
    """SIGKILL the sandbox whose launcher wrote ``pidfile`` (kills everything inside)."""
    try:
        pid = int(Path(pidfile).read_text().strip())
        if Path(f"/proc/{pid}/comm").read_text().strip() != "bwrap":
            return False  # gone already (and the pid may belong to someone else now)
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 9)
        return True
    except ProcessLookupError:
        return False


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "launch":
        # the worker names itself: a pid read here could already be the reaper's
        launch(sys.argv[2], sys.argv[3], sys.argv[4:],
               parent=int(os.environ.get(PARENT_ENV) or os.getppid()))
    else:
        sys.exit(__doc__)


class KernelZygote:
    """A worker's kernel zygote: one sandbox, started once, under the kernels' uid and
    in their cgroup, that has imported PyTorch, IPython and ``andrea_ref`` and forks a
    fresh, isolated kernel for every notebook (see ``classroom.answer_server``).
    :meth:`start` returns the spec the launcher should use from then on."""

    def __init__(self, spec: SandboxSpec, home: Path, anchor: Path, nest_filter: str | None,
                 zygote_filter: str | None):
        """``zygote_filter``: the filter of the zygote itself, which must still make
        namespaces; every kernel adds ``nest_filter`` on top before it starts."""
        self.spec, self.home, self.anchor, self.nest_filter = spec, Path(home), Path(anchor), nest_filter
        self.zygote_filter = zygote_filter
        self.socket_path = self.home / "ctl.sock"
        self.proc = None

    def start(self) -> SandboxSpec:
        self.launch()
        return self.wait_ready()

    def launch(self) -> None:
        """Start the zygote and return at once (it imports PyTorch meanwhile)."""
        import socket
        server = Path(__file__).resolve().with_name("answer_server.py")
        empty = self.home / "work"
        empty.mkdir(parents=True, exist_ok=True)
        _prepare_dir(empty, self.spec.uid, 0o755)
        os.chmod(self.home, 0o700)
        self.socket_path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o600)
        listener.listen(8)
        fds = [listener.fileno()]
        if self.nest_filter:
            fds.append(os.open(self.nest_filter, os.O_RDONLY))
        sfd = os.open(self.zygote_filter, os.O_RDONLY) if self.zygote_filter else None
        extra = ["--dir", str(self.anchor), "--bind", self.spec.scratch_root, self.spec.scratch_root]
        argv = bwrap_argv(self.spec, empty, empty,
                          [self.spec.python, "-I", "-Xfrozen_modules=off", str(server), "kernel-zygote",
                           *map(str, fds)], seccomp_fd=sfd, extra=extra)
        try:
            self.proc = popen_confined(argv, self.spec.cgroup_procs, tuple(fds) + (() if sfd is None else (sfd,)))
        finally:
            listener.close()
            for fd in fds[1:] + ([sfd] if sfd is not None else []):
                os.close(fd)

    def wait_ready(self) -> SandboxSpec:
        """Wait until the zygote answers; the spec the launcher should use from then on."""
        if self._ask(b"ping", timeout=180) != b"ready":
            self.close()
            raise SandboxUnavailable("the kernel zygote did not start")
        from dataclasses import replace
        return replace(self.spec, zygote_socket=str(self.socket_path), work_anchor=str(self.anchor))

    def _ask(self, msg: bytes, timeout: float) -> bytes:
        import socket
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
                s.settimeout(timeout)
                s.connect(str(self.socket_path))
                s.send(msg)
                return s.recv(16)
        except OSError:
            return b""

    def reset(self) -> bool:
        """Kill the kernel (and all it started); the zygote stays. False if it is gone."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        if self._ask(b"reset", timeout=10) == b"ok":
            return True
        self.close()
        return False

    def close(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
        self.socket_path.unlink(missing_ok=True)
