"""GELU answers: ``gelu(x)``, the tanh approximation."""
from __future__ import annotations

from . import ALL, Entry

NB = "03_gelu"
SHAPE, VALUES, EXTREMES = "gelu_shape", "gelu_values", "gelu_extremes"


def gelu(body: str, head: str = "") -> str:
    return head + "def gelu(x):\n" + body


def tanh_form(c="math.sqrt(2 / math.pi)", k="0.044715", half="0.5", cube="x**3") -> str:
    return f"    return {half} * x * (1 + torch.tanh({c} * (x + {k} * {cube})))\n"


def mistake(name, source, lost, likely, **kw):
    return Entry(NB, name, source, frozenset(lost) if lost != ALL else ALL, likely, **kw)


MISTAKES = [
    mistake("gelu_erf", gelu("    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))\n"), {VALUES}, "exact erf form"),
    mistake("gelu_ndtr", gelu("    return x * torch.special.ndtr(x)\n"), {VALUES}, "exact erf form"),
    mistake("gelu_sigmoid_approx", gelu("    return x * torch.sigmoid(1.702 * x)\n"), {VALUES},
            "sigmoid approximation"),
    mistake("gelu_silu", gelu("    return x * torch.sigmoid(x)\n"), {VALUES}, "SiLU"),
    mistake("gelu_relu", gelu("    return torch.relu(x)\n"), {VALUES}, "ReLU"),
    mistake("gelu_identity", gelu("    return x.clone()\n"), {VALUES, EXTREMES}, {VALUES: "the input itself"},
            note="x is also wrong for very negative x, where GELU is 0"),
    mistake("gelu_sqrt_2pi", gelu(tanh_form(c="math.sqrt(2 * math.pi)")), {VALUES}, "written as sqrt(2*pi)"),
    mistake("gelu_sqrt_pi_2", gelu(tanh_form(c="math.sqrt(math.pi / 2)")), {VALUES}, "written as sqrt(2*pi)"),
    mistake("gelu_no_root", gelu(tanh_form(c="(2 / math.pi)")), {VALUES}, "the square root is missing"),
    mistake("gelu_square_term", gelu(tanh_form(cube="x**2")), {VALUES, EXTREMES}, {VALUES: "x^2 instead of x^3"},
            note="x + 0.044715 x^2 is positive again for very negative x: GELU(-1e4) comes out as -1e4"),
    mistake("gelu_no_cubic", gelu("    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * x))\n"), {VALUES},
            "cubic term 0.044715 x^3 is missing"),
    mistake("gelu_constant_on_x_only", gelu(
        "    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * x + 0.044715 * x**3))\n"), {VALUES},
        "multiplies only x"),
    mistake("gelu_typo_constant", gelu(tanh_form(c="0.7978")), {VALUES}, "0.7978846 is written as 0.7978"),
    mistake("gelu_typo_coefficient", gelu(tanh_form(k="0.04715")), {VALUES}, "0.044715 is written as 0.04715"),
    mistake("gelu_typo_both", gelu(tanh_form(c="0.7879", k="0.047715")), {VALUES},
            "0.7978846 is written as 0.7879; 0.044715 is written as 0.047715"),
    mistake("gelu_no_half", gelu(tanh_form(half="1.0")), {VALUES, EXTREMES},
            {VALUES: "the factor 0.5 is missing", EXTREMES: "the factor 0.5 is missing"},
            note="2 x for large x is wrong there too"),
    mistake("gelu_no_x", gelu("    return 0.5 * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))\n"),
            {VALUES, EXTREMES}, {VALUES: "the factor x is missing", EXTREMES: "the factor x is missing"}),
    mistake("gelu_minus_tanh", gelu(
        "    return 0.5 * x * (1 - torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))\n"),
        {VALUES, EXTREMES}, {VALUES: "the sign is flipped"}),
    mistake("gelu_exp_tanh", gelu(
        "    z = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)\n"
        "    t = (torch.exp(z) - torch.exp(-z)) / (torch.exp(z) + torch.exp(-z))\n"
        "    return 0.5 * x * (1 + t)\n"), {EXTREMES}, "overflows to inf",
        note="right in [-6, 6], where the values are judged: the overflow is the huge inputs' property"),
    mistake("gelu_clamped_input", gelu(
        "    x = torch.clamp(x, -20.0, 20.0)  # keep exp-free tanh stable\n" + tanh_form()), {EXTREMES},
        "stops growing at 20"),
    mistake("gelu_float64_result", gelu("    x = x.double()\n" + tanh_form()), {SHAPE},
            "returned dtype torch.float64 for torch.float32 input"),
    mistake("gelu_float16_upcast", gelu("    if x.dtype == torch.float16:\n        x = x.float()\n" + tanh_form()),
            {SHAPE}, "returned dtype torch.float32 for torch.float16 input"),
    mistake("gelu_tensor_constant", gelu(
        "    c = torch.tensor([math.sqrt(2 / math.pi)])\n" + tanh_form(c="c")), {SHAPE},
        "returned dtype torch.float32 for torch.float16 input"),
    mistake("gelu_in_place", gelu(
        "    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)\n"
        "    return x.mul_(0.5).mul_(1 + torch.tanh(inner))\n"), {SHAPE}, "changed its argument `x` in place"),
    mistake("gelu_in_place_clamp", gelu("    x.clamp_(min=-20.0)  # GELU is 0 below -20 anyway\n" + tanh_form()),
            {SHAPE}, "changed its argument `x` in place",
            note="the values stay right; only the huge negative inputs of the extremes check change"),
    mistake("gelu_reused_buffer", gelu(
        "    key = (x.shape, x.dtype, x.device)\n"
        "    if key not in _out:\n"
        "        _out[key] = torch.empty_like(x)\n"
        "    return torch.mul(0.5 * x, 1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)), out=_out[key])\n",
        head="_out = {}\n\n"), {SHAPE}, "a second time changed the tensor"),
]


