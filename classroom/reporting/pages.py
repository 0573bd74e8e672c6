"""The feedback pages of one graded submission, as a learner reads them.

For each notebook nbgrader graded: the notebook made safe to show, with the
independent verdicts in its graded cells and its markdown in the feedback's language,
rendered and finished by :func:`classroom.reporting.feedback.write_feedback` (one
sanitiser over the final page, math typeset to SVG, no script, links that work where
the page is read). A page that cannot be built is replaced by one that says so; the
points recorded before are never touched. A submission that could not be graded gets
a page that says so, in the grader's own words only.
"""
from __future__ import annotations

import html
import os
from pathlib import Path

import nbformat
from nbgrader.apps.api import NbGraderAPI

from ..notebook_i18n import LOCALES, catalog, translate_notebook
from ..record import STATUS_FAILED, SubmissionRecord
from ..scoring.verdicts import NotebookVerdict, verdict_outputs
from . import feedback


def in_language(nb, assignment: str, locales: Path = LOCALES):
    """The graded notebook with its markdown in the feedback's language: nbgrader put
    the English text of the locked cells back, from the gradebook."""
    language = os.environ.get("ANDREA_LANG", "en")
    if language == "en":
        return nb
    translated = translate_notebook(dict(nb), language, catalog(language, assignment, locales))
    return nbformat.from_dict(translated)


def write_feedback(api: NbGraderAPI, wdir: Path, out: Path, record: SubmissionRecord, graded_nbs: dict,
                   verdicts: dict[str, NotebookVerdict], locales: Path = LOCALES) -> None:
    """Write ``record``'s feedback pages into ``out/feedback/<student>/<assignment>/``
    (``wdir``: the worker's course folder, where nbgrader renders them; ``graded_nbs``:
    {notebook: graded notebook}). What could not be built is noted in ``record.notes``."""
    student, assignment = record.student, record.assignment
    fb_out = out / "feedback" / student / assignment
    if graded_nbs and record.status != STATUS_FAILED:
        shown = {name: {g: verdict_outputs(c) for g, c in v.cells.items()} for name, v in verdicts.items()}
        made = feedback.write_feedback(api, wdir, out, student, assignment, graded_nbs, shown, record.to_dict(),
                                       prepare=lambda nb: in_language(nb, assignment, locales))
        record.notes += made["notes"]
        record.feedback = made["pages"]
    if not any(fb_out.glob("*.html")):
        fb_out.mkdir(parents=True, exist_ok=True)
        (fb_out / "not_graded.html").write_text(not_graded_page(student, assignment, record.status))


def not_graded_page(student: str, assignment: str, status: str) -> str:
    # only the grader's own words here: no text from the learner's code
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Feedback</title></head><body>"
            f"<h1>{html.escape(assignment)}: {html.escape(student)}</h1>"
            f"<p>This submission could not be graded automatically ({html.escape(status)}).</p>"
            "<p>Your instructor has been told and will look at it.</p></body></html>")
