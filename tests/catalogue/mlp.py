"""MLP answers: ``mlp(x, w1, b1, w2, b2) = gelu(x @ w1 + b1) @ w2 + b2`` (gelu provided)."""
from __future__ import annotations

from . import ALL, Entry

NB = "04_mlp"
SHAPE, LAYOUT, ACT, BIAS = "mlp_shape", "mlp_layout", "mlp_activation", "mlp_bias"


def mlp(body: str, head: str = "") -> str:
    return head + "def mlp(x, w1, b1, w2, b2):\n" + body


def ret(expr: str) -> str:
    return mlp(f"    return {expr}\n")


def mistake(name, source, lost, likely, **kw):
    return Entry(NB, name, source, frozenset(lost) if lost != ALL else ALL, likely, **kw)


MISTAKES = [
    # -- the activation: one property, whatever else
    mistake("mlp_tanh", ret("torch.tanh(x @ w1 + b1) @ w2 + b2"), {ACT}, "tanh is used in place of GELU"),
    mistake("mlp_relu", ret("torch.relu(x @ w1 + b1) @ w2 + b2"), {ACT}, "ReLU is used in place of GELU"),
    mistake("mlp_sigmoid", ret("torch.sigmoid(x @ w1 + b1) @ w2 + b2"), {ACT}, "the sigmoid is used"),
    mistake("mlp_silu", ret("torch.nn.functional.silu(x @ w1 + b1) @ w2 + b2"), {ACT}, "SiLU"),
    mistake("mlp_erf_gelu", ret("torch.nn.functional.gelu(x @ w1 + b1) @ w2 + b2"), {ACT}, "exact erf GELU"),
    mistake("mlp_sigmoid_gelu", mlp("    h = x @ w1 + b1\n    return (h * torch.sigmoid(1.702 * h)) @ w2 + b2\n"),
            {ACT}, "sigmoid approximation of GELU"),
    mistake("mlp_no_activation", ret("(x @ w1 + b1) @ w2 + b2"), {ACT}, "no activation"),
    mistake("mlp_gelu_after_second", ret("gelu((x @ w1 + b1) @ w2 + b2)"), {ACT}, "after the second linear layer"),
    mistake("mlp_gelu_after_both", ret("gelu(gelu(x @ w1 + b1) @ w2 + b2)"), {ACT}, "after both linear layers"),
    mistake("mlp_gelu_twice", ret("gelu(gelu(x @ w1 + b1)) @ w2 + b2"), {ACT}, "applied twice"),
    mistake("mlp_gelu_on_input", ret("(gelu(x) @ w1 + b1) @ w2 + b2"), {ACT, BIAS},
            {ACT: "applied to x before the first layer"},
            note="the first layer reads gelu(x), not x, so b1 no longer shifts x @ w1 either"),
    # -- the biases
    mistake("mlp_no_b1", ret("gelu(x @ w1) @ w2 + b2"), {BIAS}, "b1 is never added"),
    mistake("mlp_no_b2", ret("gelu(x @ w1 + b1) @ w2"), {BIAS}, "b2 is never added"),
    mistake("mlp_no_biases", ret("gelu(x @ w1) @ w2"), {BIAS}, "neither bias is added"),
    mistake("mlp_b1_after_gelu", ret("(gelu(x @ w1) + b1) @ w2 + b2"), {BIAS}, "b1 is added after GELU"),
    mistake("mlp_b2_before_matmul", ret("(gelu(x @ w1 + b1) + b2) @ w2"), {BIAS}, "b2 is added before the second matmul"),
    mistake("mlp_swapped_biases", ret("gelu(x @ w1 + b2) @ w2 + b1"), {BIAS}, "b1 and b2 are swapped"),
    mistake("mlp_b2_twice", mlp("    y = gelu(x @ w1 + b1) @ w2 + b2\n    return y + b2\n"), {BIAS}, "b2 is added twice"),
    mistake("mlp_b1_twice", ret("gelu(x @ w1 + b1 + b1) @ w2 + b2"), {BIAS}, "b1 is added twice"),
    # -- the layout
    mistake("mlp_transposed", ret("gelu(x @ w1.T + b1) @ w2.T + b2"), {LAYOUT}, "transposed weights"),
    mistake("mlp_linear_habit", ret("torch.nn.functional.linear(gelu(torch.nn.functional.linear(x, w1, b1)), w2, b2)"),
            {LAYOUT}, "transposed weights", note="nn.Linear's [out, in] habit: x @ w.T"),
    mistake("mlp_w1_transposed", ret("gelu(x @ w1.T + b1) @ w2 + b2"), {LAYOUT}, "w1 is transposed"),
    mistake("mlp_w2_transposed", ret("gelu(x @ w1 + b1) @ w2.t() + b2"), {LAYOUT}, "w2 is transposed"),
    mistake("mlp_swapped_weights", ret("gelu(x @ w2 + b1) @ w1 + b2"), {LAYOUT}, "w1 and w2 are swapped"),
    # -- more than one property, each named
    mistake("mlp_no_second_layer", ret("gelu(x @ w1 + b1)"), {LAYOUT, ACT, BIAS},
            {LAYOUT: "w2 is never used", BIAS: "b2 is never added"},
            note="w2 and b2 are both left out: the layout and the biases say so; the activation is judged "
                 "against the whole MLP and names nothing"),
    mistake("mlp_hard_coded_768", ret("(gelu(x @ w1 + b1) @ w2 + b2).reshape(-1, 768).reshape(x.shape)"), ALL,
            "the size 768 is written into your code"),
    mistake("mlp_hard_coded_hidden", mlp(
        "    h = torch.zeros(x.shape[0], x.shape[1], 3072, dtype=x.dtype, device=x.device)\n"
        "    h = h + x @ w1 + b1\n"
        "    return gelu(h) @ w2 + b2\n"), ALL, "the size 3072 is written into your code"),
    # -- the first property
    mistake("mlp_float64_result", ret("gelu(x @ w1 + b1).double() @ w2.double() + b2.double()"), {SHAPE},
            "returned dtype torch.float64 for torch.float32 input"),
    mistake("mlp_in_place_unsqueeze", mlp(
        "    b1.unsqueeze_(0)  # [1, mlp_dim]\n"
        "    return gelu(x @ w1 + b1) @ w2 + b2\n"), {SHAPE}, "changed its argument `b1` in place"),
    mistake("mlp_in_place_bias", mlp(
        "    out = gelu(x @ w1 + b1) @ w2 + b2\n"
        "    b2.clamp_(-10.0, 10.0)  # keep the next call in range\n"
        "    return out\n"), {SHAPE},
        "changed its argument `b2` in place",
        note="b2 is only that large in the bias check's inputs: the values stay right, the input does not"),
]


