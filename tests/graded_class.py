"""The class graded once per test run by the real grader (the ``graded_class`` fixture of
conftest.py), for every test that only reads what a run gives: the honest habits of
tests/honest/ (test_honest_habits.py), a right answer and classic mistakes handed in
in English, German and Georgian (test_i18n_same_score.py), and the capstone's mistakes,
forbidden shortcuts and an endless training loop (test_grading_capstone.py).

One run of ``classroom.orchestration.run`` grades them all: every submission has a
student name of its own, so each test reads its own records, rows, scores and pages.
The run's settings are the stricter ones of the honest habits (a 60 s cell timeout, 240 s
per submission, 3 GiB and 300 CPU seconds per kernel): an honest habit must pass under
them, a translated notebook scores the same under any settings, and the endless loop
costs one cell timeout while the other worker grades the rest of the class.
"""
from __future__ import annotations

import json
from pathlib import Path

from catalogue import capstone as A
from grading_submissions import ASSIGNMENTS, CAPSTONE, CASES, make_submission
from honest import HABITS, NOTEBOOKS

from classroom import notebook_i18n, orchestration
from classroom.isolation import bwrap as sandbox

ROOT = Path(__file__).resolve().parent.parent
LANGS = ("en", "de", "ka")
# the answers handed in in every language: a right one and one classic mistake per notebook
PICK = ["ln_solution", "ln_unbiased", "ln_eps_outside", "gelu_erf", "mlp_transposed", "block_post_norm",
        "capstone_solution", "capstone_sample_times_t"]
BY_NAME = {c.student: c for c in CASES + CAPSTONE}
TRANSLATED_CASES = [BY_NAME[name] for name in PICK]


# the capstone's answers graded here: mistakes, a train that never returns, the shortcuts
CAPSTONE_BY_NAME = {e.name: e for e in (*A.MISTAKES, *A.CORRECT, *A.SHORTCUTS)}
# Named to come first: the work queue hands out a batch in student order, so its cell
# timeout runs while the other worker grades the rest of the class, not after it.
ENDLESS = A.Answer("a_train_that_never_returns", "train",
                   "def train(forward, params, batches, lr, n_head):\n    while True:\n        pass\n", A.TRAIN_ALL,
                   note="one function out of time does not stop the next one's cells")
CAPSTONE_GRADED = [CAPSTONE_BY_NAME[n] for n in (
    "tiny_no_position", "tiny_in_place", "train_no_clear", "train_returns_list", "sample_times_t", "sample_keepdim",
    "train_parameters_wrapped", "sample_manual_seed")] + [ENDLESS, *A.SHORTCUTS]
CAPSTONE_RIGHT = "capstone_right"  # the instructor's three functions


def translated_student(student: str, language: str) -> str:
    return f"{student}_{language}"


def released(assignment: str, language: str) -> dict:
    """The released notebook of ``assignment`` in ``language`` (classroom/notebook_i18n.py)."""
    nb_file = ASSIGNMENTS[assignment][0]
    nb = json.loads((ROOT / "exercises" / assignment / nb_file).read_text(encoding="utf-8"))
    return notebook_i18n.translate_notebook(nb, language, notebook_i18n.catalog(language, assignment))


def write_honest(subs: Path) -> None:
    for habit in HABITS:
        path = subs / habit.name / habit.assignment / NOTEBOOKS[habit.assignment][0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(habit.text(), encoding="utf-8")


def write_translated(subs: Path) -> None:
    for case in TRANSLATED_CASES:
        nb_file = ASSIGNMENTS[case.assignment][0]
        solution = json.loads((ROOT / "solutions" / case.assignment / nb_file).read_text(encoding="utf-8"))
        for lang in LANGS:
            path = subs / translated_student(case.student, lang) / case.assignment / nb_file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(make_submission(case, released(case.assignment, lang), solution), encoding="utf-8")


def capstone_submission(entry) -> str:
    """The released capstone with the instructor's functions, ``entry``'s cell replaced by its answer."""
    nb = json.loads(A.RELEASE.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell.get("id") in A.FUNCTIONS:
            fn = cell["id"]
            cell["source"] = entry.source if entry is not None and entry.cell == fn else A.solution(fn)
    return json.dumps(nb)


def write_capstone(subs: Path) -> None:
    for entry in [None, *CAPSTONE_GRADED]:
        path = subs / (entry.name if entry else CAPSTONE_RIGHT) / A.NB / "capstone.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(capstone_submission(entry), encoding="utf-8")


def grade(tmp: Path) -> dict:
    """Writes the class into ``tmp/subs``, grades it into ``tmp/out``; returns the run's summary and ``out``."""
    subs, out = tmp / "subs", tmp / "out"
    write_honest(subs)
    write_translated(subs)
    write_capstone(subs)
    names = [h.name for h in HABITS] + [translated_student(n, lang) for n in PICK for lang in LANGS]
    names += [CAPSTONE_RIGHT] + [e.name for e in CAPSTONE_GRADED]
    assert len(set(names)) == len(names), "a student name given twice"
    summary = orchestration.run(subs, workers=2, db_url=f"sqlite:///{tmp / 'course.db'}", out=out,
                                timeout=60, deadline=240, limits=sandbox.Limits(memory=3 << 30, cpu_seconds=300),
                                progress=False, log=lambda *_: None)
    return {"summary": summary, "out": out}
