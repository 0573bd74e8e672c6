"""Graded submissions written from the workers' gradebooks into the course gradebook.

Each grading worker writes to its own SQLite gradebook. The course gradebook is any
SQLAlchemy URL nbgrader accepts (``sqlite:///path``, ``postgresql://user@host/db`` ...):

- :func:`prepare`: before any result, nbgrader's tables, the course, every assignment with
  its notebooks and cells (from the run's template gradebook) and every learner of the
  class are created where the gradebook lacks them (a fresh PostgreSQL database needs no
  ``nbgrader db`` step); a learner the gradebook already knows keeps their roster entry;
- :class:`Writer`: one submission at a time, as each is graded (what a grading run does:
  the instructor sees progress as it happens); :func:`merge`: many at once;
- a submission is identified by (student, assignment): writing it again updates it in
  place, so nothing is lost and nothing is duplicated, whatever the order of the workers
  or of the graders, or how often a submission is written;
- every score (auto, manual, extra credit), comment, flag, timestamp and late penalty is
  copied.

nbgrader's gradebook API commits as it goes: a write interrupted half-way is completed by
writing the submission again, which the work queue does (a claim is marked done only
after its submission was written, :mod:`classroom.orchestration.jobs`).
"""
from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Iterable

from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.exc import OperationalError

from ..sawarnings import ignore_add_submission_autoflush


# The kinds of cell nbgrader records per notebook, and the fields each is created with.
_CELL_KINDS = (
    ("grade", ("max_score", "cell_type")),
    ("solution", ()),
    ("task", ("max_score", "cell_type")),
    ("source", ("source", "checksum", "locked", "cell_type")),
)


def _ensure_assignment(src: Gradebook, dst: Gradebook, name: str) -> None:
    a = src.find_assignment(name)
    try:
        dst.find_assignment(name)
    except MissingEntry:
        dst.add_assignment(name, duedate=a.duedate)
    for nb in a.notebooks:
        try:
            dst.find_notebook(nb.name, name)
        except MissingEntry:
            dst.add_notebook(nb.name, name)
        for kind, fields in _CELL_KINDS:
            for c in getattr(nb, f"{kind}_cells"):
                try:
                    getattr(dst, f"find_{kind}_cell")(c.name, nb.name, name)
                except MissingEntry:
                    getattr(dst, f"add_{kind}_cell")(c.name, nb.name, name, **{f: getattr(c, f) for f in fields})


def _ensure_student(dst: Gradebook, student: str, src_student=None) -> None:
    """The learner, created if the gradebook lacks them; a roster entry is never
    overwritten (a worker's gradebook knows only the id)."""
    try:
        dst.find_student(student)
    except MissingEntry:
        known = {f: getattr(src_student, f, None) for f in ("first_name", "last_name", "email", "lms_user_id")}
        dst.add_student(student, **{f: v for f, v in known.items() if v is not None})


def _copy_submission(src: Gradebook, dst: Gradebook, assignment: str, student: str) -> None:
    s_sub = src.find_submission(assignment, student)
    _ensure_student(dst, student, s_sub.student)
    d_sub = dst.update_or_create_submission(assignment, student, timestamp=s_sub.timestamp)
    d_sub.extension = s_sub.extension
    for s_nb in s_sub.notebooks:
        d_nb = dst.find_submission_notebook(s_nb.name, assignment, student)
        d_nb.flagged = s_nb.flagged
        d_nb.late_submission_penalty = s_nb.late_submission_penalty
        for g in s_nb.grades:
            d = dst.find_grade(g.name, s_nb.name, assignment, student)
            d.auto_score = g.auto_score
            d.manual_score = g.manual_score
            d.extra_credit = g.extra_credit
            d.needs_manual_grade = g.needs_manual_grade
        for c in s_nb.comments:
            d = dst.find_comment(c.name, s_nb.name, assignment, student)
            d.auto_comment = c.auto_comment
            d.manual_comment = c.manual_comment


