"""The catalogue of learner answers (tests/catalogue/) through the grading checks,
called directly in this process with the notebooks' visible and hidden seeds.

Every mistake must lose exactly the graded cells it breaks; every correct variant
must get every point; a "Likely mistake" line may only name what the answer really
did (no wrong diagnosis at all), and at least 90% of the mistakes must be named. The
figures are printed (``pytest -s``)."""
from __future__ import annotations

import importlib
import linecache
import math
import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor

import pytest
import torch

import catalogue
from catalogue import capstone
from grading_answers import failed_checks
from andrea_ref import grading
from andrea_ref.attention import causal_self_attention
from andrea_ref.gelu import gelu as provided_gelu
from andrea_ref.grading import core
from andrea_ref.grading.course import graded_cells
from andrea_ref.grading.manifest import load
from andrea_ref.layernorm import layer_norm as provided_layer_norm
from andrea_ref.mlp import mlp as provided_mlp

CHECKS = {a.name: tuple(getattr(grading, c["check"]) for c in graded_cells(a.solution)) for a in load()}
SEEDS = (0, 20261130)  # the notebooks' visible and hidden seeds
ENTRIES = catalogue.entries()
LIKELY = re.compile(r"^Likely mistake: (.*)$", re.M)


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def namespace(notebook):
    """What the notebook's locked set-up cell defines."""
    if notebook == capstone.NB:  # the capstone's set-up cell, run as the notebook runs it
        ns: dict = {"math": math}
        exec(compile(capstone.setup_source(), "<setup>", "exec"), ns)
        return ns
    ns = {"torch": torch, "math": math, "grading": grading}
    if notebook == "04_mlp":
        ns["gelu"] = provided_gelu
    if notebook == "01_block":
        ns.update(layer_norm=provided_layer_norm, causal_self_attention=causal_self_attention, mlp=provided_mlp)
    return ns


def _run(ns, source, filename):
    # as IPython does for a cell, so that the learner's own lines can be shown
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), ns)


def answer(entry):
    """The function the entry's source defines (the capstone's: with the instructor's
    solution in its other two answer cells, run first)."""
    ns = namespace(entry.notebook)
    if entry.cell is not None:
        for fn in capstone.FUNCTIONS:
            if fn != entry.cell:
                _run(ns, capstone.solution(fn), f"<solution {fn}>")
    _run(ns, entry.source, f"<{entry.name}>")
    return ns[entry.cell or catalogue.FUNCTION[entry.notebook]]


def grade(entry) -> dict[str, str]:
    """{grade id: message} of the cells the answer loses (with either seed): the cells that
    check the function its source defines (the others check the instructor's solution)."""
    fn = answer(entry)
    name = entry.cell or catalogue.FUNCTION[entry.notebook]
    cells = [(c, check) for c, check in zip(catalogue.CELLS[entry.notebook], CHECKS[entry.notebook])
             if catalogue.CHECKED[entry.notebook][c] == name]
    failed = failed_checks([check for _c, check in cells], fn, SEEDS)
    return {cells[i][0]: m for i, m in failed.items()}


def _grade_share(share: int, shares: int) -> dict[str, dict[str, str]]:
    """The results of every ``shares``-th entry from ``share`` on, in a process of its own
    (one thread: the tensors are small; English messages; a 5 s call limit)."""
    os.environ.pop("ANDREA_LANG", None)
    torch.set_num_threads(1)
    core.CALL_TIME_LIMIT = 5.0
    importlib.import_module("torch._dynamo")  # as the grader's zygotes do: the first optimizer imports it
    return {e.name: grade(e) for e in ENTRIES[share::shares]}


@pytest.fixture(scope="module")
def results():
    """Every entry graded once, the entries shared out among one fresh process per core
    (spawned: a fork of this process could inherit a busy thread pool)."""
    shares = max(1, min(4, os.cpu_count() or 1))
    with ProcessPoolExecutor(shares, mp_context=multiprocessing.get_context("spawn")) as pool:
        parts = list(pool.map(_grade_share, range(shares), [shares] * shares))
    out = {name: lost for part in parts for name, lost in part.items()}
    assert set(out) == {e.name for e in ENTRIES}
    return out


def judgement(entry, lost) -> tuple[str, list[str]]:
    """("named" | "neutral" | "wrong" | "correct", reasons): what the feedback says."""
    wrong = []
    for cell, message in lost.items():
        allowed = entry.allowed(cell)
        for line in LIKELY.findall(message):
            if allowed is None or allowed not in line:
                wrong.append(f"{cell}: {line}")
    if wrong:
        return "wrong", wrong
    if entry.correct:
        return "correct", []
    cells = [entry.primary_cell] if not isinstance(entry.likely, dict) else list(entry.likely)
    if entry.likely is not None and all(entry.phrase(c) in lost.get(c, "") for c in cells):
        return "named", []
    return "neutral", []


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.name)
def test_each_answer_loses_exactly_what_it_breaks(results, entry):
    lost = results[entry.name]
    assert set(lost) == entry.lost_cells, {c: m.splitlines()[:3] for c, m in lost.items()}
    verdict, reasons = judgement(entry, lost)
    assert verdict != "wrong", reasons
    if entry.likely is not None:
        assert verdict == "named", (entry.likely, {c: m for c, m in lost.items()})


def test_the_catalogue_is_diagnosed_as_promised(results, capsys):
    mistakes = [e for e in ENTRIES if not e.correct]
    correct = [e for e in ENTRIES if e.correct]
    verdicts = {e.name: judgement(e, results[e.name])[0] for e in ENTRIES}
    named = sum(verdicts[e.name] == "named" for e in mistakes)
    neutral = sum(verdicts[e.name] == "neutral" for e in mistakes)
    wrong = sum(verdicts[e.name] == "wrong" for e in ENTRIES)
    exact = sum(set(results[e.name]) == e.lost_cells for e in mistakes)
    full = sum(not results[e.name] for e in correct)
    with capsys.disabled():
        print(f"\ncatalogue: {len(mistakes)} mistakes: {exact} lose exactly the cells they break; "
              f"{named} named correctly ({100 * named / len(mistakes):.1f}%), {neutral} neutral, {wrong} wrong; "
              f"{len(correct)} correct variants: {full} with full points")
    assert len(mistakes) >= 60 and len(correct) >= 40
    assert wrong == 0
    assert named >= 0.9 * len(mistakes)
    assert exact == len(mistakes) and full == len(correct)
    for notebook in catalogue.CELLS:
        assert sum(e.notebook == notebook for e in mistakes) >= 12, notebook
        assert sum(e.notebook == notebook for e in correct) >= 10, notebook
