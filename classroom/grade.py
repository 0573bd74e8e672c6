"""Grade a whole class: sandboxed, in parallel, resumable.

    python -m classroom.grade SUBMISSIONS [--workers N] [--db URL] [--out DIR]

SUBMISSIONS is a folder or a zip in one of the layouts of :mod:`classroom.intake`
(nbgrader's ``submitted/<student>/<assignment>/``, ``<student>/<notebook>.ipynb`` or
``<student>_<notebook>.ipynb``).

What happens:

1. The course (``solutions/``, ``exercises/``, ``andrea_ref/``, ``nbgrader_config.py``)
   is copied once into ``OUT/course/``; the whole run grades with that copy, so
   editing or re-releasing the checkout meanwhile changes nothing about it
   (:mod:`classroom.course`). The assignments are generated from it into a template
   gradebook (``OUT/template``), exactly as ``nbgrader generate_assignment`` records them.
   Before that, the gradebook (``--db``) is connected to: a bad URL or an unreachable
   database stops the command at once, with one line (its password never shown).
2. The sandbox is tried once; if the machine cannot run it, the command stops with
   a message saying what it must allow (:mod:`classroom.isolation`).
3. The class is put in the gradebook's **work queue** (a table beside nbgrader's,
   :mod:`classroom.orchestration.workqueue`), and the workers take their submissions
   from it one at a time. Any number of grading commands given the same submissions
   and the same PostgreSQL ``--db``, on one machine or many, share the class between
   them: each claims what nobody holds (a claim whose grader dies is taken over once its
   ``--lease`` runs out; one stopped with Ctrl-C or SIGTERM gives its claims back at
   once), and a command started later, or again, regrades nothing already graded.
   N worker processes (default: the number of cores) each own a copy of the course
   (``OUT/workers/wK``) with its own SQLite gradebook, and run ``nbgrader
   autograde`` submission by submission; every kernel starts in the sandbox. Only
   the released notebooks of a submission reach the kernel: other files handed in
   are listed as refused (:mod:`classroom.intake`).
   A submission that runs longer than ``--deadline`` seconds in total has its
   sandbox killed and is reported as timed out.
4. The points come from the **independent check** (:mod:`classroom.scoring`):
   the learner's answer cells run in a fresh sandboxed answer server and the same
   checks as the notebook's run in the worker, where no learner code runs. Those
   scores replace nbgrader's in the worker's gradebook; where the notebook's own
   graded cells said otherwise, the report says so per cell.
5. Kernels, answer servers and the workers themselves are capped by cgroups (memory,
   including shared memory and memfd, and processes) where the machine allows it
   (:mod:`classroom.isolation.cgroups`; otherwise the run says what it falls back to),
   and a seccomp filter closes per-uid kernel state such as keyrings
   (:mod:`classroom.isolation.seccomp`). Output is capped in bytes as it arrives
   (:mod:`classroom.execution.capped`).
6. Each finished submission is written into the course gradebook at once (the
   instructor sees the class's progress there, e.g. in nbgrader's Formgrader), its record
   kept in the work queue and in ``OUT/state/<student>/<assignment>.json``
   (with a hash of its files and of everything that decides a grade, taken from the
   run's copy of the course: the checks, the notebooks, ``nbgrader_config.py``, this
   grading code and its limits): an
   interrupted run, started again, grades only what is missing or has changed; a
   second run over the same files grades nothing; a changed check regrades all.
7. The graded submissions are merged into the course gradebook (``--db``; default:
   the course's ``gradebook.db``, or ``$NBGRADER_DB_URL``), then ``OUT/grades.csv``
   (nbgrader's export format), ``OUT/report.csv`` and ``OUT/report.txt`` are written,
   with every submission that failed, timed out, raised errors or needs manual
   grading listed, and one feedback page per notebook in
   ``OUT/feedback/<student>/<assignment>/`` showing the independent verdicts, with
   the hidden tests' code removed and learner markup sanitised.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sqlalchemy.exc import SQLAlchemyError

from . import dburl, textsafe
from .course.snapshot import DEFAULT_OUT
from .intake import NothingToGrade
from .isolation.backend import SandboxUnavailable
from .isolation.bwrap import Limits
from .isolation.uids import ANSWER_UID_OFFSET, UID_BASE
from .orchestration.options import (MAX_WORKERS, MIN_CPU_SECONDS, MIN_DEADLINE, MIN_GRADER_MEMORY, MIN_LEASE,
                                    MAX_LEASE, MIN_MAX_OUTPUT,
                                    MIN_MEMORY, MIN_PROCESSES, MIN_TIMEOUT, OptionError, Options, check_out,
                                    check_source, size_text)

DEFAULT_LEASE = dburl.DEFAULT_LEASE  # seconds


def parse_size(text: str) -> int:
    """Bytes in a size such as ``4G``, ``512M``, ``64k`` or ``1000``; argparse turns the
    ValueError into a message naming the option."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = str(text).strip().lower().rstrip("b").rstrip("i")
    try:
        value = float(t[:-1]) * units[t[-1]] if t and t[-1] in units else float(t)
    except (ValueError, KeyError):
        raise ValueError(f"expected a size such as 4G, 512M or 65536, got {text!r}") from None
    if value <= 0 or value != value:
        raise ValueError(f"expected a positive size, got {text!r}")
    return int(value)


