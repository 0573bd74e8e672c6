"""One leaf cgroup of a grading run (:class:`Group`), and the changes to the cgroup file
system that every change the caps make goes through (:func:`write`, :func:`mkdir`,
:func:`rmdir`; :func:`rmdir_retry`).

A process joins a group by writing its own pid into every file of
:meth:`Group.procs_files` (a launcher with nothing but the standard library can do
that right before it execs the kernel); its children are born inside.
:meth:`Group.kill_all` and :meth:`Group.remove` kill every member (the latter removes
the folders too), so a job leaves nothing running behind it; :meth:`Group.memory_peak`
and :meth:`Group.oom_kills` say what the group used and what the cap killed.

:mod:`.cgroups` opens the run's tree and makes the groups with their caps;
:mod:`.cgroup_layout` finds the machine's cgroup layout.
"""
from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

from .cgroup_layout import read

__all__ = ["Group", "mkdir", "rmdir", "rmdir_retry", "write"]


# Changes go through these three, so tests can stand a fake kernel in for cgroupfs
# (reads are plain reads of the files: cgroup_layout.read).
def write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def mkdir(path: Path) -> None:
    os.mkdir(path)


def rmdir(path: Path) -> None:
    os.rmdir(path)


# ----------------------------------------------------------------------------- groups
class Group:
    """One leaf cgroup with a memory cap and a cap on processes and threads.

    ``path`` is the folder (v2) or the pair (memory folder, pids folder) (v1)."""

    def __init__(self, version: str, dirs: list[Path], name: str):
        self.version = version
        self.name = name
        self.dirs = list(dirs)
        self.path = self.dirs[0] if version == "v2" else tuple(self.dirs)

    def __repr__(self) -> str:
        return f"Group({self.version}, {self.path!r})"

    @property
    def _mem(self) -> Path:
        return self.dirs[0]

    def procs_files(self) -> list[str]:
        """The files a process writes its own pid into to join (one per hierarchy)."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def join(self, pid: int) -> None:
        for f in self.procs_files():
            write(Path(f), str(int(pid)))

    def pids(self) -> list[int]:
        out: set[int] = set()
        for f in self.procs_files():
            try:
                out.update(int(w) for w in read(Path(f)).split())
            except FileNotFoundError:
                pass
        return sorted(out)

    def kill_all(self, timeout: float = 10.0) -> None:
        """SIGKILL every member, again and again until none is left (a member may be
        forking while it is killed). Raises OSError(EBUSY) if members outlive ``timeout``."""
        kill_file = self._mem / "cgroup.kill"
        if self.version == "v2" and kill_file.exists():
            try:
                write(kill_file, "1")
            except FileNotFoundError:
                return
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        while True:
            members = self.pids()
            if not members:
                return
            if time.monotonic() > deadline:
                raise OSError(errno.EBUSY, f"processes {members} of {self.path} survived SIGKILL "
                                           f"for {timeout:.0f} s")
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)

    def memory_peak(self) -> int | None:
        """The most memory the group has held, in bytes (None where the kernel does not say)."""
        name = "memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes"
        try:
            return int(read(self._mem / name).split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def oom_kills(self) -> int:
        """How many of the group's processes the kernel has killed for hitting the cap."""
        if self.version == "v2":
            files = [("memory.events", "oom_kill")]
        else:
            files = [("memory.oom_control", "oom_kill"), ("memory.failcnt", None)]
        for name, key in files:
            try:
                text = read(self._mem / name)
            except OSError:
                continue
            if key is None:
                return int(text.split()[0]) if text.split() else 0
            for line in text.splitlines():
                words = line.split()
                if len(words) == 2 and words[0] == key:
                    return int(words[1])
        return 0

    def remove(self, timeout: float = 10.0) -> None:
        """Kill every member, then remove the folder(s); a folder already gone is fine.

        A process may still join after the members were killed (a sandbox launcher
        whose worker died while it was starting): while the kernel answers EBUSY, the
        group is emptied again, until ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            self.kill_all()
            try:
                for d in self.dirs:
                    rmdir_retry(d, timeout=0.5)
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise


def rmdir_retry(d: Path, timeout: float = 5.0) -> None:
    # rmdir answers EBUSY for a moment after the last member was killed.
    deadline = time.monotonic() + timeout
    while True:
        try:
            rmdir(d)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.02)