def prepare(target_url: str, template_url: str, students, course_id: str = "default_course") -> None:
    """The course gradebook ready for results (see the module docstring): ``template_url``
    holds the assignments as the run generated them, ``students`` the class."""
    with warnings.catch_warnings(), Gradebook(target_url, course_id) as dst, Gradebook(template_url, course_id) as src:
        ignore_add_submission_autoflush()
        for a in src.assignments:
            _ensure_assignment(src, dst, a.name)
        known = {s.id for s in dst.students}
        for student in sorted(set(students) - known):
            _ensure_student(dst, student)
        dst.db.commit()


class Writer:
    """Writes graded submissions into the course gradebook one at a time, with the
    gradebook held open between them (every write ends its transaction)."""

    def __init__(self, target_url: str, course_id: str = "default_course"):
        self.target_url, self.course_id = target_url, course_id
        self.dst: Gradebook | None = None
        self.ensured: set[str] = set()  # assignments known to be complete in the target

    def write(self, source_url: str, student: str, assignment: str) -> None:
        """Copy (student, assignment) from the gradebook at ``source_url``; a lost
        connection is opened again and the write repeated once."""
        for attempt in (1, 2):
            if self.dst is None:
                self.dst = Gradebook(self.target_url, self.course_id)
            try:
                with warnings.catch_warnings(), Gradebook(source_url, self.course_id) as src:
                    ignore_add_submission_autoflush()
                    if assignment not in self.ensured:
                        _ensure_assignment(src, self.dst, assignment)
                        self.ensured.add(assignment)
                    _copy_submission(src, self.dst, assignment, student)
                    self.dst.db.commit()
                return
            except OperationalError:
                self.close()
                if attempt == 2:
                    raise
            except BaseException:
                self.dst.db.rollback()  # never left idle inside a transaction
                raise

    def close(self) -> None:
        if self.dst is not None:
            try:
                self.dst.db.rollback()
                self.dst.close()
            except Exception:  # noqa: BLE001 - a connection that is already gone
                pass
            self.dst = None


def merge(target_url: str, sources: dict[str, Iterable[tuple[str, str]]], course_id: str = "default_course") -> int:
    """Copy submissions into the gradebook at ``target_url``.

    ``sources`` maps a source gradebook URL to the (student, assignment) pairs to take
    from it. Returns the number of submissions written.
    """
    wanted: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for url, pairs in sources.items():
        wanted[url].extend(pairs)
    seen: dict[tuple[str, str], str] = {}
    for url, pairs in wanted.items():
        for pair in pairs:
            if pair in seen and seen[pair] != url:
                raise ValueError(f"{pair} is offered by two gradebooks ({seen[pair]} and {url})")
            seen[pair] = url
    n = 0
    with warnings.catch_warnings(), Gradebook(target_url, course_id) as dst:
        # nbgrader's update_or_create_submission trips a harmless autoflush warning (see sawarnings)
        ignore_add_submission_autoflush()
        for url, pairs in wanted.items():
            if not pairs:
                continue
            with Gradebook(url, course_id) as src:
                for assignment in sorted({a for _, a in pairs}):
                    _ensure_assignment(src, dst, assignment)
                for student, assignment in pairs:
                    _copy_submission(src, dst, assignment, student)
                    dst.db.commit()
                    n += 1
    return n


def scores(url: str, course_id: str = "default_course") -> dict[tuple[str, str], dict[str, dict[str, float | None]]]:
    """{(student, assignment): {notebook/grade cell: score}} -- for reports and tests."""
    out = {}
    with Gradebook(url, course_id) as gb:
        for a in gb.assignments:
            for sub in a.submissions:
                cells = {}
                for nb in sub.notebooks:
                    for g in nb.grades:
                        cells[f"{nb.name}/{g.name}"] = g.score
                out[(sub.student.id, a.name)] = cells
    return out
