"""The class as text and spreadsheets: ``grades.csv``, ``report.csv`` and ``report.txt``.

- ``grades.csv``: nbgrader's own export of the course gradebook (one row per student
  and assignment), unchanged in format, every text cell guarded as a spreadsheet cell
  (:func:`export_grades`);
- ``report.csv``: one row per learner *and notebook* of the class
  (:class:`classroom.reporting.classlist.ClassList`) with the score, the maximum, the
  statuses, what to look at, what this run changed, and one column per graded
  property (a graded cell: its points) (:func:`write_report_csv`);
- ``report.txt``: the summary per assignment, every learner and notebook with its
  status, the details of everything that needs a look, what was refused
  (:func:`report_text`).

A learner's id, name or message never starts a formula: :func:`classroom.textsafe.cell`
(``=``, ``+``, ``-``, ``@``, and the tab and carriage return it writes as escapes).
"""
from __future__ import annotations

import csv
import math
import os
import statistics
import warnings
from pathlib import Path

from nbgrader.api import Gradebook
from nbgrader.plugins import CsvExportPlugin

from .. import dburl, textsafe
from ..sawarnings import ignore_add_submission_autoflush
from .classlist import ClassList, Entry

FIELDS = ["student", "assignment", "notebook", "score", "max_score", "status", "all_statuses", "problems",
          "seconds", "this_run", "previous_score"]


def _is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def guard_csv(path: Path) -> None:
    """Rewrite the CSV file ``path`` with every cell that is not a number made safe for a
    spreadsheet (:func:`classroom.textsafe.cell`)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    guarded = [[v if v == "" or _is_number(v) else textsafe.cell(v, 4000) for v in row] for row in rows]
    if guarded == rows:
        return
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(guarded)
    os.replace(tmp, path)


def export_grades(db_url: str, path: Path) -> None:
    """nbgrader's CSV export of the gradebook at ``db_url``, guarded (:func:`guard_csv`)."""
    plugin = CsvExportPlugin()
    plugin.to = str(path)
    with warnings.catch_warnings(), Gradebook(db_url) as gb:
        ignore_add_submission_autoflush()  # only nbgrader's harmless one (see sawarnings)
        plugin.export(gb)
    guard_csv(path)


def property_columns(klass: ClassList) -> dict[tuple[str, str, str], str]:
    """{(assignment, notebook, grade id): its column in report.csv}: the grade id, or
    ``notebook:grade id`` where two notebooks use the same id."""
    keys = [(a, nb, g) for (a, nb), cells in sorted(klass.cells.items()) for g in cells]
    ids = [g for _, _, g in keys]
    return {(a, nb, g): g if ids.count(g) == 1 else f"{nb}:{g}" for a, nb, g in keys}


def rows_of(klass: ClassList) -> list[dict]:
    """The rows of report.csv (also what the run's summary returns)."""
    columns = property_columns(klass)
    rows = []
    for e in klass.entries:
        row = {"student": textsafe.cell(e.student, 120), "assignment": e.assignment, "notebook": e.notebook,
               "score": e.score if e.submitted else 0.0, "max_score": e.max_score, "status": e.status,
               "all_statuses": "; ".join(e.statuses), "problems": textsafe.cell(" | ".join(e.lines), 4000),
               "seconds": e.seconds, "this_run": e.this_run, "previous_score": e.previous}
        for (a, nb, g), column in columns.items():
            if (a, nb) == (e.assignment, e.notebook) and e.submitted:
                row[column] = e.cells.get(g)
        rows.append(row)
    return rows


def write_report_csv(path: Path, klass: ClassList, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS + list(property_columns(klass).values()))
        w.writeheader()
        w.writerows(rows)


def to_look_at(e: Entry) -> bool:
    """Whether a notebook needs the instructor's eyes (a handed-in one that is not
    simply graded, or has notes)."""
    return e.submitted and (e.status != "graded" or bool(e.lines))


def _mark(e: Entry) -> str:
    if e.this_run == "changed":
        return f"  [this run: changed, was {e.previous:g}]"
    return f"  [this run: {e.this_run}]" if e.this_run else ""


def report_text(klass: ClassList, skipped: list[str], *, db_url: str, out: Path, graded_now: int,
                header: str | None = None) -> str:
    handed_in = [e for e in klass.entries if e.submitted]
    changed = sum(e.this_run == "changed" for e in klass.entries)
    new = sum(e.this_run == "new" for e in klass.entries)
    lines = [f"Grading report: the class as the gradebook holds it, {len(klass.students)} learner(s), "
             f"{len(handed_in)} of {len(klass.entries)} notebooks handed in; this run graded {graded_now} "
             f"submission(s) ({new} notebook(s) new, {changed} changed). Gradebook: {textsafe.line(dburl.shown(db_url))}", ""]
    lines.append(f"{'assignment':<16}{'n':>4}{'mean':>8}{'median':>8}{'min':>7}{'max':>7}{'of':>6}")
    for a in sorted(klass.notebooks):
        scores = [e.score for e in klass.of(a) if e.submitted]
        if not scores:
            continue
        most = max((e.max_score for e in klass.of(a) if e.max_score is not None), default=float("nan"))
        lines.append(f"{a:<16}{len(scores):>4}{statistics.mean(scores):>8.2f}{statistics.median(scores):>8.2f}"
                     f"{min(scores):>7.1f}{max(scores):>7.1f}{most:>6.0f}")
    lines += ["", "Every learner and notebook:"]
    for e in klass.entries:
        score = e.score if e.submitted else 0.0
        lines.append(f"  {textsafe.line(e.student, 60):<24} {e.assignment + '/' + e.notebook:<28} "
                     f"{score:>5g}  {'; '.join(e.statuses)}{_mark(e)}")
    lines.append("")
    look = [e for e in klass.entries if to_look_at(e)]
    if look:
        lines.append(f"{len(look)} notebook(s) to look at:")
        for e in look:
            lines.append(f"  {textsafe.line(e.student, 60)}/{e.assignment}/{e.notebook} "
                         f"(score {e.score:g}; {e.status}):")
            lines += [f"      - {ln}" for ln in e.lines]
    else:
        lines.append("No notebook failed, timed out, hit a limit, differs from its independent check "
                     "or needs a look.")
    missing = [e for e in klass.entries if not e.submitted]
    if missing:
        lines += ["", f"{len(missing)} notebook(s) not submitted (listed above with status 'not submitted')."]
    if skipped:
        lines += ["", f"{len(skipped)} file(s) or problem(s) in the submissions of this run:"]
        lines += [f"  - {textsafe.line(s, 400)}" for s in skipped]
    lines += ["", f"Files: {out / 'report.html'} (the class view), {out / 'grades.csv'}, {out / 'report.csv'}, "
                  f"feedback in {out / 'feedback'}"]
    return "\n".join(([header] if header else []) + lines)
