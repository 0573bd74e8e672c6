"""The grader reads every answer's source before it runs a cell
(:func:`classroom.scoring.shortcuts.analyse`), and that reading has a hard budget
(``source.MAX_SECONDS``, ``source.MAX_WORK``) past which the notebook is held for
review. No honest notebook may come near it: every notebook of the course's catalogues
(each mistake and correct answer, the capstone's shortcuts), of the honest habits, of
the hostile shortcut variants and of the forgeries is read here, each in well under a
second and a small share of the work budget, all together in a few seconds.
"""
from __future__ import annotations

import copy
import json
import time

import pytest

import catalogue
from catalogue import capstone
from hostile.shortcuts import CLASSES
from hostile.submissions import FORGERIES, notebook_with
from honest import ANSWER, HABITS, NOTEBOOKS, ROOT, released

from classroom.scoring import source
from classroom.scoring.plan import answer_runs, build_plan
from classroom.scoring.shortcuts import analyse

EACH_S = 2.0  # seconds one notebook may take here (they take tens of milliseconds)
TOTAL_S = 60.0  # all of one corpus together
WORK_SHARE = 50  # each notebook's work stays below MAX_WORK / WORK_SHARE


def _index(nb: dict, cell_id: str) -> int:
    for i, cell in enumerate(nb["cells"]):
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == cell_id or cell.get("id") == cell_id:
            return i
    raise KeyError(cell_id)


def _entry_notebook(entry) -> dict:
    """The released notebook with the entry's answer cell, and correct answers in its others."""
    nb = copy.deepcopy(released(entry.notebook))
    given = ANSWER[entry.notebook]
    answers = dict(given) if isinstance(given, dict) else {NOTEBOOKS[entry.notebook][1]: given}
    answers[entry.cell or NOTEBOOKS[entry.notebook][1]] = entry.source
    for cell_id, src in answers.items():
        nb["cells"][_index(nb, cell_id)]["source"] = src
    return nb


def _gelu_notebook(src: str):
    return lambda: json.loads(notebook_with(released("03_gelu"), src))


CORPORA = {
    "catalogue": lambda: [(f"{e.notebook}/{e.name}", e.notebook, lambda e=e: _entry_notebook(e))
                          for e in catalogue.entries() + capstone.SHORTCUTS],
    "honest": lambda: [(h.name, h.assignment, h.notebook) for h in HABITS],
    "hostile": lambda: [(f"{cls}/{name}", "03_gelu", _gelu_notebook(src))
                        for cls, variants in CLASSES.items() for name, src in variants.items()],
    "forgeries": lambda: [(name, "03_gelu", _gelu_notebook(src)) for name, src in FORGERIES.items()],
}
_PLANS: dict = {}


def _plan(assignment: str) -> dict:
    if assignment not in _PLANS:
        inst = json.loads((ROOT / "solutions" / assignment / NOTEBOOKS[assignment][0]).read_text())
        _PLANS[assignment] = build_plan(inst, released(assignment))
    return _PLANS[assignment]


@pytest.mark.parametrize("corpus", list(CORPORA))
def test_every_notebook_is_read_well_within_the_budget(corpus):
    cases = CORPORA[corpus]()
    assert cases
    total, slow, heavy, stopped = 0.0, [], [], []
    for name, assignment, notebook in cases:
        plan = _plan(assignment)
        runs = answer_runs(plan, notebook())
        start = time.perf_counter()
        found = analyse(plan, runs)
        spent = time.perf_counter() - start
        total += spent
        if spent >= EACH_S:
            slow.append((name, round(spent, 2)))
        if found.work >= source.MAX_WORK // WORK_SHARE:
            heavy.append((name, found.work))
        stopped += [(name, f.what) for f in found.machinery if "could not be read" in f.what]
    assert not stopped, stopped
    assert not slow, slow
    assert not heavy, heavy
    assert total < TOTAL_S, total
