"""The grading workers of a run, supervised: started, fed, replaced when they die.

Each worker that is ready gets the next submission this grader claims from the work
queue (:class:`.jobs.Jobs`), one at a time; each result is written to the course
gradebook as it comes back, and the grader's claims are renewed while it runs. A worker
that dies (a cap hit in the grader itself) or makes no progress long after its
submission's deadline is replaced, and its submission recorded as failed; a worker that
keeps dying before it grades anything is given up. Ctrl-C (SIGINT) or SIGTERM stops the
run cleanly and at once: the workers are killed, their claims given back for any grader
to take, what is graded stays graded, and the same command grades the rest.
"""
from __future__ import annotations

import multiprocessing as mp
import queue
import shutil
import time
from pathlib import Path

from .. import textsafe
from ..course.snapshot import Snapshot
from ..course.template import Template
from ..execution.autograde import prepare_course_dir
from ..isolation.backend import Backend
from ..record import SubmissionRecord
from .options import Options

POLL = 2.0  # seconds between looks at the queue while other graders hold all that is left


class Stopped(KeyboardInterrupt):
    """SIGTERM: stop as Ctrl-C does (a pod being removed, the Job deleted)."""
from .jobs import WAIT, Jobs
from .state import Progress, write_state
from .worker import WorkerContext, worker_main


def _contexts(out: Path, n_workers: int, backend: Backend, course: Snapshot, template: Template,
              fingerprint: str, options: Options) -> list[WorkerContext]:
    contexts = []
    for i in range(n_workers):
        wdir = out / "workers" / f"w{i}"
        # a worker gradebook made from another version of the assignments is stale
        stamp = wdir / "template.digest"
        if stamp.is_file() and stamp.read_text() != fingerprint:
            shutil.rmtree(wdir)
        setup = backend.prepare_worker(i, wdir)
        prepare_course_dir(wdir, template.dir)
        stamp.write_text(fingerprint)
        contexts.append(WorkerContext(setup=setup, out=out, course=course.root, template_dir=template.dir,
                                      timeout=options.timeout, deadline=options.deadline,
                                      max_output=options.max_output))
    return contexts


