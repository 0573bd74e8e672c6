"""How a grading run grades: its limits and time limits, one typed value, checked before
any work starts.

The command line (:mod:`classroom.grade`) and :func:`classroom.orchestration.run` fill
it in; its digest is part of the run's fingerprint, so a run with other limits regrades.
:meth:`Options.check` refuses, before anything is copied or graded, every value no run
can grade with (a kernel cap too small for PyTorch to load, more workers than the
sandbox uids allow, ...) with an :class:`OptionError` naming the option and what it
needs; :func:`check_source` and :func:`check_out` do the same for the submissions and
the output folder. Standard library only (``--help`` and a bad value answer at once).
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from ..dburl import DEFAULT_LEASE
from ..isolation.bwrap import GiB, MiB, Limits
from ..isolation.uids import ANSWER_UID_OFFSET, UID_BASE

# What a kernel, an answer server and a worker need at least (measured on the course's
# own environment; each is far below the default):
MIN_MEMORY = 1 * GiB  # address space: importing PyTorch and ipykernel fails below about 640 MiB
MIN_GRADER_MEMORY = 1 * GiB  # a worker holds about 340 MiB once PyTorch and nbgrader are loaded,
#                               then renders pages and runs the math typesetter (Node)
MIN_PROCESSES = 32  # a kernel with PyTorch loaded runs 13 threads, plus its launcher
MIN_CPU_SECONDS = 30  # PyTorch's import alone takes a few CPU-seconds
MIN_MAX_OUTPUT = 64 << 10  # an honest notebook prints a few KiB; less would cut its messages
MIN_DEADLINE = 30.0  # a kernel's start, a notebook's run and the independent check
MIN_TIMEOUT = 5  # seconds per cell: the first cell imports PyTorch
MIN_LEASE, MAX_LEASE = 5.0, 86400.0  # seconds a claim outlives its grader; renewed every quarter of it
MAX_WORKERS = ANSWER_UID_OFFSET - 1  # worker K's answer servers run as uid BASE+500+K
UID_RANGE = (1000, 2**31 - 2000)  # never a system account; room for every offset above it


class OptionError(ValueError):
    """A value a grading run cannot grade with; ``option`` names it as the command line
    does (``--memory``), ``str()`` is the one line to show."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option, self.message = option, message

    def __str__(self) -> str:
        return f"{self.option}: {self.message}"


