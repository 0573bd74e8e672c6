"""The capstone notebook (05_capstone) as its properties say. Its answers -- classic
mistakes, other correct ways -- are judged with every other notebook's in the catalogue
(tests/catalogue/capstone.py, tests/test_grading_catalogue.py); here: the notebook, the
manifest and the checks agree, the instructor's answer gets every point, the bounds
the checks state hold with room, and the real grader, where the points come from the
independent check and the rules from the answer's source, agrees cell by cell --
forbidden shortcuts included, and a function that runs out of time costing only its
own cells."""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import re

import pytest

from andrea_ref import grading
from andrea_ref.grading import capstone as K
from andrea_ref.grading import capstone_sample
from andrea_ref.grading.manifest import load
from catalogue import capstone as A
from graded_class import CAPSTONE_GRADED, CAPSTONE_RIGHT, ENDLESS

SEEDS = (0, 20261130)  # the notebook's visible and hidden seeds
CELLS = [c for cells in A.CELLS.values() for c in cells]


@pytest.fixture(autouse=True)
def one_thread():
    """The checks on one thread, as in a grading sandbox (OMP_NUM_THREADS=1)."""
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def functions(entry=None) -> dict:
    """The three functions as the notebook defines them, ``entry``'s cell replaced."""
    ns: dict = {}
    exec(compile(A.setup_source(), "<setup>", "exec"), ns)
    for fn in A.FUNCTIONS:
        source = entry.source if entry is not None and entry.cell == fn else A.solution(fn)
        exec(compile(source, f"<{fn}>", "exec"), ns)
    return {fn: ns[fn] for fn in A.FUNCTIONS}


def test_the_notebook_and_the_checks_agree():
    """The manifest reads the three functions and eight graded cells, each checking the
    function the catalogue says; every check states its property."""
    a = load()[A.NB]
    assert [name for name, _args in a.functions()] == list(A.FUNCTIONS)
    assert list(a.points()) == CELLS and sum(a.points().values()) == 10
    stated = tuple(check.__doc__.strip().splitlines()[0] for _label, check in K.CHECKS)
    assert stated == K.PROPERTIES


def test_the_instructors_answer_gets_every_point():
    fns = functions()
    for fn, cells in A.CELLS.items():
        for cell in cells:
            for seed in SEEDS:
                with contextlib.redirect_stdout(io.StringIO()):
                    getattr(grading, f"check_{cell}")(fns[fn], seed=seed)


def test_the_training_bound_holds_with_room_for_every_seed():
    """The reference loop ends well below the bound on every seed tried; the untrained
    model and one trained at a tenth of the rate stay above it."""
    train = functions()["train"]
    finals = []
    for seed in range(6):
        params, batches, baseline, val = K.learning_task(seed)
        train(K.FORWARD, params, batches, K.LEARN_LR, 4)
        finals.append(K.validation_loss(params, val))
    bound = baseline - K.LEARN_MARGIN
    assert max(finals) < bound - 0.1, (finals, bound)
    params, batches, baseline, val = K.learning_task(0)
    assert K.validation_loss(params, val) > bound + 0.5
    train(K.FORWARD, params, batches, K.LEARN_LR / 10, 4)
    assert K.validation_loss(params, val) > bound


def test_the_sampling_bound_is_what_the_checks_promise():
    """Hoeffding's bound over every token, temperature and call stays below 1e-9."""
    n, eps = K.SAMPLE_ROWS, K.SAMPLE_BOUND
    calls = len(K.TEMPERATURES) * len(SEEDS)
    assert 2 * math.exp(-2 * n * eps ** 2) * len(capstone_sample._LOGIT_VALUES) * calls < 1e-9


