"""The block notebook's diff-trace cell, run as the released notebook runs it: it names
where a wrongly wired block first parts from the reference, and says a right one agrees."""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from andrea_ref.grading.manifest import load
from grading_submissions import CASES
from honest import BLOCK as RIGHT  # a correct block

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
BLOCK = next(a for a in load() if a.name == "01_block")

# the wrong blocks of the graded catalogue, each with the step where it first parts from the reference
WRONG = {c.student: c.source for c in CASES if c.assignment == BLOCK.name}
FIRST_WRONG_STEP = {"block_shared_norm": "ln_2.out",  # ln_2 given ln_1's gain and shift
                    "block_post_norm": "ln_1.in",  # the first LayerNorm reads x + attention(x)
                    "block_no_residual": "ln_2.in"}  # attention right, its residual missing


def _released_cells() -> list[str]:
    nb = json.loads((ROOT / "exercises" / BLOCK.name / BLOCK.filename).read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def _trace_output(answer: str) -> str:
    cells = _released_cells()
    trace = [c for c in cells if "diff_trace(" in c]
    assert len(trace) == 1, "the released block notebook has one diff-trace cell"
    namespace: dict = {}
    exec(cells[0], namespace)  # the locked set-up cell
    exec(answer, namespace)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        # the cells between the answer and the trace (the self-check), then the trace itself
        for cell in cells[2:cells.index(trace[0]) + 1]:
            exec(cell, namespace)
    return out.getvalue()


def test_a_right_block_agrees_at_every_step():
    text = _trace_output(RIGHT)
    assert "Every compared step agrees with the reference" in text
    assert "block.out" in text.splitlines()[-1]


@pytest.mark.parametrize("student", sorted(FIRST_WRONG_STEP))
def test_a_wrong_block_is_traced_to_its_first_wrong_step(student):
    text = _trace_output(WRONG[student])
    assert f'First difference: step "{FIRST_WRONG_STEP[student]}"' in text, text
