"""What a grader remembers between runs, and what it shows while it runs.

Each submission this grader graded has its record in ``OUT/state/<student>/<assignment>.json``
(written whole or not at all, by the supervisor when the result arrives). The work queue
in the gradebook is what decides what is left to grade (:mod:`.workqueue`); this state
lets a grader write a result it already holds instead of grading it again
(:meth:`.jobs.Jobs.adopt_local`: after an interruption between grading and writing, or
into another gradebook).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tqdm import tqdm

from ..record import SubmissionRecord
from ..reporting.findings import classify, record_status


def state_path(out: Path, student: str, assignment: str) -> Path:
    return out / "state" / student / f"{assignment}.json"


def write_state(out: Path, record: SubmissionRecord) -> None:
    path = state_path(out, record.student, record.assignment)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record.to_dict(), indent=1))
    os.replace(tmp, path)


def read_state(out: Path, student: str, assignment: str) -> SubmissionRecord | None:
    try:
        data = json.loads(state_path(out, student, assignment).read_text())
        return SubmissionRecord.from_dict(data) if isinstance(data, dict) else None
    except (OSError, ValueError, TypeError):
        return None


class Progress:
    """A tqdm bar of the class's submissions graded (by every grader sharing the work
    queue), with how many of this grader's need a look and the last one's status, in the
    reports' words."""

    def __init__(self, total: int, enabled: bool = True, stream=sys.stderr, done: int = 0):
        self.total, self.done, self.problems = total, done, 0
        self.bar = tqdm(total=total, initial=done, disable=not enabled or total == done, file=stream,
                        unit="submission", dynamic_ncols=True, leave=True)

    def update(self, record: dict, done: int) -> None:
        """One of this grader's submissions graded; ``done``: the class's count now."""
        if classify(record):
            self.problems += 1
        self.bar.set_postfix_str(f"{self.problems} to look at; last {record['student']}/{record['assignment']}: "
                                 f"{record_status(record)}", refresh=False)
        self.show(done)

    def show(self, done: int) -> None:
        if done != self.done:
            self.bar.update(done - self.done)
            self.done = done

    def close(self) -> None:
        self.bar.close()
