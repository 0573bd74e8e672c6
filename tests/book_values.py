"""The values the built book glued into its prose, read back from the execution folder of
`make book`, and the comparison the book's tests make them with (test_book_glue.py,
test_train_book.py)."""
from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXEC_DIR = ROOT / "_build" / "jupyter_execute" / "book"


def glued(chapter: str) -> dict:
    path = EXEC_DIR / f"{chapter}.glue.json"
    if not path.is_file():
        pytest.fail(f"{path.relative_to(ROOT)} is missing: build the book first (make book)")
    values = {}
    for name, output in json.loads(path.read_text()).items():
        text = output["data"]["text/plain"]
        try:
            values[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            values[name] = text
    return values


def close(a, b) -> bool:
    if isinstance(b, bool) or isinstance(a, (str, bool)) or isinstance(b, str):
        return a == b
    if isinstance(b, int) and isinstance(a, int):
        return a == b
    return math.isclose(float(a), float(b), rel_tol=1e-5, abs_tol=1e-9)


def shared_norm_block(x, p, n_head):
    """The block of exercise 8.1: ln_1's parameters in both LayerNorms."""
    from andrea_ref.attention import causal_self_attention
    from andrea_ref.layernorm import layer_norm
    from andrea_ref.mlp import mlp
    names = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")
    h = x + causal_self_attention(layer_norm(x, p["ln_1.gamma"], p["ln_1.beta"]),
                                  *(p[f"attn.{n}"] for n in names), n_head)
    return h + mlp(layer_norm(h, p["ln_1.gamma"], p["ln_1.beta"]), p["mlp.w1"], p["mlp.b1"], p["mlp.w2"], p["mlp.b2"])
