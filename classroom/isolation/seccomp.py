"""System-call filters for the learner's kernel (seccomp BPF).

The sandbox's namespaces hide files, processes and the network, but some kernel
state is kept per *uid* and is not namespaced at all. The kernel keyring is the
plain case: a learner's code can ``add_key`` a payload into its uid's user keyring,
and the next kernel started under that uid (the next learner graded by the same
worker) can read it back -- a channel from one learner to another that no mount or
PID namespace closes. A handful of other calls give no Python or PyTorch kernel
anything it needs and only widen what learner code can reach: tracing other
processes, loading BPF programs or kernel modules, io_uring, setting the clock,
opening files by handle.

This module builds seccomp filters that make those calls fail with ``EPERM``. Two
lists exist because the sandbox has two stages:

* :data:`SANDBOX_DENY` is applied to everything inside the sandbox (bubblewrap's
  ``--seccomp FD`` installs it). It leaves ``unshare``, ``mount`` and ``clone`` alone:
  a trusted helper inside the sandbox still uses them once, to make a job's own
  namespaces, before any learner code runs.
* :data:`NEST_DENY` is stacked on top for the learner's code itself: no new
  namespaces (``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*`` flag) and no
  mount API, so learner code cannot build a user namespace in which it holds
  capabilities again. ``clone`` is filtered on its flags argument rather than
  refused (threads and ``fork`` need it); ``clone3`` passes its flags in memory, where
  a filter cannot look, so it answers ``ENOSYS`` and the C library falls back to
  ``clone``.

The filter allows every other call of the machine's own ABI and refuses (``EPERM``)
every call made through a foreign one (x32 numbers or ``int 0x80`` on x86_64), so the
deny lists cannot be sidestepped by calling the same function under another number.

:func:`program` needs the ``pyseccomp`` package and ``libseccomp``;
:func:`install`, which puts a ready program on the running process, needs only the
standard library, so a launcher that cannot import ``pyseccomp`` can still apply a
program written by the grader with :func:`write_program`.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import tempfile
from pathlib import Path
from typing import Iterable

# Every call here fails with EPERM inside the sandbox. Names the running
# architecture does not have are skipped when the program is built.
SANDBOX_DENY: tuple[str, ...] = (
    "keyctl",             # kernel keyrings are per uid, not namespaced: a channel to the next learner
    "add_key",            # same: stores a key in the uid's keyring
    "request_key",        # same: looks a key up (and may call out to user space)
    "ptrace",             # attaching to or reading other processes
    "process_vm_readv",   # reading another process's memory
    "process_vm_writev",  # writing another process's memory
    "pidfd_getfd",        # stealing another process's file descriptors
    "bpf",                # loading BPF programs and maps: large kernel attack surface
    "perf_event_open",    # performance counters: side channels, kernel attack surface
    "userfaultfd",        # stalls kernel page faults at will: the classic exploit helper
    "io_uring_setup",     # io_uring runs I/O outside the reach of this filter
    "io_uring_enter",     # same
    "io_uring_register",  # same
    "kexec_load",         # replacing the running kernel
    "kexec_file_load",    # same
    "init_module",        # loading kernel modules
    "finit_module",       # same
    "delete_module",      # unloading kernel modules
    "reboot",             # rebooting the machine
    "swapon",             # changing the machine's swap
    "swapoff",            # same
    "acct",               # process accounting to a file of the caller's choice
    "quotactl",           # disk quotas of the machine
    "quotactl_fd",        # same, by file descriptor
    "syslog",             # the kernel log (klogctl): kernel addresses, other users' messages
    "iopl",               # raw I/O port access (x86)
    "ioperm",             # same
    "vm86",               # virtual 8086 mode (32-bit x86 only)
    "vm86old",            # same
    "settimeofday",       # setting the machine's clock
    "clock_settime",      # same
    "clock_adjtime",      # same
    "adjtimex",           # same
    "open_by_handle_at",  # opens files by handle, around the mount namespace (the "shocker" escape)
    "name_to_handle_at",  # makes such handles
    "lookup_dcookie",     # kernel profiling internals
)

# Added on top of SANDBOX_DENY for the learner's own code (see the module docstring).
NEST_DENY: tuple[str, ...] = (
    "unshare",            # new namespaces (a user namespace hands back capabilities)
    "setns",              # joining other namespaces
    "clone",              # only when the flags hold a CLONE_NEW* bit: threads and fork still work
    "clone3",             # answers ENOSYS: its flags are out of the filter's sight, libc falls back to clone
    "mount",              # mounting file systems
    "umount2",            # unmounting (uncovering what the sandbox hides)
    "pivot_root",         # changing the root file system
    "chroot",             # same
    "mount_setattr",      # new mount API: changing mount flags (read-only binds)
    "move_mount",         # new mount API
    "open_tree",          # new mount API: detached copies of mounts
    "fsopen",             # new mount API
    "fsconfig",           # new mount API
    "fsmount",            # new mount API
    "fspick",             # new mount API
)

#: Both lists: what the learner's kernel runs under.
LEARNER_DENY: tuple[str, ...] = SANDBOX_DENY + NEST_DENY

# CLONE_NEW* flags that clone(2) itself accepts (CLONE_NEWTIME lies inside the
# exit-signal byte of clone's flags and only works with unshare/clone3).
CLONE_NEW_FLAGS = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}

# Calls numbered since Linux 5.1 share one number on every architecture named here;
# used where an older libseccomp does not know the name yet.
_UNIFIED_NUMBERS = {
    "pidfd_getfd": 438, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "clone3": 435, "mount_setattr": 442, "quotactl_fd": 443,
}
_UNIFIED_ARCHES = {"x86_64", "amd64", "aarch64", "arm64", "riscv64", "ppc64le", "ppc64", "s390x"}

_SIZEOF_SOCK_FILTER = 8
_BPF_MAXINSNS = 4096


def _machine() -> str:
    return platform.machine().lower()


def _import_pyseccomp():
    try:
        import pyseccomp
    except (ImportError, OSError, RuntimeError) as exc:
        # pyseccomp raises RuntimeError when libseccomp.so.2 cannot be found.
        raise RuntimeError(
            f"seccomp filters cannot be built here: {exc}. Install the Python package "
            "`pyseccomp` (requirements.txt) and the system library libseccomp "
            "(Debian/Ubuntu package `libseccomp2`).") from exc
    return pyseccomp


def _resolve(sc, name: str) -> int | None:
    """The call's number on the running architecture, None where the architecture
    lacks it; ValueError for a name no architecture knows (a typo)."""
    nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
    if nr >= 0:
        return nr
    if nr == -1 and name in _UNIFIED_NUMBERS and _machine() in _UNIFIED_ARCHES:
        return _UNIFIED_NUMBERS[name]          # libseccomp older than the call
    if nr < -1:
        return None                            # a pseudo number: other architectures have it
    for arch in (sc.Arch.X86, sc.Arch.X86_64, sc.Arch.AARCH64, sc.Arch.ARM):
        try:
            if sc.resolve_syscall(arch, name) >= 0:
                return None
        except Exception:                      # noqa: BLE001 -- an arch this libseccomp lacks
            continue
    raise ValueError(f"unknown system call {name!r}")


def program(deny: Iterable[str]) -> bytes:
    """The BPF program (an array of ``struct sock_filter``, as ``bwrap --seccomp FD``
    reads it) for the running architecture: every call named in ``deny`` fails with
    ``EPERM``, except ``clone`` (refused only when its flags hold a ``CLONE_NEW*`` bit)
    and ``clone3`` (``ENOSYS``); every other call is allowed, and calls of a foreign
    ABI are refused with ``EPERM``."""
    sc = _import_pyseccomp()
    eperm, enosys = sc.ERRNO(errno.EPERM), sc.ERRNO(errno.ENOSYS)
    filt = sc.SyscallFilter(sc.ALLOW)
    # Only the native ABI is in the filter; any other arch (i386 through int 0x80,
    # x32 numbers on x86_64) takes this action instead of the ALLOW default.
    filt.set_attr(sc.Attr.ACT_BADARCH, eperm)
    flags_arg = 1 if _machine().startswith("s390") else 0   # s390's clone takes the stack first
    for name in dict.fromkeys(deny):
        nr = _resolve(sc, name)
        if nr is None:
            continue
        if name == "clone":
            for bit in CLONE_NEW_FLAGS.values():
                filt.add_rule(eperm, nr, sc.Arg(flags_arg, sc.MASKED_EQ, bit, bit))
        elif name == "clone3":
            filt.add_rule(enosys, nr)
        else:
            filt.add_rule(eperm, nr)
    with tempfile.TemporaryFile() as out:
        filt.export_bpf(out)
        out.seek(0)
        data = out.read()
    if not data or len(data) % _SIZEOF_SOCK_FILTER:
        raise RuntimeError(f"libseccomp exported a malformed program ({len(data)} bytes)")
    return data


def write_program(path, deny: Iterable[str]) -> Path:
    """Write :func:`program` ``(deny)`` to ``path`` (mode 0644) and return the path."""
    data = program(deny)
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.fchmod(fd, 0o644)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
    return path


def available() -> str | None:
    """None when filters can be built and installed here, else the reason."""
    status = ""
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        pass
    if status and "Seccomp:" not in status:
        return "the kernel has no seccomp support (CONFIG_SECCOMP_FILTER)"
    try:
        program(LEARNER_DENY)
    except Exception as exc:                   # noqa: BLE001 -- the reason is the answer
        return str(exc)
    return None


# ----------------------------------------------------------------------------- install
_PR_SET_SECCOMP = 22
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_MODE_FILTER = 2
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1

# __NR_seccomp of the process's own ABI.
_NR_SECCOMP_64 = {"x86_64": 317, "amd64": 317, "aarch64": 277, "arm64": 277, "riscv64": 277,
                  "ppc64le": 358, "ppc64": 358, "s390x": 348}
_NR_SECCOMP_32 = {"x86_64": 354, "amd64": 354, "i386": 354, "i686": 354, "aarch64": 383,
                  "armv7l": 383, "armv8l": 383}


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _nr_seccomp() -> int | None:
    table = _NR_SECCOMP_64 if ctypes.sizeof(ctypes.c_void_p) == 8 else _NR_SECCOMP_32
    return table.get(_machine())


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def install(program: bytes) -> None:
    """Install ``program`` (from :func:`program`) on the calling process, all its
    threads, after setting ``no_new_privs``. Filters stack: a call is allowed only if
    every installed filter allows it. Raises OSError with the reason on failure.
    Standard library only."""
    data = bytes(program)
    count = len(data) // _SIZEOF_SOCK_FILTER
    if not data or len(data) % _SIZEOF_SOCK_FILTER or count > _BPF_MAXINSNS:
        raise OSError(errno.EINVAL, f"not a seccomp BPF program: {len(data)} bytes (a multiple of "
                                    f"{_SIZEOF_SOCK_FILTER}, at most {_BPF_MAXINSNS} instructions)")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.restype = ctypes.c_int
    libc.syscall.restype = ctypes.c_long
    ulong = ctypes.c_ulong

    if libc.prctl(_PR_SET_NO_NEW_PRIVS, ulong(1), ulong(0), ulong(0), ulong(0)) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"cannot set no_new_privs before installing the seccomp filter: {os.strerror(e)}")

    buf = ctypes.create_string_buffer(data, len(data))
    prog = _SockFprog(count, ctypes.cast(buf, ctypes.c_void_p))
    nr = _nr_seccomp()
    e = errno.ENOSYS
    if nr is not None:
        rc = libc.syscall(ctypes.c_long(nr), ulong(_SECCOMP_SET_MODE_FILTER),
                          ulong(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog))
        if rc == 0:
            return
        if rc > 0:
            raise OSError(errno.EBUSY, f"seccomp filter not installed: thread {rc} of this process "
                                       "cannot take it (it already runs under a different filter)")
        e = ctypes.get_errno()
    if e == errno.ENOSYS:
        # No seccomp(2) (Linux < 3.17, or an unknown ABI): prctl covers only the calling thread.
        if _threads() > 1:
            raise OSError(errno.ENOSYS, "seccomp(2) is missing and this process already has several "
                                        "threads; prctl(PR_SET_SECCOMP) would filter only one of them: "
                                        "install the filter before any thread starts")
        if libc.prctl(_PR_SET_SECCOMP, ulong(_SECCOMP_MODE_FILTER), ctypes.byref(prog),
                      ulong(0), ulong(0)) == 0:
            return
        e = ctypes.get_errno()
    reason = {
        errno.EINVAL: "the kernel rejected the program (not a valid filter, or no seccomp "
                      "filter support: CONFIG_SECCOMP_FILTER)",
        errno.EACCES: "no_new_privs is not set and the process lacks CAP_SYS_ADMIN",
        errno.ENOMEM: "too many filters stacked on this process, or out of memory",
        errno.EFAULT: "the program could not be read",
    }.get(e, os.strerror(e))
    raise OSError(e, f"seccomp filter not installed: {reason}")
