"""The bubblewrap sandbox a learner's code runs in: its settings and its command line.

:class:`SandboxSpec` holds everything a sandbox needs (written to JSON for the kernel
launcher, :mod:`classroom.isolation.sandbox`); :func:`bwrap_argv` turns it into the
command line:

1. ``bwrap`` with a new mount, PID, network, IPC and UTS namespace, in which only the
   Python installation, the virtual environment, the course's ``andrea_ref/`` and the
   grader's ``classroom/`` are visible (read-only), the job's scratch copy appears,
   writable, at the working directory's own path, ``/tmp`` and ``$HOME`` are private,
   and there is no network at all (only a loopback device of its own);
2. inside, ``prlimit`` sets the resource limits (address space, processes, CPU time,
   file size, open files, no core dumps) and, when the grader runs as root,
   ``setpriv`` drops to a dedicated unprivileged uid with no capabilities and
   ``no_new_privs`` before the command starts.

Where the sandbox user is a dedicated uid (grader runs as root), ``RLIMIT_NPROC``
bounds that uid's processes and threads: each worker has its own uid, so one
learner's fork bomb cannot starve another worker. Run as an ordinary user, the
kernel keeps that user's uid inside a user namespace and the process limit is
counted on top of the processes that user already runs.

What the sandbox cannot do: it cannot stop a learner's code from reading or
changing what is inside its own kernel -- the checks are imported there, and the
hidden test cells run there after the learner's cells, so code that patches the
checks or hooks the cell execution can still cheat its own notebook (the points come
from :mod:`classroom.scoring` for that reason) -- and it sets no disk quota (only a
per-file size limit). It exposes no GPU: the checks run on the CPU inside it.

Standard library only: the kernel launcher and ordinary users' system Pythons import it.
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

from .backend import SandboxUnavailable

HOME_IN_SANDBOX = "/home/learner"
# Learner code and the checks run on one thread: the checks' time limits are set for one,
# and a pool as wide as the machine is many times slower on busy cores (the figures are at
# andrea_ref.grading.watch.one_thread, which puts every checked call on one thread
# anywhere). The instructor's solutions build uses the same settings
# (classroom.instructor_book), for the cells no check watches too.
KERNEL_THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
GiB = 1 << 30
MiB = 1 << 20


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
    runtime_dir: str  # per-worker JUPYTER_RUNTIME_DIR: connection files and ipc sockets ("": none)
    pidfile: str  # the launcher writes the sandbox's pid here (for the worker's watchdog)
    uid: int | None = None  # run as this uid (needs root); None: the caller's uid in a user namespace
    python: str = sys.executable
    ro_paths: list[str] = field(default_factory=list)  # visible read-only at the same path
    pythonpath: list[str] = field(default_factory=list)
    limits: Limits = field(default_factory=Limits)
    env: dict[str, str] = field(default_factory=dict)
    seccomp_file: str | None = None  # a BPF program (classroom.isolation.seccomp) given to bwrap --seccomp
    cgroup_procs: list[str] = field(default_factory=list)  # files the launcher writes its pid into
    # a kernel zygote's listening socket (classroom.isolation.zygote): when set, the launcher
    # asks it for a kernel forked from a process that has PyTorch imported already, for
    # working folders below ``work_anchor``; otherwise (or if it fails) bubblewrap per kernel
    zygote_socket: str | None = None
    work_anchor: str | None = None
    output_cap: int = 64 << 10  # bytes of the kernel's own stdout/stderr kept (crash messages)
    # the working directory is a fresh tmpfs of the sandbox's own, not the host folder
    # (answer servers and zygotes: nothing they write there outlives them)
    private_work: bool = False

    def save(self, path: Path) -> None:
        Path(path).write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path) -> "SandboxSpec":
        data = json.loads(Path(path).read_text())
        data["limits"] = Limits(**data["limits"])
        return cls(**data)


def default_ro_paths(repo: Path, course: Path | None = None) -> tuple[list[str], list[str]]:
    """(read-only paths, PYTHONPATH) for a kernel that can import torch and andrea_ref.

    Only the ``andrea_ref`` package of the course (``course``, the grading run's
    snapshot; default ``repo``) and the grader's ``classroom`` package of ``repo`` are
    visible -- never a repository root, which holds solutions/ and the gradebook.
    """
    course = Path(course or repo)
    paths = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix), sys.prefix}
    exe = Path(sys.executable)
    paths.add(str(exe.parent))
    paths.add(os.path.dirname(os.path.realpath(exe)))
    paths.add(str(course / "andrea_ref"))
    paths.add(str(Path(repo) / "classroom"))  # the answer server (no secret in it)
    # drop paths inside other paths of the set
    ordered = sorted(paths, key=len)
    kept: list[str] = []
    for p in ordered:
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return kept, list(dict.fromkeys([str(course), str(repo)]))


# ----------------------------------------------------------------------------- checks
def which(name: str) -> str | None:
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
        if which(tool) is None:
            raise SandboxUnavailable(f"`{tool}` is not installed. " + requirements_message())
    probe = Path(tempfile.mkdtemp(prefix="probe-", dir=spec.scratch_root))
    try:
        prepare_dir(probe, spec.uid)
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


# ----------------------------------------------------------------------------- command line
def prepare_dir(path: Path, uid: int | None, mode: int = 0o700) -> None:
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
            prepare_dir(target, uid, 0o755)
        for f in filenames:
            s = Path(dirpath) / f
            st = os.lstat(s)
            if not stat.S_ISREG(st.st_mode) or (rel == Path(".") and f.endswith(skip_top)):
                continue
            target = dst / rel / f
            shutil.copyfile(s, target, follow_symlinks=False)
            prepare_dir(target, uid, 0o644)


def empty_dir(path: Path, keep=()) -> None:
    """Remove everything in the folder ``path`` (links as links, never followed) but the
    names in ``keep``; a missing folder is fine."""
    try:
        items = list(Path(path).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return
    for p in items:
        if p.name in keep:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


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
    binds = list(spec.ro_paths) + [workdir, HOME_IN_SANDBOX] + ([spec.runtime_dir] if spec.runtime_dir else [])
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
    if spec.runtime_dir:
        argv += ["--bind", spec.runtime_dir, spec.runtime_dir]
    if spec.private_work:
        argv += ["--perms", "1777", "--tmpfs", workdir]
    else:
        argv += ["--bind", str(scratch_work), workdir]
    if scratch_home is not None:
        argv += ["--bind", str(scratch_home), HOME_IN_SANDBOX]
    else:  # a private tmpfs; as root bwrap makes it root's, so the sandbox's uid needs the sticky mode
        argv += ["--perms", "1777" if root_mode else "0700", "--tmpfs", HOME_IN_SANDBOX]
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
        **KERNEL_THREADS,
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


# The course's languages, as andrea_ref.i18n.LANGUAGES (a test keeps the two equal): the
# sandbox is set up by interpreters that cannot import the course package (no torch).
LANGUAGES = ("en", "de", "ka")


def course_language() -> str:
    """ANDREA_LANG for a learner's kernel: the grader's, if it is one of the course's languages."""
    value = os.environ.get("ANDREA_LANG", "")
    return value if value in LANGUAGES else "en"


