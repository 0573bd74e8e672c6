"""No honest learner zeroed or accused: the honest-habits catalogue (tests/honest/)
graded through the real grader, one class in one run (the session's shared class,
tests/graded_class.py).

Every habit must get full points in the learner's kernel (what nbgrader records) and
in the independent check (what the grade is), with the status ``graded`` and no
tampering, probe, shortcut or review line in the report.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from honest import HABITS, MAX, NOTEBOOKS

pytestmark = pytest.mark.slow
ACCUSING = ("TAMPERING", "PROBE", "SHORTCUT", "HELD FOR REVIEW", "DIFFERS", "INDEPENDENT CHECK")


@pytest.fixture(scope="module")
def graded(graded_class):
    """The class of conftest.py's ``graded_class``: the habits are among its submissions."""
    return graded_class


def test_the_catalogue_is_large_and_varied():
    assert len(HABITS) >= 30
    assert len({h.name for h in HABITS}) == len(HABITS)
    assert {h.assignment for h in HABITS} == set(NOTEBOOKS)


@pytest.mark.parametrize("habit", HABITS, ids=[h.name for h in HABITS])
def test_honest_habit_gets_full_points_and_no_accusation(graded, habit):
    records = {(r["student"], r["assignment"]): r for r in graded["summary"]["records"]}
    rec = records[(habit.name, habit.assignment)]
    name = Path(NOTEBOOKS[habit.assignment][0]).stem
    assert rec["status"] == "ok", rec["reason"]
    assert sum(rec["notebooks"][name].values()) == MAX[habit.assignment], rec["checks"][name].get("messages")
    assert sum(rec["kernel_notebooks"][name].values()) == MAX[habit.assignment], "the kernel's own grade"
    row = next(r for r in graded["summary"]["rows"] if r["student"] == habit.name and r["notebook"] == name)
    assert row["status"] == "graded" and row["all_statuses"] == "graded", row
    assert not any(word in row["problems"] for word in ACCUSING), row["problems"]
    check = rec["checks"][name]
    assert not check["review"] and not check["shortcuts"] and not check["probes"] and not check["differs"], check


def test_feedback_pages_show_the_points(graded):
    for habit in HABITS:
        pages = list((graded["out"] / "feedback" / habit.name / habit.assignment).glob("*.html"))
        assert pages, habit.name
        assert "Held for review" not in pages[0].read_text(encoding="utf-8")


def test_the_habits_notebooks_are_valid_json_notebooks():
    for habit in HABITS:
        nb = json.loads(habit.text())
        assert nb["nbformat"] == 4 and isinstance(nb["cells"], list)
