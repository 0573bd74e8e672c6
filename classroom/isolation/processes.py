"""Processes of the sandbox as the grader sees them: started inside a cgroup, dying with
the process that started them, killed by uid or by pid file.

Standard library only: the kernel launcher uses it too.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from pathlib import Path


def join_cgroup(procs_files: list[str], pid: int | None = None) -> None:
    """Move this process, or ``pid`` (and so everything it starts), into the cgroup(s)
    whose ``cgroup.procs`` files are given."""
    for f in procs_files:
        with open(f, "w") as fh:
            fh.write(str(os.getpid() if pid is None else pid))


PARENT_ENV = "ANDREA_SANDBOX_PARENT"  # the grading worker's pid, for the kernel launchers it starts


def die_with_parent(parent: int | None = None) -> None:
    """SIGKILL this process (soon bwrap, whose own --die-with-parent covers only the
    processes inside) when the grading worker that started it dies.

    ``parent``: the pid this process was started by, taken as early as it can be (a
    process that reads it only here, after the parent has already died, would read
    the reaper's pid and outlive the run)."""
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
        die_with_parent(parent)

    return subprocess.Popen(argv, pass_fds=pass_fds, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=enter)


def stop(proc: subprocess.Popen | None) -> None:
    """SIGKILL ``proc`` (if there is one) and reap it."""
    if proc is not None:
        proc.kill()
        proc.wait()


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


