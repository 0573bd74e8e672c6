"""What two grading runs on one machine must not share, locked for the length of a run.

- **Sandbox uids** (as root): worker K's kernels run as ``BASE+K``, its answer servers as
  ``BASE+500+K``, the sandbox probe as ``BASE+999`` (:mod:`classroom.isolation.uids`), and
  each run kills every process of its uids when it ends. Two runs whose uids meet would
  kill each other's kernels and share RLIMIT_NPROC counts, so the second is refused.
- **A SQLite gradebook** serves one grading run at a time (SQLite has no row locks: several
  graders take their work from a PostgreSQL gradebook).

Each is an ``flock`` on a file in ``/run/lock`` (or the temporary folder where that cannot
be written), so a lock ends with the process that holds it, however it ends; the file
names the holder for the message. Standard library only.
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import tempfile
from contextlib import ExitStack
from pathlib import Path

from ..isolation.uids import ANSWER_UID_OFFSET, PROBE_UID_OFFSET


class InUse(Exception):
    """Another grading run on this machine holds what this one needs (one line)."""


def lock_dir() -> Path:
    for d in (Path("/run/lock"), Path(tempfile.gettempdir())):
        if d.is_dir() and os.access(d, os.W_OK | os.X_OK):
            return d
    return Path(tempfile.gettempdir())


def _hold(stack: ExitStack, name: str, what: str) -> str | None:
    """flock ``name``; returns None when held, else what the file says of its holder."""
    path = lock_dir() / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except PermissionError:  # another user's lock file: flock needs no write access
        fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
            os.close(fd)
            raise
        holder = os.pread(fd, 400, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        return holder
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}: {what}\n".encode(), 0)
    except OSError:
        pass  # read-only: the holder goes unnamed
    stack.callback(os.close, fd)  # closing the file ends the lock
    return None


def run_uids(base: int, workers: int) -> list[int]:
    """Every sandbox uid a run from ``base`` with ``workers`` workers may use."""
    return ([base + k for k in range(workers)] + [base + ANSWER_UID_OFFSET + k for k in range(workers)]
            + [base + PROBE_UID_OFFSET])


def hold_uids(stack: ExitStack, base: int, workers: int) -> None:
    """Lock the run's sandbox uids, or raise InUse naming the run that has them."""
    uids = run_uids(base, workers)
    span = f"{base}..{base + workers - 1}, {base + ANSWER_UID_OFFSET}..{base + ANSWER_UID_OFFSET + workers - 1}"
    for uid in uids:
        holder = _hold(stack, f"andrea-grading-uid-{uid}.lock", f"grading with sandbox uids from {base}")
        if holder is not None:
            raise InUse(f"sandbox uid {uid} is in use by another grading run on this machine ({holder}); "
                        f"each run needs uids of its own: give this one another --uid-base (or ANDREA_UID_BASE) "
                        f"at least {PROBE_UID_OFFSET + 1} apart (this run would use {span} and "
                        f"{base + PROBE_UID_OFFSET})")


def hold_sqlite(stack: ExitStack, path: str, shown: str) -> None:
    """Lock a SQLite gradebook for this run, or raise InUse."""
    real = os.path.realpath(path)
    digest = hashlib.sha256(real.encode("utf-8", "surrogateescape")).hexdigest()[:24]
    holder = _hold(stack, f"andrea-grading-sqlite-{digest}.lock", f"grading into {shown}")
    if holder is not None:
        raise InUse(f"the SQLite gradebook {shown} is in use by another grading run on this machine ({holder}); "
                    "SQLite serves one grading run at a time: wait for it, or grade into a PostgreSQL "
                    "gradebook, which any number of graders share")
