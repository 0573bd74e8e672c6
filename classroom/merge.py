"""Merge graded submissions from the workers' gradebooks into the course gradebook.

Each grading worker writes to its own SQLite gradebook. :func:`merge` copies the
submissions it is told about into the course gradebook (any SQLAlchemy URL nbgrader
accepts: ``sqlite:///path``, ``postgresql://user@/db?host=/socket/dir`` ...):

- the assignments, notebooks and cells are created from the source gradebook where
  the target lacks them (a fresh PostgreSQL database needs no ``nbgrader db`` step);
- a submission is identified by (student, assignment): merging it again updates it
  in place, so nothing is lost and nothing is duplicated, whatever the order of
  the workers or how often a merge is repeated;
- every score (auto, manual, extra credit), comment, flag, timestamp and late
  penalty is copied.

nbgrader's gradebook API commits as it goes, so a merge that is interrupted half-way
leaves some submissions merged and some not; because every step is an update in
place, running it again (``python -m classroom.grade`` does so on every run)
completes it.
"""
from __future__ import annotations

import warnings
from collections import defaultdict
from typing import Iterable

from nbgrader.api import Gradebook, MissingEntry

from .sawarnings import ignore_add_submission_autoflush


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


def _copy_submission(src: Gradebook, dst: Gradebook, assignment: str, student: str) -> None:
    s_sub = src.find_submission(assignment, student)
    st = s_sub.student
    dst.update_or_create_student(student, first_name=st.first_name, last_name=st.last_name,
                                 email=st.email, lms_user_id=st.lms_user_id)
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
