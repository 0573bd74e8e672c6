"""One submission through the stages, in a grading worker.

:func:`grade_one` takes the record of a submission handed out by the supervisor and
returns it filled in:

1. execution (:mod:`classroom.execution.autograde`): nbgrader autogrades the submission,
   every kernel started by the isolation stage, under a deadline for all its notebooks;
2. scoring (:mod:`classroom.scoring.submission`): the independent check of each notebook
   decides the points, which replace nbgrader's in the worker's gradebook;
3. reporting (:mod:`classroom.reporting.pages`): the feedback pages.
"""
from __future__ import annotations

import copy
import os
import resource
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from nbgrader.apps.api import NbGraderAPI

from ..execution.autograde import autograde, graded_notebooks, judge, read_notebook_json, write_log
from ..isolation.backend import WorkerIsolation
from ..notebook_i18n import submission_language
from ..record import SubmissionRecord
from ..reporting.pages import write_feedback
from ..scoring import review
from ..scoring.submission import apply_verdicts, check_submission


@dataclass
class Worker:
    """What a grading worker grades with (made once per worker process)."""
    api: NbGraderAPI  # nbgrader for the worker's course folder ``wdir``
    isolation: WorkerIsolation
    wdir: Path
    out: Path  # the run's folder: inbox/ in; autograded/, feedback/, logs/ out
    deadline: float  # seconds per submission
    plans: dict  # the independent check's plans, {assignment: {notebook: plan}}
    cell_timeout: float
    max_output: int
    language: str | None  # the instructor's ANDREA_LANG, else each submission's own
    locales: Path  # the notebooks' catalogs, in the run's copy of the course


def _cpu() -> float:
    """CPU seconds of this process and of its children that ended (not the sandboxes':
    they are the zygotes' children)."""
    own, ended = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime


def grade_one(job: SubmissionRecord, w: Worker) -> SubmissionRecord:
    """Grade one submission: nbgrader in the sandbox for the learner's outputs, the
    independent check for the points, then the feedback pages."""
    record = copy.deepcopy(job)
    record.worker = w.wdir.name
    student, assignment = record.student, record.assignment
    for sub in ("submitted", "autograded", "feedback", "feedback_src"):
        shutil.rmtree(w.wdir / sub / student / assignment, ignore_errors=True)
    shutil.copytree(w.out / "inbox" / student / assignment, w.wdir / "submitted" / student / assignment)
    w.isolation.begin_job()
    submitted = {p.stem: read_notebook_json(p)
                 for p in sorted((w.wdir / "submitted" / student / assignment).glob("*.ipynb"))}
    # The checks' messages (in the feedback, and in the kernel's own outputs) are in the
    # instructor's ANDREA_LANG if set, else in the language the learner's notebook says
    # it is in (metadata andrea.lang, checked), else English. Points do not depend on it.
    os.environ["ANDREA_LANG"] = w.language or submission_language(submitted.values()) or "en"

    t0, c0 = time.monotonic(), _cpu()
    timing: dict[str, float] = {}
    cpu: dict[str, float] = {}

    def lap(phase: str, extra_cpu: float = 0.0) -> None:  # seconds since the previous phase ended
        timing[phase] = round(time.monotonic() - t0 - sum(timing.values()), 2)
        cpu[phase] = round(_cpu() - c0 - sum(cpu.values()) + extra_cpu, 2)

    run = autograde(w.api, w.isolation, student, assignment, w.deadline)
    judge(run, record, w.deadline, w.max_output)
    write_log(run, w.wdir / "scratch", w.out / "logs" / student / f"{assignment}.log")
    graded_nbs = graded_notebooks(w.wdir / "autograded" / student / assignment,
                                  w.out / "autograded" / student / assignment, record)
    lap("autograde")

    plans = w.plans.get(assignment, {})
    verdicts = check_submission(record, submitted, plans, w.isolation.answers, cell_timeout=w.cell_timeout,
                                seconds=max(5.0, w.deadline - (time.monotonic() - t0)),
                                accepted=review.accepted(review.load(w.out), student, assignment, record.digest))
    record.limits += w.isolation.limits_hit()
    lap("independent")
    apply_verdicts(w.wdir / "gradebook.db", record, verdicts, plans)
    lap("gradebook")

    shutil.rmtree(w.out / "feedback" / student / assignment, ignore_errors=True)
    write_feedback(w.api, w.wdir, w.out, record, graded_nbs, verdicts, w.locales)
    lap("feedback", sum(p.get("math_cpu_seconds", 0.0) for p in record.feedback.values()))  # + Node's
    record.seconds = round(time.monotonic() - t0, 2)
    record.timing, record.cpu = timing, cpu
    return record
