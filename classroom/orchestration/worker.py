"""A grading worker: one process, its own copy of the course and its own gradebook,
taking submissions from the supervisor, one at a time, until it is told to stop. It sends
each record back; the supervisor keeps it (resume state, course gradebook, work queue).

It is started by multiprocessing's *spawn* with the run's copy of the course first on
``sys.path`` (:meth:`classroom.course.snapshot.Snapshot.importable`), so the checks it
runs are the copy's.
"""
from __future__ import annotations

import os
import signal
import traceback
from dataclasses import dataclass
from pathlib import Path

import torch

from andrea_ref.grading.course import venv_bin_on_path
from andrea_ref.i18n import LANGUAGES

from ..course.snapshot import load_course_config
from ..execution.autograde import nbgrader_api, share_gradebook_engines
from ..isolation.backend import WorkerSetup
from ..record import SubmissionRecord
from ..reporting import mathsvg
from ..sawarnings import ignore_add_submission_autoflush
from ..scoring.plan import load_plans
from .pipeline import Worker, grade_one


@dataclass
class WorkerContext:
    """What the supervisor hands a worker process (picklable)."""
    setup: WorkerSetup  # from the isolation backend
    out: Path
    course: Path  # the run's copy of the course
    template_dir: Path
    timeout: float | None  # seconds per cell, if not nbgrader_config.py's
    deadline: float
    max_output: int


def worker_main(ctx: WorkerContext, jobs, results) -> None:
    # the parent decides what an interrupt or a SIGTERM (to the whole process group, as tini
    # -g or a terminal sends it) does: it kills its workers itself. SIGTERM gets a handler
    # that does nothing rather than SIG_IGN, which the sandboxes started from here would inherit
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: None)
    chosen = os.environ.pop("ANDREA_LANG", "").strip()  # set per submission from here on
    os.environ.pop("NBGRADER_DB_URL", None)
    venv_bin_on_path()
    isolation = ctx.setup.isolation(ctx.setup)
    ready = isolation.start()
    results.put({"event": "ready", "worker": ctx.setup.index, **ready})
    ignore_add_submission_autoflush()  # autograde's harmless add_submission warning, only that one
    torch.set_num_threads(1)  # workers run side by side; the checks' tensors are small
    share_gradebook_engines()
    config = load_course_config(ctx.course)
    api = nbgrader_api(config, ctx.setup.wdir, isolation, timeout=ctx.timeout, max_output=ctx.max_output)
    w = Worker(api=api, isolation=isolation, wdir=ctx.setup.wdir, out=ctx.out, deadline=ctx.deadline,
               plans=load_plans(ctx.template_dir), cell_timeout=float(ctx.timeout or config.Execute.timeout or 60),
               max_output=ctx.max_output, language=chosen if chosen in LANGUAGES else None,
               locales=ctx.course / "book" / "locales")
    while True:
        job: SubmissionRecord | None = jobs.get()
        if job is None:
            break
        results.put({"event": "start", "worker": ctx.setup.index, "student": job.student,
                     "assignment": job.assignment})
        try:
            record = grade_one(job, w)
        except Exception as exc:  # never lose the batch over one submission
            record = job.failed(f"grader error: {type(exc).__name__}", worker=ctx.setup.wdir.name,
                                trace=traceback.format_exc())
            isolation.reset()
        results.put(record.to_dict())
    isolation.close()
    mathsvg.close()