def size_text(n: int) -> str:
    """Bytes as the command line writes a size (``4G``, ``640M``, ``64K``, ``12``)."""
    for unit, scale in (("G", GiB), ("M", MiB), ("K", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    for unit, scale in (("G", GiB), ("M", MiB), ("K", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


def options_digest(limits: Limits, timeout, deadline, max_output, grader_memory) -> str:
    values = [{k: int(v) for k, v in limits.__dict__.items()}, None if timeout is None else float(timeout),
              float(deadline), int(max_output), int(grader_memory)]
    text = json.dumps(values, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _at_least(option: str, value, minimum, what: str, size: bool = False) -> None:
    if value is None or value >= minimum:
        return
    shown, least = (size_text(value), size_text(minimum)) if size else (f"{value:g}", f"{minimum:g}")
    hint = ""
    if size and value < 1 << 10:
        hint = f" (a size without a unit is in bytes: did you mean {value}G?)"
    raise OptionError(option, f"{shown} is too small: {what} needs at least {least}{hint}")


@dataclass(frozen=True)
class Options:
    workers: int | None = None  # parallel workers (default: the number of cores)
    timeout: int | None = None  # seconds per cell (default: nbgrader_config.py)
    deadline: float = 600.0  # seconds per submission before its sandbox is killed
    limits: Limits = field(default_factory=Limits)  # of a kernel and of an answer server
    uid_base: int = UID_BASE  # as root: worker K's kernels run as uid BASE+K
    max_output: int = 2 << 20  # bytes of output kept per notebook
    grader_memory: int = 3 * GiB  # memory cap of each grading worker itself
    zygote: bool = True  # fork kernels and answer servers from a zygote where nested namespaces work
    lease: float = DEFAULT_LEASE  # how the work is shared, not how it is graded: not in the digest

    def digest(self) -> str:
        return options_digest(self.limits, self.timeout, self.deadline, self.max_output, self.grader_memory)

    def check(self) -> "Options":
        """These options, if a run can grade with them; else :class:`OptionError` for the
        first value that cannot work, named as the command line names it."""
        for option, value in (("--workers", self.workers), ("--timeout", self.timeout),
                              ("--deadline", self.deadline), ("--memory", self.limits.memory),
                              ("--processes", self.limits.processes), ("--cpu", self.limits.cpu_seconds),
                              ("--grader-memory", self.grader_memory), ("--max-output", self.max_output)):
            if value is not None and not value > 0:
                raise OptionError(option, f"expected a positive number, got {value}")
        _at_least("--memory", self.limits.memory, MIN_MEMORY, "a kernel (PyTorch and the checks)", size=True)
        _at_least("--grader-memory", self.grader_memory, MIN_GRADER_MEMORY, "a grading worker", size=True)
        _at_least("--max-output", self.max_output, MIN_MAX_OUTPUT, "a notebook's output", size=True)
        _at_least("--processes", self.limits.processes, MIN_PROCESSES, "a kernel (its threads included)")
        _at_least("--cpu", self.limits.cpu_seconds, MIN_CPU_SECONDS, "a kernel (CPU-seconds)")
        _at_least("--deadline", self.deadline, MIN_DEADLINE, "a submission (seconds)")
        _at_least("--timeout", self.timeout, MIN_TIMEOUT, "a cell (seconds)")
        if self.workers is not None and self.workers > MAX_WORKERS:
            raise OptionError("--workers", f"at most {MAX_WORKERS} (each worker has uids of its own), "
                                           f"got {self.workers}")
        if not MIN_LEASE <= self.lease <= MAX_LEASE:
            raise OptionError("--lease", f"expected seconds between {MIN_LEASE:g} and {MAX_LEASE:g}, got {self.lease:g}")
        low, high = UID_RANGE
        if not low <= self.uid_base <= high:
            raise OptionError("--uid-base", f"expected a uid between {low} and {high}, got {self.uid_base}")
        return self


def check_source(source: Path) -> Path:
    """``source`` if it is a folder or a zip that can be read, else :class:`OptionError`."""
    source = Path(source)
    if not source.exists():
        raise OptionError("SUBMISSIONS", f"no such folder or zip: {source}")
    if source.is_dir():
        if not os.access(source, os.R_OK | os.X_OK):
            raise OptionError("SUBMISSIONS", f"cannot read the folder {source}: permission denied")
        return source
    if not os.access(source, os.R_OK):
        raise OptionError("SUBMISSIONS", f"cannot read {source}: permission denied")
    if not zipfile.is_zipfile(source):
        raise OptionError("SUBMISSIONS", f"not a folder or a zip file: {source}")
    return source


def check_out(out: Path, source: Path | None = None) -> Path:
    """``out`` if the run can write its folder there, apart from the submissions, else
    :class:`OptionError`. Nothing is left behind: whether a folder can be made is tried
    with an empty folder in the nearest existing one, removed at once."""
    out = Path(out).absolute()
    if out.exists() and not out.is_dir():
        raise OptionError("--out", f"{out} is a file, not a folder")
    if source is not None and Path(source).is_dir():
        src = Path(source).resolve()
        real = out.resolve()
        if real == src or src in real.parents:
            raise OptionError("--out", f"{out} is inside the submissions folder {source}: the grader's own "
                                       "files would be read as submissions next time")
    existing = next((p for p in (out, *out.parents) if p.exists()), None)
    if existing is None or not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        raise OptionError("--out", f"cannot create or write {out} (no write permission in {existing})")
    try:  # permission is not enough: /proc, /sys and full or read-only file systems take no new folder
        os.rmdir(tempfile.mkdtemp(prefix=".andrea-out-probe-", dir=existing))
    except OSError as exc:
        raise OptionError("--out", f"cannot create {out}: {existing} takes no new folder ({exc.strerror or exc}); "
                                   "expected a folder on a writable file system") from None
    return out