def right(name, body, head="", **kw):
    return Entry(NB, name, gelu(body, head), **kw)


CORRECT = [
    right("gelu_ok_solution", tanh_form()),
    right("gelu_ok_cube", "    c = 0.7978845608028654\n"
          "    return x * 0.5 * (1.0 + torch.tanh(c * x + c * 0.044715 * (x * x * x)))\n"),
    right("gelu_ok_in_place_temporaries", "    t = torch.pow(x, 3)\n"
          "    t.mul_(0.044715).add_(x).mul_(math.sqrt(2 / math.pi))\n"
          "    t.tanh_().add_(1.0).mul_(x).mul_(0.5)\n"
          "    return t\n"),
    right("gelu_ok_sigmoid_identity", "    return x * torch.sigmoid(2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))\n",
          note="0.5 (1 + tanh(z)) = sigmoid(2 z) exactly"),
    right("gelu_ok_exp_stable", "    z = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)\n"
          "    t = 1 - 2 / (torch.exp(2 * z) + 1)\n"
          "    return 0.5 * x * (1 + t)\n", note="tanh from exp, written so that exp(inf) gives 1, not nan"),
    right("gelu_ok_clamped_argument", "    z = torch.clamp(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3), -15.0, 15.0)\n"
          "    return 0.5 * x * (1 + torch.tanh(z))\n"),
    right("gelu_ok_float64_inside", "    y = x.double()\n"
          "    out = 0.5 * y * (1 + torch.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3)))\n"
          "    return out.to(x.dtype)\n"),
    right("gelu_ok_rounded_constant", tanh_form(c="0.797885")),
    right("gelu_ok_pow", "    inner = SQRT_2_PI * (x + COEFF * torch.pow(x, 3))\n"
          "    return torch.mul(0.5 * x, torch.add(torch.tanh(inner), 1.0))\n",
          head="SQRT_2_PI = math.sqrt(2.0 / math.pi)\nCOEFF = 0.044715\n\n"),
    right("gelu_ok_halved_sum", "    return (x + x * torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))) / 2\n"),
    right("gelu_ok_expit", "    return x - x * torch.special.expit(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))\n"),
    right("gelu_ok_float32_inside", "    y = x.float()\n"
          "    return (0.5 * y * (1 + torch.tanh(0.7978845608 * (y + 0.044715 * y * y * y)))).to(x.dtype)\n",
          note="float32 arithmetic for float64 input stays within the stated 1e-5"),
]
