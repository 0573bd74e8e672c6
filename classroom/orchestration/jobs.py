"""The jobs of one grader: claimed from the work queue, handed to the supervisor's workers,
their results written to the course gradebook and marked done, one at a time.

:class:`Jobs` is what the supervisor (:mod:`.supervisor`) takes work from:

- :meth:`Jobs.next`: the next submission to grade (claimed in the queue), ``WAIT`` while
  there is none to take but other graders hold claims (one of them may die, and its
  claim come back), or None once the class is graded;
- :meth:`Jobs.complete`: a result in the gradebook, then its claim marked done, in that
  order, so a grader lost in between leaves a claim that is graded again, never a claim
  marked done without its scores. A result whose claim this grader lost meanwhile (its
  lease ran out while it was cut off) is dropped: the grader that took it over writes it;
- :meth:`Jobs.tick`: the leases renewed, every ``lease / 4`` seconds;
- :meth:`Jobs.release_all`: every claim given back, when the grader stops.

:meth:`Jobs.adopt_local` takes the results this grader already holds in its resume state
(``OUT/state``) for submissions the queue has not seen done, e.g. after a run was
interrupted between grading and writing, or when a new gradebook is named for a graded
class: they are written, not graded again.
"""
from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy.exc import DBAPIError

from .. import dburl, textsafe
from ..record import SubmissionRecord
from ..reporting.merge import Writer
from .state import read_state, write_state
from .workqueue import DONE, MAX_ATTEMPTS, WorkQueue

WAIT = "wait"  # nothing to take now, but other graders hold claims


class Jobs:
    def __init__(self, queue: WorkQueue, subs, writer: Writer, out: Path, fingerprint: str, *, log=print,
                 max_jobs: int | None = None, regrade=frozenset()):
        self.queue, self.writer, self.out, self.fingerprint, self.log = queue, writer, Path(out), fingerprint, log
        self.subs = {(s.student, s.assignment): s for s in subs}
        self.digests = {k: s.digest() for k, s in self.subs.items()}
        self.exclude: set[tuple[str, str]] = set()  # rows this grader cannot grade (other files)
        self.claimed: set[tuple[str, str]] = set()
        self.regrade = set(regrade)  # graded again whatever this grader's resume state holds
        self.max_jobs, self.handed = max_jobs, 0
        self.renewed = time.monotonic()
        self.failing_since: float | None = None  # the gradebook has not answered since

    def _guard(self, what: str, fn, default):
        """``fn()``; a database error (connection lost, lock timeout) is reported in one line
        and ``default`` returned, until the gradebook has failed for longer than a lease:
        then this grader's claims are gone anyway, and the run stops."""
        try:
            result = fn()
        except DBAPIError as exc:
            now = time.monotonic()
            first = self.failing_since is None
            self.failing_since = self.failing_since or now
            reason = dburl.reason(exc, self.queue.url, 300)
            if now - self.failing_since > self.queue.lease:
                raise dburl.GradebookUnavailable(f"the gradebook has not answered for {now - self.failing_since:.0f} s "
                                                 f"({reason}); stopping") from None
            if first:
                self.log(f"warning: the gradebook did not answer while {what} ({reason}); trying again")
            return default
        self.failing_since = None
        return result

    # ------------------------------------------------------------------ before grading
    def adopt_local(self, force: bool = False) -> int:
        """Write the results this grader's resume state holds for submissions not done in
        the queue; returns how many were written."""
        if force:
            return 0
        rows = self.queue.rows(self.subs)
        n = 0
        for key, s in sorted(self.subs.items()):
            st = read_state(self.out, *key)
            row = rows.get(key)
            if st is None or not st.is_current(s, self.fingerprint) or row is None or key in self.regrade:
                continue
            if row.state == DONE and row.digest == st.digest and row.fingerprint == self.fingerprint:
                continue
            if self.queue.adopt(key, st.digest):
                self.claimed.add(key)
                if self.complete(st.to_dict()):
                    n += 1
        return n

    def left(self) -> tuple[int, int]:
        """(submissions of this class graded for their current files, still to grade)."""
        rows = self.queue.rows(self.subs)
        done = sum(1 for k, r in rows.items() if r.state == DONE and r.digest == self.digests[k]
                   and r.fingerprint == self.fingerprint)
        return done, len(self.subs) - done

    # ------------------------------------------------------------------ the supervisor's side
    def next(self):
        """A SubmissionRecord claimed for grading, WAIT, or None (see the module docstring)."""
        return self._guard("taking the next submission", self._next, WAIT)

    def _next(self):
        while True:
            if self.max_jobs is not None and self.handed >= self.max_jobs:
                return None
            claim = self.queue.claim(self.exclude)
            if claim is None:
                return WAIT if self.queue.held_elsewhere() else None
            key = claim.key
            s = self.subs.get(key)
            if s is None or self.digests[key] != claim.digest:  # another grader's files for it
                self.queue.release([key])
                self.exclude.add(key)
                continue
            self.claimed.add(key)
            record = SubmissionRecord.begin(s, self.fingerprint)
            if claim.taken_over_from:
                self.log(f"note: {textsafe.line(s.key, 200)}: taken over from grader {claim.taken_over_from}, "
                         "whose lease ran out")
            if claim.attempts > MAX_ATTEMPTS:
                failed = record.failed(f"its grader was lost {claim.attempts - 1} times while grading it (each "
                                       "time its lease ran out: e.g. the grading machine ran out of memory); "
                                       "it is not tried again", worker="")
                write_state(self.out, failed)
                self.complete(failed.to_dict())
                continue
            self.handed += 1
            return record

    def submission(self, record: SubmissionRecord):
        return self.subs[(record.student, record.assignment)]

    def complete(self, record: dict) -> bool:
        """Write a graded submission (``record``, the worker's) into the gradebook, then mark
        its claim done. False if the claim was lost meanwhile (nothing written), or the
        gradebook did not answer (the resume state has the result: the next run writes it)."""
        return self._guard(f"writing {textsafe.line(record['student'], 100)}/{record['assignment']}",
                           lambda: self._complete(record), False)

    def _complete(self, record: dict) -> bool:
        key = (record["student"], record["assignment"])
        self.claimed.discard(key)
        if not self.queue.owns(key):
            self.log(f"note: {textsafe.line('/'.join(key), 200)} was taken over by another grader while this "
                     "one was cut off from the gradebook; its result here is left to that grader")
            return False
        wdb = self.out / "workers" / (record.get("worker") or "-") / "gradebook.db"
        if record.get("notebooks") and wdb.is_file():
            self.writer.write(f"sqlite:///{wdb}", *key)
        return self.queue.done(record)

    def tick(self) -> None:
        """Renew the leases when a quarter of one has passed."""
        if time.monotonic() - self.renewed >= self.queue.lease / 4:
            if self._guard("renewing its claims", self.queue.renew, None) is not None:
                self.renewed = time.monotonic()

    def release_all(self) -> int:
        """Give every claim of this grader back (at the end, or when it stops)."""
        self.claimed.clear()
        try:
            return self.queue.release()
        except DBAPIError as exc:
            reason = dburl.reason(exc, self.queue.url, 300)
            self.log(f"warning: could not give this grader's claims back ({reason}); they return to the "
                     "queue when their lease runs out")
            return 0

    def progress(self) -> tuple[int, int]:
        """(done, total) of the class in the queue, every grader's work counted."""
        done, left = self._guard("counting what is graded", self.left, (0, len(self.subs)))
        return done, done + left
