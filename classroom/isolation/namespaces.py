"""Fresh namespaces for one job, made by a fork of the zygote (ctypes over the C library).

:func:`isolate_child` gives the calling process -- a fork of the zygote
(:mod:`classroom.isolation.answer_server`) -- a user namespace of its own (no
capabilities outside it), a mount namespace (fresh, size-capped ``/tmp``, ``$HOME`` and
``/dev/shm``), a PID namespace (when the job ends, everything it started dies with it),
no network and its own IPC; then drops every capability and adds the system-call filter
that forbids new namespaces and mounts (:mod:`classroom.isolation.seccomp`), before any
learner code runs. :func:`kernel_mounts` adds, for a kernel, its private working folder
at the notebook's own path and hides every other job's scratch space.

bubblewrap does the same for the first sandbox (:mod:`classroom.isolation.bwrap`); this
is the second level, inside it, where no bwrap binary runs. Standard library only.
"""
from __future__ import annotations

import ctypes
import os
import re
import signal
from collections import defaultdict

from .seccomp import install

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_REC, MS_PRIVATE = 16384, 1 << 18
# per-mount flags a remount must repeat (in a user namespace they are locked: leaving one
# out is refused with EPERM)
MOUNT_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": 1024,
               "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24, "nosymfollow": 256}
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 4, 24, 47, 4
HOME = os.environ.get("HOME", "/home/learner")
SCRATCH_SIZES = {"/tmp": "256m", HOME: "64m", "/dev/shm": "64m"}


def set_dumpable(flag: bool) -> None:
    """Whether this process may be traced or have its memory read by its own uid."""
    _libc.prctl(PR_SET_DUMPABLE, 1 if flag else 0, 0, 0, 0)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount_tmpfs(target: str, size: str) -> None:
    _check(_libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                       f"size={size},mode=1777".encode()), f"mount tmpfs on {target}")


def _drop_capabilities() -> None:
    """No capability left, not even inside the fresh user namespace."""
    for cap in range(64):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last one: fine
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    _check(_libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()), "capset")


def isolate_child(nest_filter: bytes | None, prepare=None) -> None:
    """In a fork of the zygote: fresh namespaces and scratch space, then no way back.
    Forks once more; the caller continues as PID 1 of the new PID namespace.
    ``prepare()`` runs there while the process may still mount (for a kernel's
    working folder)."""
    uid, gid = os.getuid(), os.getgid()
    # the zygote is not dumpable, which makes /proc/self root's: this process must write
    # its own uid map there (no other process of this uid is alive to take advantage)
    set_dumpable(True)
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
                         | CLONE_NEWUTS), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    inherited = {m.id for m in mountinfo()}  # the zygote's mounts, as this namespace copied them
    if prepare is not None:
        prepare = prepare()  # before the scratch mounts, which may hide what it needs
    # read-only mounts below a scratch folder (a course or Python environment that lives
    # in /tmp, say) stay visible; everything writable there is hidden
    kept = [(path, os.open(path, os.O_PATH)) for path in _readonly_mounts_below(SCRATCH_SIZES)]
    for target, size in SCRATCH_SIZES.items():
        if os.path.isdir(target):
            _mount_tmpfs(target, size)
    for path, fd in kept:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "a").close()
        _bind(f"/proc/self/fd/{fd}", path)  # a bind keeps the read-only flag of its source
        os.close(fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote ignores it; we wait below
    pid = os.fork()
    if pid:  # stay until the server is done, so the zygote can reap both
        try:
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
        except OSError:
            code = 1
        os._exit(code if 0 <= code < 256 else 1)
    set_dumpable(False)
    os.chdir("/tmp")
    if prepare is not None:
        prepare()
    seal_inherited(inherited)  # only what was mounted for this job stays writable
    _drop_capabilities()
    if nest_filter:
        install(nest_filter)


class Mount:
    """One line of /proc/self/mountinfo."""

    def __init__(self, line: str):
        fields = line.split()
        self.id, self.parent = int(fields[0]), int(fields[1])
        self.point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])  # \040: a space
        self.options = fields[5].split(",")

    @property
    def writable(self) -> bool:
        return "rw" in self.options