def grade_all(out: Path, jobs: Jobs, n_workers: int, backend: Backend, course: Snapshot, template: Template,
              fingerprint: str, options: Options, progress: bool, log) -> tuple[list[dict], str | None]:
    """Run the workers over what ``jobs`` hands out. Returns (the records graded here,
    None, or how the run was cut short: "interrupted" or "stopped")."""
    inbox = out / "inbox"
    contexts = _contexts(out, n_workers, backend, course, template, fingerprint, options)
    # Workers start from a fresh interpreter: a forked copy of a process that has
    # already run PyTorch inherits its OpenMP thread pool without the threads,
    # and the first parallel operation in the child hangs or crashes.
    ctx_mp = mp.get_context("spawn")
    results = ctx_mp.Queue()
    inboxes: dict[int, object] = {}  # each worker's own queue of jobs (a new one per process)

    def start(i):
        inboxes[i] = ctx_mp.Queue()
        p = ctx_mp.Process(target=worker_main, args=(contexts[i], inboxes[i], results), daemon=True)
        with course.importable():  # the worker imports the course's andrea_ref from the copy
            p.start()
        backend.confine_worker(contexts[i].setup, p.pid)
        return p

    procs = [start(i) for i in range(n_workers)]
    idle_deaths = {i: 0 for i in range(n_workers)}  # deaths with no job in hand: a broken worker
    current: dict[int, SubmissionRecord | None] = {i: None for i in range(n_workers)}
    ready: set[int] = set()  # workers waiting for a job
    since: dict[int, float] = {}  # when each worker took its current submission
    # a worker still on one submission this long after its deadline is stuck in the
    # grader's own code (the sandbox is killed at the deadline): it is replaced
    stuck_after = options.deadline + 120.0
    stuck: set[int] = set()
    finished = set()
    graded: list[dict] = []
    cut_short = None
    done, total = jobs.progress()
    bar = Progress(total, progress, done=done)
    noted_mode = False
    drained, next_look, waiting_noted = False, 0.0, False

    def hand_out() -> None:
        nonlocal drained, next_look, waiting_noted
        while ready and not drained and time.monotonic() >= next_look:
            job = jobs.next()
            if job is None:
                drained = True
            elif job == WAIT:
                next_look = time.monotonic() + POLL
                if not waiting_noted:
                    waiting_noted = True
                    others = sorted(set(jobs.queue.held_elsewhere()))
                    log(f"note: the rest of the class is being graded by {len(others)} other grader(s) "
                        f"({textsafe.line(', '.join(others), 300)}); waiting, to take over the work of any "
                        "that is lost")
            else:
                i = min(ready)
                ready.discard(i)
                d = inbox / job.student / job.assignment
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir(parents=True)
                jobs.submission(job).write(d)
                current[i], since[i] = job, time.monotonic()
                inboxes[i].put(job)

    def record_done(i: int, item: dict) -> None:
        write_state(out, SubmissionRecord.from_dict(item))  # graded: kept even if the write below is cut off
        jobs.complete(item)
        current[i] = None
        if i not in finished:
            ready.add(i)
        graded.append(item)
        bar.update(item, jobs.progress()[0])

    def take(item) -> None:
        nonlocal noted_mode
        if item.get("event") == "start":
            since[item["worker"]] = time.monotonic()
        elif item.get("event") == "ready":
            ready.add(item["worker"])
            if item.get("answer_mode") != "zygote" and not noted_mode:
                noted_mode = True
                log(f"note: answer servers run one sandbox per notebook ({textsafe.line(item.get('why') or '', 300)}); "
                    "grading is slower")
        else:
            for i, job in current.items():
                if job is not None and (job.student, job.assignment) == (item["student"], item["assignment"]):
                    record_done(i, item)
                    break

    try:
        while True:
            jobs.tick()
            hand_out()
            if drained and all(job is None for job in current.values()):
                break
            try:
                take(results.get(timeout=1.0))
                continue
            except queue.Empty:
                pass
            bar.show(jobs.progress()[0])
            for i, p in enumerate(procs):
                if i in finished:
                    continue
                if p.is_alive():
                    if current.get(i) is not None and time.monotonic() - since.get(i, time.monotonic()) > stuck_after:
                        log(f"error: grading worker w{i} made no progress on {current[i].student}/"
                            f"{current[i].assignment} for {stuck_after:.0f} s; it is replaced")
                        p.kill()
                        p.join(timeout=10)
                        stuck.add(i)
                    else:
                        continue
                # the worker died: drain what it sent, record its submission, replace it
                try:
                    while True:
                        take(results.get(timeout=0.5))
                except queue.Empty:
                    pass
                ready.discard(i)
                job = current.get(i)
                if job is not None:
                    reason = (f"the grader made no progress on this submission for {stuck_after:.0f} s"
                              if i in stuck else "the grading worker was killed while grading this submission")
                    limits = ["memory (the grading worker hit its own cap)"] if p.exitcode == -9 and i not in stuck else []
                    rec = job.failed(reason, worker=f"w{i}", limits=limits)
                    stuck.discard(i)
                    procs[i] = start(i)
                    record_done(i, rec.to_dict())
                    ready.discard(i)  # until the new process says it is ready
                else:
                    idle_deaths[i] += 1
                    if idle_deaths[i] > 2:
                        finished.add(i)
                        log(f"error: grading worker w{i} keeps dying before it grades anything "
                            f"(exit code {p.exitcode}); see the messages above")
                    else:
                        procs[i] = start(i)
            if len(finished) == len(procs):
                log("error: every grading worker stopped; the submissions left are given back to the queue")
                break
    except KeyboardInterrupt as exc:
        cut_short = "stopped" if isinstance(exc, Stopped) else "interrupted"
        how = "stopped (SIGTERM)" if cut_short == "stopped" else "interrupted"
        log(f"\n{how}: {len(graded)} graded in this run, the submissions in hand given back to the queue; "
            "run the same command again to grade the rest")
    finally:
        bar.close()
        if cut_short is None:
            for i, p in enumerate(procs):
                if p.is_alive():
                    inboxes[i].put(None)  # no more jobs: the worker closes its sandboxes and ends
            deadline = time.monotonic() + 10
            for p in procs:
                p.join(timeout=max(0.1, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()  # workers ignore SIGINT and SIGTERM: the supervisor decides
        for p in procs:
            p.join(timeout=10)
        jobs.release_all()
        for q in [results, *inboxes.values()]:
            q.cancel_join_thread()
    return graded, cut_short
