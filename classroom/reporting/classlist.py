"""The whole class as the course gradebook holds it: what every report describes.

:func:`read_class` makes one :class:`Entry` per learner and notebook of the course --
every student of the gradebook and everyone who handed something in, for every
notebook -- with

- the points as the gradebook holds them (per notebook and per graded cell: a score
  changed by hand in the formgrader counts as changed);
- the statuses and details from the submission's latest grading record
  (:mod:`classroom.reporting.records`, and this run's own), read by
  :func:`classroom.reporting.findings.notebook_findings`;
- what this run changed: ``new`` (first graded now), ``changed`` (graded again, with
  other points than before: ``previous`` holds them) or ``regraded`` (graded again, the
  same points); empty when this run did not grade it.

A submission the gradebook holds but no record describes (graded by another tool) is
``graded`` with a note; a record without a submission in the gradebook (a notebook
that failed before nbgrader recorded it) keeps its record's status.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook

from andrea_ref.grading.points import total

from ..sawarnings import ignore_add_submission_autoflush
from .findings import notebook_findings

NOT_SUBMITTED = "not submitted"
NO_RECORD = "no grading record of this grader: graded by another tool, or before this grader kept records"
HAND_CHANGED = "the gradebook's points differ from this grader's ({graded:g}): changed by hand since? The gradebook counts"


@dataclass
class Entry:
    student: str
    assignment: str
    notebook: str
    score: float | None  # None: nothing handed in
    max_score: float | None
    statuses: list[str]  # most serious first
    lines: list[str]  # the details worth a look
    cells: dict[str, float | None] = field(default_factory=dict)  # grade id -> points
    messages: dict[str, str] = field(default_factory=dict)  # grade id -> the failed check's message
    this_run: str = ""  # "", "new", "changed" or "regraded"
    previous: float | None = None  # the points before this run (for "changed")
    seconds: float | None = None

    @property
    def status(self) -> str:
        return self.statuses[0]

    @property
    def submitted(self) -> bool:
        return self.status != NOT_SUBMITTED

    def feedback(self, out: Path) -> Path | None:
        """This notebook's feedback page in the run's folder ``out``, if there is one."""
        folder = Path(out) / "feedback" / self.student / self.assignment
        for name in (f"{self.notebook}.html", "not_graded.html"):
            if (folder / name).is_file():
                return folder / name
        return None


@dataclass
class ClassList:
    entries: list[Entry]
    students: list[str]
    notebooks: dict[str, list[str]]  # assignment -> its notebooks
    cells: dict[tuple[str, str], dict[str, float]]  # (assignment, notebook) -> {grade id: max points}
    names: dict[str, str] = field(default_factory=dict)  # student id -> name, where the gradebook has one

    def of(self, assignment: str) -> list[Entry]:
        return [e for e in self.entries if e.assignment == assignment]


def gradebook_scores(db_url: str) -> dict[tuple[str, str, str], dict[str, float | None]]:
    """{(student, assignment, notebook): {grade id: points}} as the gradebook holds them."""
    found = {}
    with warnings.catch_warnings(), Gradebook(db_url) as gb:
        ignore_add_submission_autoflush()
        for a in gb.assignments:
            for sub in a.submissions:
                for snb in sub.notebooks:
                    found[sub.student.id, a.name, snb.name] = {g.name: g.score for g in snb.grades}
    return found


def _cells(gb: Gradebook, notebooks: dict[str, list[str]], cells: dict) -> None:
    """Add the notebooks and graded cells (with their points) ``gb`` records."""
    for a in gb.assignments:
        known = notebooks.setdefault(a.name, [])
        for nb in a.notebooks:
            if nb.name not in known:
                known.append(nb.name)
            cells[a.name, nb.name] = {c.name: float(c.max_score) for c in nb.grade_cells}


def _layout(db_url: str, assignments: dict[str, list[str]], release: str | None):
    """(students, {assignment: notebooks}, {(assignment, notebook): {grade id: max}}, {student: name}),
    the course's notebooks and points from ``release`` (a gradebook as the release made it) where given."""
    notebooks = {a: list(nbs) for a, nbs in assignments.items()}
    cells: dict[tuple[str, str], dict[str, float]] = {}
    with warnings.catch_warnings():
        ignore_add_submission_autoflush()
        if release is not None:
            with Gradebook(release) as gb:
                _cells(gb, notebooks, cells)
        with Gradebook(db_url) as gb:
            students = [s.id for s in gb.students]
            names = {s.id: " ".join(n for n in (s.first_name, s.last_name) if n) for s in gb.students}
            _cells(gb, notebooks, cells)
    return students, {a: sorted(n) for a, n in notebooks.items()}, cells, {k: v for k, v in names.items() if v}


