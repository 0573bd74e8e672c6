"""Reports of a grading run: what the instructor reads first, for the whole class.

``write_reports`` writes, into the output folder, after the run has merged its grades
into the course gradebook:

- ``grades.csv``: nbgrader's own export of the course gradebook;
- ``report.csv`` and ``report.txt`` (:mod:`classroom.reporting.tables`): every learner
  and notebook with its status, what to look at and what this run changed;
- ``report.html`` (:mod:`classroom.reporting.classview`): the class view.

All of them describe the whole class as the gradebook holds it
(:mod:`classroom.reporting.classlist`): grading one more learner leaves everyone else
with their real status and points, read from the grading records kept in the gradebook
(:mod:`classroom.reporting.records`). The statuses are those of
:mod:`classroom.reporting.findings`.
"""
from __future__ import annotations

from pathlib import Path

from .classlist import read_class
from .classview import write_class_view
from .records import load
from .tables import export_grades, report_text, rows_of, to_look_at, write_report_csv


def write_reports(out: Path, db_url: str, records: list[dict], skipped: list[str], *, graded_now: int,
                  assignments: dict[str, list[str]] | None = None, graded: set[tuple[str, str]] = frozenset(),
                  before: dict | None = None, keep=lambda student: True, header: str | None = None,
                  release: str | None = None) -> dict:
    """Write grades.csv, report.csv, report.txt and report.html of the class in the
    gradebook ``db_url``; return the summary the caller prints.

    ``records``: this run's current records (the gradebook's kept ones fill in the rest);
    ``skipped``: what the intake skipped or refused; ``graded``: the (student, assignment)
    pairs this run graded (``graded_now`` of them); ``before``: the gradebook's points
    before this run merged (:func:`classroom.reporting.classlist.gradebook_scores`);
    ``keep``: the students to report; ``header``: a first line (e.g. how far the work queue has got);
    ``release``: a gradebook with every assignment as released (the run's template)."""
    out = Path(out)
    kept = {**load(db_url), **{(r["student"], r["assignment"]): r for r in records}}
    klass = read_class(db_url, kept, dict(assignments or {}), graded_now=set(graded), before=before, keep=keep,
                       release=release)
    export_grades(db_url, out / "grades.csv")
    rows = rows_of(klass)
    write_report_csv(out / "report.csv", klass, rows)
    text = report_text(klass, skipped, db_url=db_url, out=out, graded_now=graded_now, header=header)
    (out / "report.txt").write_text(text + "\n", encoding="utf-8")
    write_class_view(out / "report.html", klass, skipped, out=out, db_url=db_url, graded_now=graded_now,
                     header=header)
    problems = {}
    for e in klass.entries:
        if to_look_at(e):
            problems.setdefault((e.student, e.assignment), []).extend(e.lines or e.statuses)
    scores = {}
    for e in klass.entries:
        if e.submitted:
            scores[e.student, e.assignment] = scores.get((e.student, e.assignment), 0.0) + (e.score or 0.0)
    return {"text": text, "problems": problems, "rows": rows, "scores": scores, "records": records,
            "class": klass}
