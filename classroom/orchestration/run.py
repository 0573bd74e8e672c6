"""A grading run from start to end: :func:`run` (what ``python -m classroom.grade`` calls)."""
from __future__ import annotations

import os
import signal
import threading
from contextlib import ExitStack, contextmanager
from pathlib import Path

from nbgrader.api import Gradebook

from andrea_ref.grading.course import venv_bin_on_path

from .. import dburl, textsafe
from ..course import snapshot
from ..course.snapshot import CODE_ROOT, DEFAULT_OUT
from ..course.template import make_template
from ..execution.autograde import alembic_head_in_process
from ..intake import NothingToGrade, Submission, collect
from ..intake.release import refuse_foreign, released_notebooks
from ..isolation.bubblewrap import BubblewrapBackend
from ..isolation.bwrap import GiB, Limits
from ..isolation.uids import UID_BASE
from ..reporting import feedback
from ..reporting.classlist import gradebook_scores
from ..reporting.merge import Writer, prepare
from ..reporting.records import store as store_records
from ..reporting.report import write_reports
from ..scoring import review
from . import locks
from .jobs import Jobs
from .options import DEFAULT_LEASE, Options, check_source
from .supervisor import Stopped, grade_all
from .workqueue import WorkQueue


@contextmanager
def sigterm_stops():
    """SIGTERM stops the run as Ctrl-C does (raises :class:`.supervisor.Stopped`), once;
    a second one while it stops is ignored. Only in the main thread (where Python runs
    signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(*_):
        signal.signal(signal.SIGTERM, lambda *_: None)
        raise Stopped()

    before = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def run(submissions: Path, *, workers: int | None = None, db_url: str | None = None, out: Path = DEFAULT_OUT,
        timeout: int | None = None, deadline: float = 600.0, limits: Limits | None = None,
        uid_base: int = UID_BASE, force: bool = False, progress: bool = True, max_jobs: int | None = None,
        max_output: int = 2 << 20, grader_memory: int = 3 * GiB, zygote: bool = True, log=print,
        lease: float = DEFAULT_LEASE, repo: Path = CODE_ROOT) -> dict:
    """Grade ``submissions``; returns a summary dict (also written to OUT/report.*).

    The gradebook (``db_url``) is connected to first: a bad URL or an unreachable database
    raises :class:`classroom.dburl.GradebookUnavailable` before anything else is done.
    The course is read from ``repo`` (default: this checkout) once, into a copy that the
    whole run grades with (:mod:`classroom.course.snapshot`).

    The submissions are put in the gradebook's work queue (:mod:`.workqueue`) and graded
    from there: any number of runs given the same submissions and a PostgreSQL gradebook,
    on one machine or many, share the class between them, each result written as it is
    done; a run started later, or again, grades only what nobody has graded for these
    files and this course. ``lease``: seconds after which the claims of a grader that
    stopped answering are taken over.

    The workers are started with multiprocessing's *spawn* method, so a script that
    calls this function must do so under ``if __name__ == "__main__":`` (each worker
    imports the calling script's main module, as with any spawn-based pool)."""
    out = Path(out).resolve()
    db_url = db_url or dburl.default_url()
    url = dburl.check(db_url)  # first: a bad URL or an unreachable gradebook fails here, in seconds
    shown = dburl.shown(db_url)
    out.mkdir(parents=True, exist_ok=True)
    venv_bin_on_path()
    alembic_head_in_process()  # a new gradebook's schema revision, without an alembic process
    options = Options(workers=workers, timeout=timeout, deadline=deadline, limits=limits or Limits(),
                      uid_base=uid_base, max_output=max_output, grader_memory=grader_memory, zygote=zygote,
                      lease=lease).check()
    check_source(submissions)
    root_mode = os.geteuid() == 0
    n_max = max(1, workers or os.cpu_count() or 1)

    with ExitStack() as stack:
        stack.enter_context(sigterm_stops())
        if root_mode:  # the sandboxes run as uids of their own: no other run may use them
            locks.hold_uids(stack, uid_base, n_max)
        if dburl.is_sqlite(url) and dburl.sqlite_path(url):
            locks.hold_sqlite(stack, dburl.sqlite_path(url), shown)
        course = snapshot.take(repo, out)
        template = make_template(out, course)
        fingerprint = f"{template.digest}-{options.digest()}"
        subs, skipped = collect(Path(submissions), template.assignments, gradebook_students(url))
        subs = refuse_foreign(subs, released_notebooks(template.gradebook), skipped)
        for s in skipped:
            log(f"note: {textsafe.line(s, 400)}")
        if not subs:  # the reports of earlier runs stay as they are
            raise NothingToGrade(f"nothing to grade in {submissions}: "
                                 + (f"{len(skipped)} file(s) skipped or refused (see the notes above)" if skipped
                                    else "no notebook of the course's assignments was found"))
        backend = BubblewrapBackend(out, limits=options.limits, uid_base=uid_base if root_mode else None,
                                    grader_memory=grader_memory, repo=CODE_ROOT, course=course.root, zygote=zygote,
                                    log=log)
        backend.check()  # the sandbox, tried once with exactly the settings the kernels get

        queue = WorkQueue(url, fingerprint=fingerprint, lease=lease, out=str(out))
        stack.callback(queue.close)
        with queue.setup_lock(log):
            prepare(url, f"sqlite:///{template.gradebook}", {s.student for s in subs})
            queue.create()
            queue.enqueue(subs, force=force)
            # held submissions the instructor has accepted since (or no longer accepts) are graded again
            decisions = review.load(out)
            regrade = {(r["student"], r["assignment"]) for r in queue.records(subs) if review.stale(r, decisions)}
            queue.enqueue([s for s in subs if (s.student, s.assignment) in regrade], force=True)
        writer = Writer(url)
        stack.callback(writer.close)
        jobs = Jobs(queue, subs, writer, out, fingerprint, log=log, max_jobs=max_jobs, regrade=regrade)
        merged = jobs.adopt_local(force)
        done, left = jobs.left()
        if max_jobs is not None:
            left = min(left, max_jobs)
        n_workers = max(1, min(n_max, left or 1))
        log(f"{len(subs)} submissions found, {done} already graded, {left} to grade on {n_workers} worker(s)")

        graded: list[dict] = []
        cut_short = None
        before = gradebook_scores(url)  # the points as they were: the reports mark what this run changed
        if left:
            for line in feedback.preflight(course.config()):  # once per run, before any grading
                log(line)
            backend.open()
            try:
                graded, cut_short = grade_all(out, jobs, n_workers, backend, course, template, fingerprint, options,
                                              progress, log)
            finally:
                backend.close()
        if cut_short == "stopped":  # within the grace period: no reports (another grader, or the next run)
            return {"text": "", "graded_now": len(graded), "merged": merged, "interrupted": True, "stopped": True,
                    "records": [], "scores": {}, "problems": {}}
        summary = finish(out, url, jobs, subs, skipped, graded_now=len(graded), assignments=template.assignments,
                         graded={(r["student"], r["assignment"]) for r in graded}, before=before,
                         release=f"sqlite:///{template.gradebook}")
    summary.update(merged=merged, graded_now=len(graded), interrupted=cut_short is not None, stopped=False)
    log(summary["text"])
    return summary


def gradebook_students(url: str) -> set[str] | None:
    """The ids of the gradebook's student list (None where there is no gradebook or no
    list yet): they decide a flat file name that reads as two learners'. Creates nothing:
    a SQLite gradebook that does not exist yet, or is still empty, has no list."""
    if dburl.is_sqlite(url):
        path = dburl.sqlite_path(url)
        if not path or not Path(path).is_file() or Path(path).stat().st_size == 0:
            return None
    try:
        with Gradebook(url) as gb:
            ids = {st.id for st in gb.students}
    except Exception:  # noqa: BLE001 - a missing or new gradebook has no list
        return None
    return ids or None


def finish(out: Path, url: str, jobs: Jobs, subs: list[Submission], skipped: list[str], *,
           graded_now: int, assignments: dict[str, list[str]], graded: set[tuple[str, str]] = frozenset(),
           before: dict | None = None, release: str | None = None) -> dict:
    """The reports of the whole class as the gradebook holds it, whoever graded it: the
    records of this class (from the work queue) are kept beside the gradebook's tables,
    where the records of earlier batches are (``graded``: what this run graded;
    ``before``: the gradebook's points before it; ``release``: the run's template
    gradebook); returns the summary."""
    records = jobs.queue.records(subs)
    store_records(url, records)
    header = None
    if len(records) < len(subs):
        others = sorted(set(jobs.queue.held_elsewhere()))
        if others:
            header = (f"Work queue: {len(records)} of {len(subs)} submissions graded so far; "
                      f"{len(others)} grader(s) still at work ({textsafe.line(', '.join(others), 300)}): "
                      "the report of the last one to finish covers the whole class.")
    elsewhere = sorted({r.out for r in jobs.queue.rows(jobs.subs).values()
                        if r.state == "done" and r.out and r.out != str(out)})
    summary = write_reports(out, url, records, skipped, graded_now=graded_now, assignments=dict(assignments),
                            graded=graded, before=before, header=header, release=release)
    if elsewhere:
        note = (f"Feedback pages of submissions graded by other graders are in their folders: "
                f"{textsafe.line(', '.join(elsewhere), 600)}")
        (out / "report.txt").write_text((out / "report.txt").read_text() + note + "\n", encoding="utf-8")
        summary["text"] += "\n" + note
    return summary
