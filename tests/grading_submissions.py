"""The submissions that prove the graders right: one table per notebook.

Every row is a learner's answer -- the source that replaces the solution cell of the
released notebook -- with the graded cells it must lose and a phrase its feedback
must show. ``make_submission`` builds the notebook a learner would hand in; the
damaged ones (deleted or edited test cell, invalid JSON, endless loops, a dying
kernel) are built by ``DAMAGE``.

Used by test_grading_pipeline.py (real nbgrader) and test_grading_checks.py (the
checks called directly on the same sources).
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

from andrea_ref.grading.manifest import load

ROOT = Path(__file__).resolve().parent.parent

# assignment: (notebook file, function name, solution cell id, {grade_id: points}), from
# the course manifest and the solution notebooks' nbgrader metadata
ASSIGNMENTS = {a.name: (a.filename, a.function()[0], a.answer_id(), a.points()) for a in load()}
# every answer cell of each notebook (the capstone has three)
ANSWER_CELLS = {a.name: a.answer_ids() for a in load()}
ALL = "all"  # every graded cell of the notebook is lost


@dataclass
class Case:
    assignment: str
    student: str
    source: str | None  # None: the instructor's solution; "" : the untouched exercise
    lost: set | str = field(default_factory=set)
    feedback: str | None = None  # a phrase the feedback HTML must contain
    damage: str | None = None  # key of DAMAGE
    cell: str | None = None  # the answer cell ``source`` replaces (default: the first); the others hold the solution

    def lost_cells(self) -> set:
        cells = ASSIGNMENTS[self.assignment][3]
        return set(cells) if self.lost == ALL else set(self.lost)

    def expected_score(self) -> float:
        cells = ASSIGNMENTS[self.assignment][3]
        return float(sum(p for g, p in cells.items() if g not in self.lost_cells()))


# --------------------------------------------------------------------------- LayerNorm
def _ln(body: str, head: str = "") -> str:
    return head + "def layer_norm(x, gamma, beta, eps=1e-5):\n" + body


LN = "02_layernorm"
LAYERNORM = [
    Case(LN, "ln_solution", None),
    Case(LN, "ln_untouched", "", ALL, "not written yet"),
    Case(LN, "ln_unbiased", _ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    var = x.var(dim=-1, keepdim=True)\n"
        "    return gamma * (x - mean) / torch.sqrt(var + eps) + beta\n"),
        {"ln_normalise"}, "unbiased"),
    Case(LN, "ln_eps_outside", _ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    std = ((x - mean) ** 2).mean(dim=-1, keepdim=True).sqrt()\n"
        "    return gamma * (x - mean) / (std + eps) + beta\n"),
        {"ln_eps"}, "outside the square root"),
    Case(LN, "ln_wrong_axis", _ln(
        "    mean = x.mean(dim=0, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=0, keepdim=True)\n"
        "    return gamma * (x - mean) / torch.sqrt(var + eps) + beta\n"),
        {"ln_normalise"}, "taken over dimension 0"),
    Case(LN, "ln_no_gamma", _ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
        "    return (x - mean) / torch.sqrt(var + eps) + beta\n"),
        {"ln_affine"}, "gamma is never applied"),
    Case(LN, "ln_no_beta", _ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
        "    return gamma * (x - mean) / torch.sqrt(var + eps)\n"),
        {"ln_affine"}, "beta is never applied"),
    Case(LN, "ln_swapped", _ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
        "    return beta * (x - mean) / torch.sqrt(var + eps) + gamma\n"),
        {"ln_affine"}, "gamma and beta are swapped"),
    Case(LN, "ln_input_in_place", _ln(
        "    x -= x.mean(dim=-1, keepdim=True)\n"
        "    var = (x * x).mean(dim=-1, keepdim=True)\n"
        "    return gamma * x / torch.sqrt(var + eps) + beta\n"),
        {"ln_shape"}, "changed its argument"),
    # one slip, one property: eps written into the formula instead of the argument
    # costs only the eps cell, a dtype or a kept output buffer only the shape cell
    Case(LN, "ln_eps_hardcoded", _ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
        "    return gamma * (x - mean) / torch.sqrt(var + 1e-5) + beta\n"),
        {"ln_eps"}, "eps argument is ignored"),
    Case(LN, "ln_eps_hardcoded_small", _ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
        "    return gamma * (x - mean) / torch.sqrt(var + 1e-6) + beta\n"),
        {"ln_eps"}, "eps argument is ignored"),
    Case(LN, "ln_eps_hardcoded_large", _ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
        "    return gamma * (x - mean) / torch.sqrt(var + 1e-3) + beta\n"),
        {"ln_eps"}, "eps argument is ignored"),
    Case(LN, "ln_eps_default", (
        "def layer_norm(x, gamma, beta, eps=1e-6):\n"
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
        "    return gamma * (x - mean) / torch.sqrt(var + eps) + beta\n"),
        {"ln_eps"}, "default value of eps"),
    Case(LN, "ln_float64_result", _ln(
        "    x = x.double()\n"
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
        "    return gamma * (x - mean) / torch.sqrt(var + eps) + beta\n"),
        {"ln_shape"}, "returned dtype torch.float64 for torch.float32 input"),
    Case(LN, "ln_float32_result", _ln(
        "    x, gamma, beta = x.float(), gamma.float(), beta.float()\n"
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
        "    return gamma * (x - mean) / torch.sqrt(var + eps) + beta\n"),
        {"ln_shape"}, "returned dtype torch.float32 for torch.float64 input"),
    Case(LN, "ln_reused_buffer", _ln(
        "    key = (x.shape, x.dtype, x.device)\n"
        "    if key not in _out:\n"
        "        _out[key] = torch.empty_like(x)\n"
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
        "    return torch.add(gamma * (x - mean) / torch.sqrt(var + eps), beta, out=_out[key])\n",
        head="_out = {}\n\n"),
        {"ln_shape"}, "a second time changed the tensor"),
    # correct answers written differently: full marks
    Case(LN, "ln_alt_var", _ln(
        "    var, mean = torch.var_mean(x, dim=-1, keepdim=True, unbiased=False)\n"
        "    return torch.mul(x - mean, gamma) / (var + eps) ** 0.5 + beta\n")),
    Case(LN, "ln_alt_rsqrt_in_place", _ln(
        "    out = x - x.mean(dim=-1, keepdim=True)\n"
        "    var = torch.var(out, dim=-1, keepdim=True, correction=0)\n"
        "    out *= torch.rsqrt(var.add_(eps))\n"
        "    out.mul_(gamma).add_(beta)\n"
        "    return out\n")),
    # forbidden shortcuts: nothing
    Case(LN, "ln_library", _ln(
        "    return torch.nn.functional.layer_norm(x, x.shape[-1:], gamma, beta, eps)\n"),
        ALL, "not allowed"),
    Case(LN, "ln_library_alias", _ln(
        "    return _norm(x, (x.shape[-1],), weight=gamma, bias=beta, eps=eps)\n",
        head="from torch.nn.functional import layer_norm as _norm\n\n"),
        ALL, "aten.layer_norm"),
    Case(LN, "ln_reference_alias", _ln(
        "    return _helper(x, gamma, beta, eps)\n",
        head="import andrea_ref.layernorm\n_helper = andrea_ref.layernorm.layer_norm\n\n"),
        ALL, "own implementation"),
    # damaged: the graded cell ln_eps deleted -> restored and graded
    Case(LN, "ln_deleted_test_cell", None, set(), damage="delete_test_cell"),
]

# --------------------------------------------------------------------------- GELU
def _gelu(body: str, head: str = "") -> str:
    return head + "def gelu(x):\n" + body


GE = "03_gelu"
GELU = [
    Case(GE, "gelu_solution", None),
    Case(GE, "gelu_untouched", "", ALL, "not written yet"),
    Case(GE, "gelu_erf", _gelu(
        "    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))\n"),
        {"gelu_values"}, "exact erf form"),
    Case(GE, "gelu_sigmoid", _gelu(
        "    return x * torch.sigmoid(1.702 * x)\n"),
        {"gelu_values"}, "sigmoid approximation"),
    Case(GE, "gelu_wrong_constant", _gelu(
        "    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 * math.pi) * (x + 0.044715 * x**3)))\n"),
        {"gelu_values"}, "constant sqrt(2/pi)"),
    Case(GE, "gelu_relu", _gelu(
        "    return torch.relu(x)\n"),
        {"gelu_values"}, "ReLU"),
    Case(GE, "gelu_exp_tanh", _gelu(
        "    z = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)\n"
        "    t = (torch.exp(z) - torch.exp(-z)) / (torch.exp(z) + torch.exp(-z))\n"
        "    return 0.5 * x * (1 + t)\n"),
        {"gelu_extremes"}, "overflows"),
    # sqrt(2/pi) rounded to six digits is within the stated 1e-5: full marks
    Case(GE, "gelu_rounded_constant", _gelu(
        "    return 0.5 * x * (1 + torch.tanh(0.797885 * (x + 0.044715 * x**3)))\n")),
    # a dtype slip costs only the shape cell
    Case(GE, "gelu_float64_result", _gelu(
        "    x = x.double()\n"
        "    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))\n"),
        {"gelu_shape"}, "returned dtype torch.float64 for torch.float32 input"),
    Case(GE, "gelu_float16_upcast", _gelu(
        "    if x.dtype == torch.float16:\n"
        "        x = x.float()\n"
        "    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))\n"),
        {"gelu_shape"}, "returned dtype torch.float32 for torch.float16 input"),
    Case(GE, "gelu_alt_cube", _gelu(
        "    c = 0.7978845608028654\n"
        "    return x * 0.5 * (1.0 + torch.tanh(c * x + c * 0.044715 * (x * x * x)))\n")),
    Case(GE, "gelu_alt_in_place", _gelu(
        "    t = torch.pow(x, 3)\n"
        "    t.mul_(0.044715).add_(x).mul_(math.sqrt(2 / math.pi))\n"
        "    t.tanh_().add_(1.0).mul_(x).mul_(0.5)\n"
        "    return t\n")),
    Case(GE, "gelu_warns", _gelu(
        "    import sys, warnings\n"
        "    warnings.warn('a harmless warning inside a correct answer')\n"
        "    print('debug output on stderr', file=sys.stderr)\n"
        "    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))\n")),
    Case(GE, "gelu_library", _gelu(
        "    return torch.nn.functional.gelu(x, approximate='tanh')\n"),
        ALL, "aten.gelu"),
    Case(GE, "gelu_library_alias", _gelu(
        "    return _act(x)\n",
        head="import torch.nn as nn\n_act = nn.GELU(approximate='tanh')\n\n"),
        ALL, "aten.gelu"),
    Case(GE, "gelu_reference_alias", _gelu(
        "    return _ready_made(x)\n",
        head="from andrea_ref import gelu as _ready_made\n\n"),
        ALL, "own implementation"),
    Case(GE, "gelu_custom_eq", _gelu(
        "    class Anything:\n"
        "        def __eq__(self, other):\n"
        "            return True\n"
        "        def __getattr__(self, name):\n"
        "            return lambda *a, **k: self\n"
        "    return Anything()\n"),
        ALL, "must return a torch.Tensor"),
    Case(GE, "gelu_endless_loop", _gelu(
        "    while True:\n"
        "        x = x + 0\n"),
        ALL, "did not finish"),
    # damaged: a locked graded cell edited to pass -> restored and graded
    Case(GE, "gelu_edited_test_cell", None, set(), damage="edit_test_cell"),
]

# --------------------------------------------------------------------------- MLP
def _mlp(body: str, head: str = "") -> str:
    return head + "def mlp(x, w1, b1, w2, b2):\n" + body


ML = "04_mlp"
MLP = [
    Case(ML, "mlp_solution", None),
    Case(ML, "mlp_untouched", "", ALL, "not written yet"),
    Case(ML, "mlp_missing_bias", _mlp(
        "    return gelu(x @ w1) @ w2 + b2\n"),
        {"mlp_bias"}, "b1 is never added"),
    Case(ML, "mlp_relu", _mlp(
        "    return torch.relu(x @ w1 + b1) @ w2 + b2\n"),
        {"mlp_activation"}, "ReLU is used in place of GELU"),
    Case(ML, "mlp_gelu_after_second", _mlp(
        "    return gelu((x @ w1 + b1) @ w2 + b2)\n"),
        {"mlp_activation"}, "after the second linear layer"),
    Case(ML, "mlp_transposed", _mlp(
        "    return gelu(x @ w1.T + b1) @ w2.T + b2\n"),
        {"mlp_layout"}, "transposed weights"),
    Case(ML, "mlp_float64_result", _mlp(
        "    return gelu(x @ w1 + b1).double() @ w2.double() + b2.double()\n"),
        {"mlp_shape"}, "returned dtype torch.float64 for torch.float32 input"),
    Case(ML, "mlp_alt_einsum", _mlp(
        "    h = torch.einsum('btd,dh->bth', x, w1)\n"
        "    h += b1\n"
        "    y = torch.einsum('bth,hd->btd', gelu(h), w2)\n"
        "    y.add_(b2)\n"
        "    return y\n")),
    Case(ML, "mlp_alt_linear", _mlp(
        "    h = torch.nn.functional.linear(x, w1.T, b1)\n"
        "    return torch.addmm(b2, gelu(h).reshape(-1, w2.shape[0]), w2).reshape(x.shape)\n")),
    # computed in float32 and handed back in x's dtype: within the stated 1e-5
    Case(ML, "mlp_alt_float32_inside", _mlp(
        "    t = [a.float() for a in (x, w1, b1, w2, b2)]\n"
        "    return (gelu(t[0] @ t[1] + t[2]) @ t[3] + t[4]).to(x.dtype)\n")),
    Case(ML, "mlp_reference_alias", _mlp(
        "    return _whole(x, w1, b1, w2, b2)\n",
        head="from andrea_ref.mlp import mlp as _whole\n\n"),
        ALL, "own implementation"),
    Case(ML, "mlp_patched_allclose", _mlp(
        "    return x @ w1 @ w2\n",
        head="torch.allclose = lambda *args, **kwargs: True\n\n"),
        ALL, "has been replaced"),
    # damaged: not a notebook any more
    Case(ML, "mlp_invalid_json", None, ALL, damage="invalid_json"),
]

# --------------------------------------------------------------------------- block
_PIECES = (
    "def _ln(p, name, t):\n"
    "    return layer_norm(t, p[name + '.gamma'], p[name + '.beta'])\n\n"
    "def _attn(p, t, n_head):\n"
    "    names = ('w_q', 'b_q', 'w_k', 'b_k', 'w_v', 'b_v', 'w_o', 'b_o')\n"
    "    return causal_self_attention(t, *(p['attn.' + n] for n in names), n_head)\n\n"
    "def _mlp(p, t):\n"
    "    return mlp(t, p['mlp.w1'], p['mlp.b1'], p['mlp.w2'], p['mlp.b2'])\n\n"
)


def _block(body: str, head: str = "") -> str:
    return _PIECES + head + "def block(x, params, n_head):\n    p = params\n" + body


BL = "01_block"
BLOCK = [
    Case(BL, "block_solution", None),
    Case(BL, "block_untouched", "", ALL, "not written yet"),
    Case(BL, "block_post_norm", _block(
        "    h = _ln(p, 'ln_1', x + _attn(p, x, n_head))\n"
        "    return _ln(p, 'ln_2', h + _mlp(p, h))\n"),
        {"block_residual", "block_values"}, "post-norm block"),
    Case(BL, "block_no_residual", _block(
        "    h = _attn(p, _ln(p, 'ln_1', x), n_head)\n"
        "    return _mlp(p, _ln(p, 'ln_2', h))\n"),
        {"block_residual", "block_values"}, "residual connections are missing"),
    Case(BL, "block_shared_norm", _block(
        "    h = x + _attn(p, _ln(p, 'ln_1', x), n_head)\n"
        "    return h + _mlp(p, _ln(p, 'ln_1', h))\n"),
        {"block_norms", "block_values"}, "one LayerNorm (ln_1) is used for both sublayers"),
    Case(BL, "block_residual_after_norm", _block(
        "    x = _ln(p, 'ln_1', x)\n"
        "    x = x + _attn(p, x, n_head)\n"
        "    x = _ln(p, 'ln_2', x)\n"
        "    return x + _mlp(p, x)\n"),
        {"block_residual", "block_values"}, "residual is added after the norm"),
    Case(BL, "block_mlp_first", _block(
        "    h = x + _mlp(p, _ln(p, 'ln_2', x))\n"
        "    return h + _attn(p, _ln(p, 'ln_1', h), n_head)\n"),
        {"block_values"}, "the MLP sublayer comes before attention"),
    Case(BL, "block_mlp_first_norms_swapped", _block(
        "    h = x + _mlp(p, _ln(p, 'ln_1', x))\n"
        "    return h + _attn(p, _ln(p, 'ln_2', h), n_head)\n"),
        {"block_values"}, "the MLP sublayer comes before attention"),
    Case(BL, "block_float64_result", _block(
        "    x = x.double()\n"
        "    p = {k: v.double() for k, v in p.items()}\n"
        "    h = x + _attn(p, _ln(p, 'ln_1', x), n_head)\n"
        "    return h + _mlp(p, _ln(p, 'ln_2', h))\n"),
        {"block_shape"}, "returned dtype torch.float64 for torch.float32 input"),
    Case(BL, "block_alt_in_place", _block(
        "    h = _attn(p, _ln(p, 'ln_1', x), n_head)\n"
        "    h += x\n"
        "    out = _mlp(p, _ln(p, 'ln_2', h))\n"
        "    out.add_(h)\n"
        "    return out\n")),
    Case(BL, "block_reference_alias", _block(
        "    cfg = ModelConfig(n_head=n_head, d_model=x.shape[-1], mlp_dim=p['mlp.w1'].shape[1])\n"
        "    return _done(x, p, cfg)\n",
        head="from andrea_ref import ModelConfig\nfrom andrea_ref.block import block as _done\n\n"),
        ALL, "own implementation"),
    # damaged
    Case(BL, "block_loop_at_top", None, ALL, damage="loop_at_top"),
    Case(BL, "block_kernel_dies", None, ALL, damage="kernel_dies"),
]

CASES = LAYERNORM + GELU + MLP + BLOCK


def _capstone_cases() -> list[Case]:
    """The capstone's answers (tests/catalogue/capstone.py) as cases: the solution, the
    untouched notebook and every classic mistake, each replacing one of its three cells."""
    from catalogue import capstone as K
    cases = [Case(K.NB, "capstone_solution", None), Case(K.NB, "capstone_untouched", "", ALL)]
    cases += [Case(K.NB, f"capstone_{e.name}", e.source, set(e.lost_cells),
                   e.likely if isinstance(e.likely, str) else None, cell=e.cell) for e in K.MISTAKES]
    return cases


# not in CASES: the tests that call one function per notebook read CASES; the capstone's
# answers live in the catalogue (tests/catalogue/capstone.py), and the class benchmark reads both
CAPSTONE = _capstone_cases()


# --------------------------------------------------------------------------- building
def solution_source(solution_nb: dict, cell_id: str) -> str:
    """The instructor's solution with the BEGIN/END SOLUTION marker lines removed."""
    for cell in solution_nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == cell_id:
            lines = "".join(cell["source"]).splitlines(keepends=True)
            return "".join(l for l in lines if "### BEGIN SOLUTION" not in l and "### END SOLUTION" not in l)
    raise KeyError(cell_id)


