"""The record of one graded submission: what every stage adds to, what the resume state
(``OUT/state/<student>/<assignment>.json``) holds and what the reports read.

It is made from the intake's submission when the job is handed out
(:meth:`SubmissionRecord.begin`), filled in by the worker's stages (execution: status,
errors, limits; scoring: checks and scores; reporting: nothing of its own) and written
as JSON when the submission is done (:meth:`SubmissionRecord.to_dict`). The reports and
the tests read the JSON form; :meth:`SubmissionRecord.from_dict` reads it back, any
key it lacks at its default.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_TIMEOUT = "timed out"


@dataclass
class SubmissionRecord:
    student: str
    assignment: str
    digest: str = ""  # of the files handed in (classroom.intake.Submission.digest)
    template: str = ""  # the run's fingerprint: course snapshot, grader and options
    worker: str = ""  # the grading worker that graded it (its gradebook holds the scores)
    status: str = STATUS_OK  # STATUS_OK, STATUS_FAILED or STATUS_TIMEOUT
    reason: str = ""  # why it failed or timed out (the grader's own words)
    errors: list[dict] = field(default_factory=list)  # raised in the graded notebooks (execution)
    notebooks: dict[str, dict[str, float | None]] = field(default_factory=dict)  # the scores, per cell
    kernel_notebooks: dict[str, dict[str, float | None]] = field(default_factory=dict)  # nbgrader's own
    checks: dict[str, dict] = field(default_factory=dict)  # the independent check, per notebook
    limits: list[str] = field(default_factory=list)  # caps the submission ran into
    refused: list[str] = field(default_factory=list)  # files handed in that were kept away
    notes: list[str] = field(default_factory=list)  # what the intake, or the feedback step, noticed
    feedback: dict[str, dict] = field(default_factory=dict)  # per page, what building it did
    score: float = 0.0
    max_score: float | None = None
    max_by_notebook: dict[str, float] = field(default_factory=dict)
    needs_manual_grade: bool = False
    seconds: float = 0
    timing: dict[str, float] = field(default_factory=dict)  # seconds per stage
    cpu: dict[str, float] = field(default_factory=dict)  # the grading worker's CPU seconds per stage
    trace: str | None = None  # a grader error's traceback

    @classmethod
    def begin(cls, submission, fingerprint: str) -> "SubmissionRecord":
        """The record of a submission about to be graded (``submission``: the intake's)."""
        return cls(student=submission.student, assignment=submission.assignment, digest=submission.digest(),
                   template=fingerprint, refused=list(submission.refused), notes=list(submission.notes))

    def failed(self, reason: str, **changes) -> "SubmissionRecord":
        """This submission (its files, fingerprint and worker), failed for ``reason``, with
        nothing graded; ``changes``: other fields to set."""
        values = dict(student=self.student, assignment=self.assignment, digest=self.digest, template=self.template,
                      worker=self.worker, refused=list(self.refused), notes=list(self.notes))
        return SubmissionRecord(**{**values, **changes, "status": STATUS_FAILED, "reason": reason})

    def is_current(self, submission, fingerprint: str) -> bool:
        """Whether this record grades these very files with this very course and grader."""
        return self.digest == submission.digest() and self.template == fingerprint

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "SubmissionRecord":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})