def read_class(db_url: str, records: dict[tuple[str, str], dict], assignments: dict[str, list[str]], *,
               graded_now: set[tuple[str, str]] = frozenset(),
               before: dict[tuple[str, str, str], dict] | None = None, keep=lambda student: True,
               release: str | None = None) -> ClassList:
    """The class (see the module's docstring). ``records``: the latest record of each
    (student, assignment); ``assignments``: the course's notebooks (the gradebook may not
    know an assignment nobody handed in yet); ``graded_now``: what this run graded;
    ``before``: :func:`gradebook_scores` before this run merged; ``keep``: which students
    to report (default: all); ``release``: the URL of a gradebook that records every
    assignment of the course as released (the run's template), for the points of the
    assignments nobody has handed in yet."""
    before = before or {}
    students, notebooks, cells, names = _layout(db_url, assignments, release)
    scores = gradebook_scores(db_url)
    everyone = sorted(s for s in set(students) | {s for s, _ in records} if keep(s))
    entries = []
    for a in sorted(notebooks):
        for student in everyone:
            record = records.get((student, a))
            for nb in notebooks[a] or ["?"]:
                entries.append(_entry(student, a, nb, record, scores.get((student, a, nb)), cells.get((a, nb), {}),
                                      (student, a) in graded_now, before.get((student, a, nb))))
    return ClassList(entries, everyone, notebooks, cells, names)


def _entry(student, assignment, notebook, record, cells, cell_max, graded_now, before) -> Entry:
    maximum = sum(cell_max.values()) if cell_max else None
    if record is None and cells is None:
        return Entry(student, assignment, notebook, None, maximum, [NOT_SUBMITTED], [])
    if record is not None:
        statuses, lines = notebook_findings(record, notebook)
        check = (record.get("checks") or {}).get(notebook) or {}
        messages = {g: str(m) for g, m in (check.get("messages") or {}).items()}
        recorded = (record.get("notebooks") or {}).get(notebook)
        maximum = (record.get("max_by_notebook") or {}).get(notebook, maximum)
    else:
        statuses, lines, messages, recorded = ["graded"], [f"NOTE: {NO_RECORD}"], {}, None
    if cells is None:  # the gradebook holds nothing of it: the record's own points
        cells = dict(recorded or {})
    elif recorded is not None and abs(total(recorded.values()) - total(cells.values())) > 1e-9:
        lines = [*lines, "NOTE: " + HAND_CHANGED.format(graded=total(recorded.values()))]
    score = total(cells.values()) if cells else float((record or {}).get("score") or 0.0)
    this_run, previous = "", None
    if graded_now:
        if before is None:
            this_run = "new"
        elif abs(total(before.values()) - score) > 1e-9:
            this_run, previous = "changed", total(before.values())
        else:
            this_run = "regraded"
    return Entry(student, assignment, notebook, score, None if maximum is None else float(maximum), statuses, lines,
                 cells=dict(cells), messages=messages, this_run=this_run, previous=previous,
                 seconds=(record or {}).get("seconds"))