def right(name, body, head="", **kw):
    return Entry(NB, name, mlp(body, head), **kw)


CORRECT = [
    right("mlp_ok_solution", "    hidden = gelu(x @ w1 + b1)\n    return hidden @ w2 + b2\n"),
    right("mlp_ok_einsum", "    h = torch.einsum('btd,dh->bth', x, w1)\n"
          "    h += b1\n"
          "    y = torch.einsum('bth,hd->btd', gelu(h), w2)\n"
          "    y.add_(b2)\n"
          "    return y\n"),
    right("mlp_ok_linear_transposed", "    h = torch.nn.functional.linear(x, w1.T, b1)\n"
          "    return torch.addmm(b2, gelu(h).reshape(-1, w2.shape[0]), w2).reshape(x.shape)\n"),
    right("mlp_ok_float32_inside", "    t = [a.float() for a in (x, w1, b1, w2, b2)]\n"
          "    return (gelu(t[0] @ t[1] + t[2]) @ t[3] + t[4]).to(x.dtype)\n"),
    right("mlp_ok_float64_inside", "    t = [a.double() for a in (x, w1, b1, w2, b2)]\n"
          "    return (gelu(t[0] @ t[1] + t[2]) @ t[3] + t[4]).to(x.dtype)\n"),
    right("mlp_ok_manual_matmul", "    h = (x.unsqueeze(-1) * w1).sum(dim=-2) + b1\n"
          "    return (gelu(h).unsqueeze(-1) * w2).sum(dim=-2) + b2\n"),
    right("mlp_ok_matmul", "    return torch.add(torch.matmul(gelu(torch.add(torch.matmul(x, w1), b1)), w2), b2)\n"),
    right("mlp_ok_tensordot", "    h = torch.tensordot(x, w1, dims=1) + b1\n"
          "    return torch.tensordot(gelu(h), w2, dims=1) + b2\n"),
    right("mlp_ok_rows", "    rows = x.reshape(-1, x.shape[-1])\n"
          "    out = gelu(rows @ w1 + b1) @ w2 + b2\n"
          "    return out.reshape(*x.shape[:-1], w2.shape[1])\n"),
    right("mlp_ok_own_gelu", "    h = x @ w1 + b1\n"
          "    h = 0.5 * h * (1 + torch.tanh(0.7978845608028654 * (h + 0.044715 * h ** 3)))\n"
          "    return h @ w2 + b2\n"),
    right("mlp_ok_helper", "    return _layer(gelu(_layer(x, w1, b1)), w2, b2)\n",
          head="def _layer(t, w, b):\n    return t @ w + b\n\n"),
]
