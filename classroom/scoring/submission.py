"""A submission's points: the independent check of each of its notebooks
(:func:`check_submission`) and the verdicts written over nbgrader's scores in the
worker's gradebook (:func:`apply_verdicts`).

nbgrader has recorded, for every graded cell, the score of the notebook the learner's
kernel ran (``classroom.execution``). Those scores are replaced by the independent
check's (:mod:`classroom.scoring.verdicts`): a graded cell with no independent verdict
gets no points. Where the two differ the record says so per cell, the comparison
following :mod:`andrea_ref.grading.points` (the report turns a notebook that claims
more than the checks grant into "tampering suspected"); it compares what the checks
themselves give, so points a rule withholds are no suspicion of tampering, and a cell
whose checks the kernel leaves to the grader (``kernel_compared``) is not compared. A notebook
held for review is flagged in the gradebook, with its evidence in the comment of its
answer cell (where the Formgrader shows it); one the instructor accepted says so there.
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import SAWarning

from andrea_ref.grading.points import disagreement

from ..isolation.answers import AnswerUnavailable
from ..isolation.backend import AnswerServers
from ..record import STATUS_FAILED, SubmissionRecord
from .verdicts import NotebookVerdict, check_notebook


def check_submission(record: SubmissionRecord, submitted: dict, plans: dict[str, dict],
                     answers: AnswerServers | None, *, cell_timeout: float, seconds: float,
                     accepted: bool = False) -> dict[str, NotebookVerdict]:
    """The independent verdict of every notebook of ``submitted`` ({name: notebook as
    a dict, None if unreadable}) that ``plans`` knows, within ``seconds`` in all; what
    the instructor should know goes into ``record.checks``. ``accepted``: the
    instructor reviewed this very submission and grants its held points
    (:func:`classroom.scoring.review.accepted`)."""
    verdicts = {}
    for name, plan in plans.items():
        nbjson = submitted.get(name)
        if nbjson is None:
            if name in submitted:
                record.checks[name] = {"problem": "not a readable notebook"}
            continue
        if answers is None:
            continue
        try:
            v = check_notebook(plan, nbjson, answers, cell_timeout=cell_timeout, deadline=time.monotonic() + seconds,
                               accepted=accepted)
        except AnswerUnavailable as exc:
            record.checks[name] = {"problem": f"the independent check could not start: {exc}"}
            record.status = STATUS_FAILED
            record.reason = "the independent check could not start"
            continue
        verdicts[name] = v
        record.checks[name] = {"problem": v.problem, "untouched": v.untouched, "probes": v.probes,
                               "locked_changes": v.locked_changes, "differs": [],
                               "answer_errors": v.answer_errors, "seconds": v.seconds,
                               "review": v.review, "held": v.held, "accepted": bool(v.review and v.accepted),
                               "faults": v.faults,
                               "shortcuts": v.shortcuts,
                               "messages": {g: c.message[:2000] for g, c in v.cells.items() if not c.passed}}
    return verdicts


def apply_verdicts(gradebook: Path, record: SubmissionRecord, verdicts: dict[str, NotebookVerdict],
                   plans: dict[str, dict]) -> None:
    """Replace the scores of ``record``'s submission in the SQLite ``gradebook`` by the
    ``verdicts`` ({notebook: verdict}; ``plans``: the assignment's plans), and fill in
    the record's scores, nbgrader's own and the cells where they differ."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)
        with Gradebook(f"sqlite:///{gradebook}") as gb:
            try:
                sub = gb.find_submission(record.assignment, record.student)
            except MissingEntry:
                record.score, record.max_score, record.needs_manual_grade = 0.0, None, False
                return
            for snb in sub.notebooks:
                record.kernel_notebooks[snb.name] = {g.name: g.score for g in snb.grades}
                v = verdicts.get(snb.name)
                graded = {c["grade_id"]: c for c in plans.get(snb.name, {}).get("graded", [])}
                for g in snb.grades:
                    if v is not None and g.name in v.cells:
                        independent_score, checked = v.cells[g.name].score, v.cells[g.name].checked_score
                    elif g.name in graded:
                        independent_score = checked = 0.0  # no independent verdict: no points
                    else:
                        continue
                    kernel_score = g.score
                    compared = graded.get(g.name, {}).get("kernel_compared", True)
                    if v is not None and compared and disagreement(kernel_score, checked) is not None:
                        record.checks[snb.name]["differs"].append(
                            {"grade_id": g.name, "kernel": kernel_score, "independent": checked})
                    g.auto_score = independent_score
                    g.manual_score = None
                if v is not None:
                    _review_marks(gb, snb, v, plans.get(snb.name, {}), record)
            gb.db.commit()
            sub = gb.find_submission(record.assignment, record.student)
            record.score = sub.score
            record.max_score = sub.max_score
            record.needs_manual_grade = bool(sub.needs_manual_grade)
            record.max_by_notebook = {snb.name: snb.max_score for snb in sub.notebooks}
            for snb in sub.notebooks:
                record.notebooks[snb.name] = {g.name: g.score for g in snb.grades}


def _review_marks(gb: Gradebook, snb, v: NotebookVerdict, plan: dict, record: SubmissionRecord) -> None:
    """Flag a notebook held for review and say why (or that it was accepted) in the
    comment of its answer cell."""
    snb.flagged = v.held
    if not v.review and not v.faults:
        return
    parts = [f"cell {gid}: the check broke on the grader's side ({what}); fix it and grade again"
             for gid, what in v.faults.items()]
    if v.review:
        parts.append(("Held for review, its points withheld (python -m classroom.grade ... --accept "
                      f"{record.student}/{record.assignment} grants them): " if not v.accepted else
                      "Held for review, then accepted by the instructor (the checks' points stand): ")
                     + " | ".join(v.review[:10]))
    text = " | ".join(parts)
    for cell in plan.get("solutions") or {}:
        try:
            gb.find_comment(cell, snb.name, record.assignment, record.student).auto_comment = text[:4000]
        except MissingEntry:
            continue