def mountinfo() -> list[Mount]:
    with open("/proc/self/mountinfo") as f:
        return [Mount(line) for line in f if line.strip()]


def _inside(path: str, top: str) -> bool:
    return path == top or top == "/" or path.startswith(top.rstrip("/") + "/")


def visible(mounts: list[Mount]) -> list[Mount]:
    """The mounts a path lookup can reach: not covered by another mount at or above
    their mount point (a covered mount keeps its place in the table, unreachable)."""
    by_id = {m.id: m for m in mounts}
    children = defaultdict(list)
    for m in mounts:
        children[m.parent].append(m)

    def reachable(m: Mount) -> bool:
        if any(c.point == m.point for c in children[m.id]):
            return False  # something is mounted on top of it
        while m.parent in by_id:  # no sibling on the way up covers it
            parent = by_id[m.parent]
            if any(c is not m and _inside(m.point, c.point) for c in children[m.parent]):
                return False
            m = parent
        return True

    return [m for m in mounts if reachable(m)]


def seal_inherited(inherited: set[int]) -> None:
    """Remount read-only every writable mount this job inherited from the zygote (its
    root, its /dev, its working and runtime folders, any bind), so that nothing a job
    writes can reach the next job forked from the same zygote. The mounts made for this
    job (its fresh /tmp, $HOME and /dev/shm; a kernel's working and runtime folders) and
    /proc stay as they are."""
    for m in visible(mountinfo()):
        if m.id not in inherited or not m.writable or _inside(m.point, "/proc"):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for option in m.options:
            flags |= MOUNT_FLAGS.get(option, 0)
        _check(_libc.mount(None, m.point.encode(), None, flags, None), f"make {m.point} read-only")


def _readonly_mounts_below(targets) -> list[str]:
    """Read-only mount points strictly below any of ``targets``, outermost first, none
    inside another one listed (a recursive bind carries those)."""
    found = [m.point for m in mountinfo()
             if not m.writable and any(m.point.startswith(t.rstrip("/") + "/") for t in targets)]
    found.sort(key=lambda p: (p.count("/"), p))
    top = []
    for point in found:
        if not any(point.startswith(t + "/") for t in top):
            top.append(point)
    return top


def _bind(source: str, target: str) -> None:
    _check(_libc.mount(source.encode(), target.encode(), None, 4096 | MS_REC, None), f"bind {target}")  # MS_BIND


def _under_scratch(path: str) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in SCRATCH_SIZES)


def kernel_mounts(request: dict):
    """Mount plan for a kernel: its private copy ``work`` (in the scratch space) seen
    at the notebook's own path ``workdir`` below ``anchor``, every other job's scratch
    space hidden. Opens ``work`` before the fresh ``/tmp`` may hide it; the returned
    step does the mounts in the new PID namespace."""
    anchor, workdir, work = request["anchor"], request["workdir"], request["work"]
    scratch = request["scratch_root"]
    if os.path.commonpath([anchor, workdir]) != anchor or os.path.commonpath([scratch, work]) != scratch:
        raise OSError(22, "the kernel's folders are not where the zygote expects them")

    runtime = request["runtime_dir"]

    def before():
        fd = os.open(work, os.O_PATH | os.O_DIRECTORY)
        rt = os.open(runtime, os.O_PATH | os.O_DIRECTORY)

        def after():
            if not _under_scratch(anchor):
                _mount_tmpfs(anchor, "16m")
            os.makedirs(workdir, exist_ok=True)
            _bind(f"/proc/self/fd/{fd}", workdir)
            os.close(fd)
            # a mount of this job's own (the zygote's is sealed read-only; a fresh /tmp
            # may have hidden it): the kernel's sockets folder, emptied for each kernel
            os.makedirs(runtime, exist_ok=True)
            _bind(f"/proc/self/fd/{rt}", runtime)
            os.close(rt)
            if not _under_scratch(scratch):
                _mount_tmpfs(scratch, "1m")  # no other job's copy is visible
        return after

    return before


