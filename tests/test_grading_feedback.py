"""A failed check reads the same in the notebook and on the feedback page.

``grading.failure_lines`` is the one rendering: ``GradingError: <message>``, for an
answer that raised the learner's own line (``In your code: ...``), the rest of the
message, and ``✗ not met: <property>``. The notebook shows it (``_render_traceback_``),
and the feedback page of the independent check shows it for the same answer, checked
in a sandboxed answer server, with the same error name."""
from __future__ import annotations

import contextlib
import copy
import io
import json
import linecache
from pathlib import Path

import nbformat
import pytest
import torch
from nbclient import NotebookClient

from andrea_ref import grading
from classroom.scoring import plan as scoring_plan, verdicts

ROOT = Path(__file__).resolve().parent.parent
CRASH = "def gelu(x):\n    y = 2 * x\n    return y @ torch.ones(3, 5)\n"


def _crashing_gelu():
    filename = "<crash-cell>"
    linecache.cache[filename] = (len(CRASH), None, CRASH.splitlines(True), filename)
    ns = {"torch": torch}
    exec(compile(CRASH, filename, "exec"), ns)
    return ns["gelu"]


def test_a_crash_renders_message_code_line_and_property():
    with pytest.raises(grading.GradingError) as info:
        with contextlib.redirect_stdout(io.StringIO()):
            grading.check_gelu_shape(_crashing_gelu())
    lines = grading.failure_lines(info.value)
    assert lines == info.value._render_traceback_()
    assert lines[0].startswith("GradingError: `gelu` raised RuntimeError: mat1 and mat2")
    assert lines[1] == "In your code:"
    assert lines[2] == "  gelu, line 3 of its cell: return y @ torch.ones(3, 5)"
    assert lines[-1] == "\u2717 not met: gelu returns a new tensor of x's shape, dtype and device and leaves x alone."
    assert type(info.value).__name__ == grading.ERROR_NAME


def test_a_failed_value_check_renders_without_code_lines():
    with pytest.raises(grading.GradingError) as info:
        with contextlib.redirect_stdout(io.StringIO()):
            grading.check_gelu_values(torch.relu)
    lines = grading.failure_lines(info.value)
    assert lines[0].startswith("GradingError: `gelu` does not match") and "In your code:" not in lines
    assert lines[-2] == "Likely mistake: ReLU (max(x, 0)) instead of GELU."
    assert lines[-1].startswith("\u2717 not met: gelu is the tanh approximation")


def test_learner_lines_from_another_process_are_shown_as_plain_text():
    error = RuntimeError("boom")
    error.learner_where = ["  gelu, line 3 of its cell: \x1b[31mreturn\x1b[0m y", 7, "x" * 1000]
    shown = grading.messages.learner_lines(error)
    assert shown[0] == "  gelu, line 3 of its cell: [31mreturn[0m y"
    assert len(shown) == 2 and len(shown[1]) == 300


# ----------------------------------------------------------------------------- end to end
def _nbs():
    return (json.loads((ROOT / "solutions" / "03_gelu" / "gelu.ipynb").read_text()),
            json.loads((ROOT / "exercises" / "03_gelu" / "gelu.ipynb").read_text()))


@pytest.mark.slow
def test_the_feedback_page_shows_what_the_notebook_shows_for_a_crash(host, tmp_path):
    sol, rel = _nbs()
    nb = copy.deepcopy(rel)
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "gelu":
            cell["source"] = CRASH
    # the notebook, run in a real kernel as nbgrader would
    run = nbformat.reads(json.dumps(nb), as_version=4)
    NotebookClient(run, kernel_name="python3", allow_errors=True, timeout=300,
                   resources={"metadata": {"path": str(tmp_path)}},
                   extra_arguments=["--HistoryManager.hist_file=:memory:"]).execute()
    kernel = {}
    for cell in run.cells:
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        if gid and errors:
            kernel[gid] = errors[0]
    # the independent check, and what its feedback page shows
    plan = scoring_plan.build_plan(sol, rel, where="03_gelu")
    verdict = verdicts.check_notebook(plan, nb, host, cell_timeout=60)
    assert {g for g, c in verdict.cells.items() if not c.passed} == set(kernel) == {
        "gelu_shape", "gelu_values", "gelu_extremes"}
    for gid, cv in verdict.cells.items():
        (shown,) = [o for o in verdicts.verdict_outputs(cv) if o["output_type"] == "error"]
        assert shown["ename"] == kernel[gid]["ename"] == "GradingError"
        assert shown["traceback"] == list(kernel[gid]["traceback"]), gid
        assert "In your code:" in shown["traceback"]
        assert "  gelu, line 3 of its cell: return y @ torch.ones(3, 5)" in shown["traceback"]
        assert shown["traceback"][-1].startswith("\u2717 not met: ")