def _cell(nb: dict, grade_id: str) -> dict:
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            return cell
    raise KeyError(grade_id)


def _delete_test_cell(nb, case):
    first = list(ASSIGNMENTS[case.assignment][3])[0]
    nb["cells"].remove(_cell(nb, first))
    return nb


def _edit_test_cell(nb, case):
    for grade_id in ASSIGNMENTS[case.assignment][3]:
        _cell(nb, grade_id)["source"] = "pass  # no checks here\n"
    return nb


def _loop_at_top(nb, case):
    cell = _cell(nb, ASSIGNMENTS[case.assignment][2])
    cell["source"] = "while True:\n    pass\n"
    return nb


def _kernel_dies(nb, case):
    cell = _cell(nb, ASSIGNMENTS[case.assignment][2])
    cell["source"] = "import os\nos._exit(1)\n"
    return nb


DAMAGE = {
    "delete_test_cell": _delete_test_cell,
    "edit_test_cell": _edit_test_cell,
    "loop_at_top": _loop_at_top,
    "kernel_dies": _kernel_dies,
    "invalid_json": None,  # handled in make_submission: the file is cut in half
}


def make_submission(case: Case, released_nb: dict, solution_nb: dict) -> str:
    """The text of the notebook ``case.student`` hands in."""
    nb = copy.deepcopy(released_nb)
    target = case.cell or ASSIGNMENTS[case.assignment][2]
    if case.source != "":  # "" hands in the exercise untouched
        for cell_id in ANSWER_CELLS[case.assignment]:
            given = case.source if case.source is not None and cell_id == target else None
            _cell(nb, cell_id)["source"] = solution_source(solution_nb, cell_id) if given is None else given
    if case.damage and DAMAGE[case.damage] is not None:
        nb = DAMAGE[case.damage](nb, case)
    text = json.dumps(nb, indent=1)
    if case.damage == "invalid_json":
        text = text[: len(text) // 2]
    return text


def write_class(dest: Path, students: list[str]) -> list[tuple[str, str]]:
    """The notebooks of the CASES named ``students``, handed in as ``dest/<student>/<assignment>/<notebook>``;
    returns their (student, assignment) pairs."""
    by_name = {c.student: c for c in CASES}
    keys = []
    for name in students:
        case = by_name[name]
        nb_file = ASSIGNMENTS[case.assignment][0]
        released = json.loads((ROOT / "exercises" / case.assignment / nb_file).read_text())
        solution = json.loads((ROOT / "solutions" / case.assignment / nb_file).read_text())
        path = dest / name / case.assignment / nb_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make_submission(case, released, solution))
        keys.append((name, case.assignment))
    return keys