def test_a_lazy_import_inside_the_learners_call_is_no_shortcut():
    """The first torch.optim optimizer a process builds imports PyTorch's compiler, which
    registers torch._decomp's decompositions: code of a forbidden folder that runs for the
    import, not for the learner. In a fresh process an honest torch.optim.SGD passes."""
    import subprocess
    import sys
    code = (
        "import io, contextlib, sys, torch\n"
        "torch.set_num_threads(1)\n"
        "from catalogue import capstone as A\n"
        "assert 'torch._dynamo' not in sys.modules\n"
        "ns = {}\n"
        "exec(A.setup_source(), ns)\n"
        "exec(next(e for e in A.CORRECT if e.name == 'train_torch_sgd').source, ns)\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    ns['grading'].check_train_update(ns['train'])\n"
        "assert 'torch._dynamo' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=str(A.ROOT / "tests"))
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_the_training_check_is_left_to_the_grader_in_its_sandbox_alone(monkeypatch):
    """check_train_learns trains a model for 150 steps: where the course's grader executes
    the notebook (runner.GRADER_ENV is "1" in its sandboxes) the kernel does not run it,
    since the independent check decides its points; in a learner's own notebook, and
    under plain nbgrader, it runs and fails a train that learns nothing."""
    from andrea_ref.grading import runner
    still = functions(next(e for e in A.MISTAKES if e.name == "train_no_update"))["train"]
    right = functions()["train"]
    assert getattr(grading.check_train_learns, "left_to_grader", False)
    assert not any(getattr(c, "left_to_grader", False) for c in (grading.check_train_loss, grading.check_train_update))
    for value in (None, "0", "yes"):  # anything but the grader's "1" runs the check
        if value is None:
            monkeypatch.delenv(runner.GRADER_ENV, raising=False)
        else:
            monkeypatch.setenv(runner.GRADER_ENV, value)
        with pytest.raises(AssertionError, match="validation loss"):
            with contextlib.redirect_stdout(io.StringIO()):
                grading.check_train_learns(still)
    monkeypatch.setenv(runner.GRADER_ENV, "1")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        grading.check_train_learns(still)  # not run: nothing to judge, nothing claimed here
        holds = K.report_train(still)
        right_holds = K.report_train(right)
    text = out.getvalue()
    assert text.count("not run here") == 3, text
    assert "\u2713" not in text.splitlines()[0], text
    # the self-check counts what it ran: the steps' slip is still reported, and learning is not counted
    assert not holds and right_holds, text
    assert "1 of 2 properties hold." in text and "2 of 2 properties hold." in text, text


def test_the_independent_check_runs_every_check_whatever_the_environment_says(monkeypatch):
    """Where the points are decided nothing is left to anyone: even with the sandboxes'
    variable set in the grader's own environment (an instructor's shell, say), the
    independent check trains and fails a train that learns nothing."""
    from andrea_ref.grading import runner
    from classroom.scoring import plan as scoring_plan
    from classroom.scoring import verdicts
    monkeypatch.setenv(runner.GRADER_ENV, "1")
    still = functions(next(e for e in A.MISTAKES if e.name == "train_no_update"))["train"]
    still.over_budget = False  # what the verdict reads of a served function
    solution, release = (json.loads(path.read_text()) for path in (A.NOTEBOOK, A.RELEASE))
    cell = next(g for g in scoring_plan.build_plan(solution, release)["graded"] if g["grade_id"] == "train_learns")
    verdict = verdicts.run_cell(cell, still)
    assert not verdict.passed and "validation loss" in verdict.message, verdict


# ------------------------------------------------------------------ the real grader
GRADED = CAPSTONE_GRADED
HELD = {"train_checks_own_reference"}  # it reaches the grading package's internals: held whole


@pytest.fixture(scope="module")
def graded_capstone(graded_class):
    """The capstone's answers of the session's shared class (tests/graded_class.py):
    ({student: report.csv row of 05_capstone}, report.txt)."""
    out = graded_class["out"]
    with open(out / "report.csv", newline="", encoding="utf-8") as f:
        rows = {r["student"]: r for r in csv.DictReader(f) if r["assignment"] == A.NB}
    return rows, (out / "report.txt").read_text(encoding="utf-8")


def test_the_real_grader_gives_the_right_answer_every_point(graded_capstone, graded_class):
    rows, _report = graded_capstone
    assert (float(rows[CAPSTONE_RIGHT]["score"]), rows[CAPSTONE_RIGHT]["status"]) == (10.0, "graded"), \
        rows[CAPSTONE_RIGHT]
    # the learner's kernel left the training check to the independent check, which gave its point
    nb = json.loads((graded_class["out"] / "autograded" / CAPSTONE_RIGHT / A.NB / "capstone.ipynb").read_text())
    learns = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "train_learns")
    shown = "".join("".join(o.get("text", "")) for o in learns["outputs"])
    assert shown.count("not run here") == 2 and "\u2713" not in shown, learns["outputs"]
    assert float(rows[CAPSTONE_RIGHT]["train_learns"]) == 1.0, rows[CAPSTONE_RIGHT]


@pytest.mark.parametrize("entry", GRADED, ids=lambda e: e.name)
def test_the_real_grader_agrees_cell_by_cell(graded_capstone, entry):
    rows, report = graded_capstone
    row = rows[entry.name]
    lost = {c for c in CELLS if float(row[c] or 0) == 0.0}
    assert lost == (set(CELLS) if entry.name in HELD else set(entry.lost_cells)), row
    assert "tampering" not in row["status"], row
    found = re.search(rf"^  {entry.name}/{A.NB}/.*?(?=^  \S|\Z)", report, re.M | re.S)
    mine = found.group(0) if found else ""
    if entry.name in HELD:
        assert row["status"] == "held for review" and "HELD FOR REVIEW" in mine, (row, mine)
    elif entry in A.SHORTCUTS:
        assert all(f"SHORTCUT: cell {c}" in mine for c in entry.lost_cells), mine
    elif entry is ENDLESS:  # its cells stopped at the time limit: said so, and the sampler's points kept
        assert row["status"] == "timed out" and float(row["score"]) == 7.0, row
    else:
        assert row["status"] == "graded", row


def test_a_long_training_call_has_time_in_proportion(monkeypatch):
    """A check that asks train for 150 steps gives it three times the per-call limit: an
    honest loop on a slow machine passes, and an endless one is stopped at that limit,
    which the message names."""
    import time

    from andrea_ref.grading import core
    solution = functions()["train"]

    def slow_train(forward, params, batches, lr, n_head):
        time.sleep(4.0)  # longer than the per-call limit below, shorter than three of them
        return solution(forward, params, batches, lr, n_head)

    monkeypatch.setattr(core, "CALL_TIME_LIMIT", 3.0)
    with contextlib.redirect_stdout(io.StringIO()):
        grading.check_train_learns(slow_train)

    def endless_train(forward, params, batches, lr, n_head):
        while True:
            time.sleep(0.01)

    monkeypatch.setattr(core, "CALL_TIME_LIMIT", 0.5)
    with pytest.raises(AssertionError, match=r"did not finish within 1\.5 s"):
        with contextlib.redirect_stdout(io.StringIO()):
            grading.check_train_learns(endless_train)
    with pytest.raises(AssertionError, match=r"within 1\.5 s in an earlier check"):
        with contextlib.redirect_stdout(io.StringIO()):
            grading.check_train_learns(endless_train)
