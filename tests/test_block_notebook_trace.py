"""The block notebook's diff-trace cell, run as the released notebook runs it: it names
where a wrongly wired block first parts from the reference, and says a right one agrees."""
from __future__ import annotations

import contextlib
import io
import json
import textwrap
from pathlib import Path

import pytest

from andrea_ref.grading.manifest import load

pytestmark = pytest.mark.fast

ROOT = Path(__file__).resolve().parents[1]
BLOCK = next(a for a in load() if a.name == "04_block")

RIGHT = textwrap.dedent("""\
    def block(x, params, n_head):
        p = params
        attn = [p[f"attn.{n}"] for n in ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")]
        h = x + causal_self_attention(layer_norm(x, p["ln_1.gamma"], p["ln_1.beta"]), *attn, n_head)
        return h + mlp(layer_norm(h, p["ln_2.gamma"], p["ln_2.beta"]), p["mlp.w1"], p["mlp.b1"],
                       p["mlp.w2"], p["mlp.b2"])
    """)
# the second LayerNorm given the first one's gain and shift: right up to ln_2's output
LN_1_TWICE = RIGHT.replace('p["ln_2.gamma"], p["ln_2.beta"]', 'p["ln_1.gamma"], p["ln_1.beta"]')
# post-norm wiring: the first LayerNorm reads x + attention(x)
POST_NORM = textwrap.dedent("""\
    def block(x, params, n_head):
        p = params
        attn = [p[f"attn.{n}"] for n in ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")]
        h = layer_norm(x + causal_self_attention(x, *attn, n_head), p["ln_1.gamma"], p["ln_1.beta"])
        return layer_norm(h + mlp(h, p["mlp.w1"], p["mlp.b1"], p["mlp.w2"], p["mlp.b2"]),
                          p["ln_2.gamma"], p["ln_2.beta"])
    """)


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


@pytest.mark.parametrize("answer, step", [(LN_1_TWICE, "ln_2.out"), (POST_NORM, "ln_1.in")])
def test_a_wrong_block_is_traced_to_its_first_wrong_step(answer, step):
    text = _trace_output(answer)
    assert f'First difference: step "{step}"' in text, text