class Parser(argparse.ArgumentParser):
    """argparse with its errors as one line naming the argument (no usage block, no
    traceback), exit status 2."""

    def error(self, message):
        self.exit(2, f"error: {message} (see --help)\n")


def parser() -> Parser:
    p = Parser(prog="python -m classroom.grade", description=__doc__,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("submissions", type=Path, metavar="SUBMISSIONS", help="folder or zip of submissions")
    p.add_argument("--workers", type=int, default=None,
                   help=f"parallel workers (default: the number of cores, {os.cpu_count() or 1} here; "
                        f"at most {MAX_WORKERS})")
    p.add_argument("--db", default=None, help="course gradebook URL (default: $NBGRADER_DB_URL, else "
                                              "sqlite:///gradebook.db in the course)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"working and report folder (default: {DEFAULT_OUT})")
    p.add_argument("--timeout", type=int, default=None,
                   help=f"seconds per cell (default: c.Execute.timeout of nbgrader_config.py; at least {MIN_TIMEOUT})")
    p.add_argument("--deadline", type=float, default=600,
                   help=f"seconds per submission before its sandbox is killed (default: 600; at least {MIN_DEADLINE:g})")
    p.add_argument("--memory", default="4G", help="memory cap of a kernel and of an answer server: a cgroup "
                   f"limit where the machine allows one, and the address-space limit (default: 4G; at least "
                   f"{size_text(MIN_MEMORY)})")
    p.add_argument("--processes", type=int, default=256,
                   help=f"processes+threads limit of a kernel (default: 256; at least {MIN_PROCESSES})")
    p.add_argument("--cpu", type=int, default=600,
                   help=f"CPU-seconds limit of a kernel (default: 600; at least {MIN_CPU_SECONDS})")
    p.add_argument("--grader-memory", default="3G", help="memory cap of each grading worker itself "
                   f"(default: 3G; at least {size_text(MIN_GRADER_MEMORY)})")
    p.add_argument("--max-output", default="2M", help="output kept per notebook; the rest is dropped "
                   f"(default: 2M; at least {size_text(MIN_MAX_OUTPUT)})")
    p.add_argument("--uid-base", type=int, default=UID_BASE,
                   help=f"as root: worker K's kernels run as uid BASE+K, its answer servers as "
                        f"BASE+{ANSWER_UID_OFFSET}+K (default: {UID_BASE}, or $ANDREA_UID_BASE)")
    p.add_argument("--no-zygote", action="store_true",
                   help="start one sandbox per notebook for the independent check (slower; for machines "
                        "without nested user namespaces this happens by itself; default: off)")
    # -- the work queue and the gradebook (kept together) --
    p.add_argument("--lease", type=float, default=DEFAULT_LEASE, metavar="SECONDS",
                   help="how long a claim in the work queue outlives a grader that stopped renewing it (killed, "
                        f"cut off); another grader then takes it over (default: {DEFAULT_LEASE:g}; between "
                        f"{MIN_LEASE:g} and {MAX_LEASE:g})")
    p.add_argument("--accept", action="append", default=[], metavar="STUDENT/ASSIGNMENT",
                   help="grant the points of a submission held for review, after reading its evidence in "
                        "report.txt (recorded in OUT/review/accepted.txt for these very files; repeatable; "
                        "default: none)")
    p.add_argument("--force", action="store_true", help="regrade everything (default: only what is new or changed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (default: one on the terminal)")
    return p


def checked(a: argparse.Namespace) -> dict:
    """The run's keyword arguments from the command line, every value checked before any
    work starts: :class:`~classroom.orchestration.options.OptionError` names the first bad one."""
    sizes = {}
    for opt in ("memory", "grader_memory", "max_output"):
        try:
            sizes[opt] = parse_size(getattr(a, opt))
        except ValueError as exc:
            raise OptionError(f"--{opt.replace('_', '-')}", str(exc)) from None
    limits = Limits(memory=sizes["memory"], processes=a.processes, cpu_seconds=a.cpu)
    Options(workers=a.workers, timeout=a.timeout, deadline=a.deadline, limits=limits, uid_base=a.uid_base,
            max_output=sizes["max_output"], grader_memory=sizes["grader_memory"], zygote=not a.no_zygote,
            lease=a.lease).check()
    check_source(a.submissions)
    out = check_out(a.out, a.submissions)
    try:  # the gradebook connected once every other value is good, before the grader is even loaded
        dburl.check(a.db or dburl.default_url())
    except dburl.GradebookUnavailable as exc:
        raise OptionError("--db", str(exc)) from None
    return dict(workers=a.workers, db_url=a.db, out=out, timeout=a.timeout, deadline=a.deadline, limits=limits,
                uid_base=a.uid_base, force=a.force, progress=not a.no_progress, max_output=sizes["max_output"],
                grader_memory=sizes["grader_memory"], zygote=not a.no_zygote, lease=a.lease)


def values_joined(p: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """``argv`` with each value that starts with a dash (``--workers -2``) joined to its
    option (``--workers=-2``): argparse would read it as an option and answer "expected one
    argument" instead of checking the value."""
    takes_value = {o for a in p._actions if a.option_strings and a.nargs is None for o in a.option_strings}
    known = {o for a in p._actions for o in a.option_strings}
    out, i = [], 0
    while i < len(argv):
        if argv[i] in takes_value and i + 1 < len(argv) and argv[i + 1].startswith("-") \
                and argv[i + 1].split("=", 1)[0] not in known:
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


def main(argv=None) -> int:
    p = parser()
    a = p.parse_args(values_joined(p, list(sys.argv[1:] if argv is None else argv)))
    try:
        kwargs = checked(a)
    except OptionError as exc:
        p.error(textsafe.line(exc, 500))
    if a.accept:
        from .scoring import review  # standard library only
        try:
            for line in review.accept(kwargs["out"], a.accept):
                print(textsafe.line(line, 300))
        except ValueError as exc:
            p.error(textsafe.line(exc, 300))
    # imported once the arguments are good: --help and a bad argument answer at once, without
    # loading the grader (PyTorch, nbgrader)
    from .orchestration import run
    from .orchestration.locks import InUse
    try:
        summary = run(a.submissions, **kwargs)
    except dburl.GradebookUnavailable as exc:
        print(f"error: --db: {textsafe.line(exc, 600)}", file=sys.stderr)
        return 2
    except SQLAlchemyError as exc:  # the gradebook failed later on: one line, redacted
        print(f"error: the gradebook {dburl.shown(a.db or dburl.default_url())}: {dburl.reason(exc, a.db)}",
              file=sys.stderr)
        return 2
    except InUse as exc:
        print(f"error: {textsafe.line(exc, 600)}", file=sys.stderr)
        return 2
    except SandboxUnavailable as exc:
        print(f"error: cannot isolate the learners' code on this machine: {exc}", file=sys.stderr)
        return 2
    except NothingToGrade as exc:
        print(f"error: {textsafe.line(exc, 500)}", file=sys.stderr)
        return 1
    except (FileNotFoundError, ValueError) as exc:  # an unreadable submissions folder or zip
        print(f"error: {textsafe.line(exc, 500)}", file=sys.stderr)
        return 2
    if summary.get("stopped"):
        return 143  # 128 + SIGTERM
    if summary["interrupted"]:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
