"""Block answers: ``block(x, params, n_head)``, the pre-norm block wired from the
provided ``layer_norm``, ``causal_self_attention`` and ``mlp``."""
from __future__ import annotations

from grading_submissions import _PIECES as PIECES

from . import ALL, Entry

NB = "01_block"
SHAPE, RESID, NORMS, VALUES = "block_shape", "block_residual", "block_norms", "block_values"

def block(body: str, head: str = "") -> str:
    return PIECES + head + "def block(x, params, n_head):\n    p = params\n" + body


def mistake(name, source, lost, likely, **kw):
    return Entry(NB, name, source, frozenset(lost) if lost != ALL else ALL, likely, **kw)


H = "    h = x + _attn(p, _ln(p, 'ln_1', x), n_head)\n"

MISTAKES = [
    # -- the residual stream
    mistake("block_post_norm", block(
        "    h = _ln(p, 'ln_1', x + _attn(p, x, n_head))\n"
        "    return _ln(p, 'ln_2', h + _mlp(p, h))\n"), {RESID, VALUES}, "post-norm block"),
    mistake("block_no_residual", block(
        "    h = _attn(p, _ln(p, 'ln_1', x), n_head)\n"
        "    return _mlp(p, _ln(p, 'ln_2', h))\n"), {RESID, VALUES}, "residual connections are missing"),
    mistake("block_no_attention_residual", block(
        "    h = _attn(p, _ln(p, 'ln_1', x), n_head)\n"
        "    return h + _mlp(p, _ln(p, 'ln_2', h))\n"), {RESID, VALUES}, "attention sublayer has no residual"),
    mistake("block_no_mlp_residual", block(H + "    return _mlp(p, _ln(p, 'ln_2', h))\n"), {RESID, VALUES},
            "MLP sublayer has no residual"),
    mistake("block_residual_after_norm", block(
        "    x = _ln(p, 'ln_1', x)\n"
        "    x = x + _attn(p, x, n_head)\n"
        "    x = _ln(p, 'ln_2', x)\n"
        "    return x + _mlp(p, x)\n"), {RESID, VALUES}, "residual is added after the norm"),
    mistake("block_final_norm", block(H + "    y = h + _mlp(p, _ln(p, 'ln_2', h))\n    return _ln(p, 'ln_2', y)\n"),
            {RESID, VALUES}, "extra LayerNorm is applied to the block's output"),
    mistake("block_x_twice", block(H + "    return x + h + _mlp(p, _ln(p, 'ln_2', h))\n"), {RESID, VALUES},
            "x is added twice"),
    # -- the LayerNorms
    mistake("block_shared_ln_1", block(H + "    return h + _mlp(p, _ln(p, 'ln_1', h))\n"), {NORMS, VALUES},
            "one LayerNorm (ln_1) is used for both sublayers"),
    mistake("block_shared_ln_2", block(
        "    h = x + _attn(p, _ln(p, 'ln_2', x), n_head)\n"
        "    return h + _mlp(p, _ln(p, 'ln_2', h))\n"), {NORMS, VALUES},
        "one LayerNorm (ln_2) is used for both sublayers"),
    mistake("block_no_ln_1", block(
        "    h = x + _attn(p, x, n_head)\n"
        "    return h + _mlp(p, _ln(p, 'ln_2', h))\n"), {NORMS, VALUES}, "attention reads x itself"),
    mistake("block_no_ln_2", block(H + "    return h + _mlp(p, h)\n"), {NORMS, VALUES}, "the MLP reads h itself"),
    mistake("block_swapped_norms", block(
        "    h = x + _attn(p, _ln(p, 'ln_2', x), n_head)\n"
        "    return h + _mlp(p, _ln(p, 'ln_1', h))\n"), {VALUES}, "ln_1 and ln_2 are swapped",
        note="each sublayer still has a LayerNorm of its own; only the whole block shows the swap"),
    # -- the order and what each sublayer reads
    mistake("block_mlp_first", block(
        "    h = x + _mlp(p, _ln(p, 'ln_2', x))\n"
        "    return h + _attn(p, _ln(p, 'ln_1', h), n_head)\n"), {VALUES}, "the MLP sublayer comes before attention"),
    mistake("block_mlp_first_norms_follow", block(
        "    h = x + _mlp(p, _ln(p, 'ln_1', x))\n"
        "    return h + _attn(p, _ln(p, 'ln_2', h), n_head)\n"), {VALUES}, "the MLP sublayer comes before attention"),
    mistake("block_mlp_reads_attention", block(
        "    a = _attn(p, _ln(p, 'ln_1', x), n_head)\n"
        "    return x + a + _mlp(p, _ln(p, 'ln_2', a))\n"), {VALUES}, "reads the attention output"),
    mistake("block_parallel", block(
        "    return x + _attn(p, _ln(p, 'ln_1', x), n_head) + _mlp(p, _ln(p, 'ln_2', x))\n"), {VALUES},
        "side by side"),
    mistake("block_one_head", block(
        "    h = x + _attn(p, _ln(p, 'ln_1', x), 1)\n"
        "    return h + _mlp(p, _ln(p, 'ln_2', h))\n"), {VALUES}, "one head"),
    mistake("block_half_residual", block(
        "    h = x + 0.5 * _attn(p, _ln(p, 'ln_1', x), n_head)\n"
        "    return h + 0.5 * _mlp(p, _ln(p, 'ln_2', h))\n"), {VALUES}, None,
        note="a scaled sublayer: the switched-off block still returns x; no known wiring matches"),
    # -- the first property
    mistake("block_float64_result", block(
        "    x = x.double()\n"
        "    p = {k: v.double() for k, v in p.items()}\n" + H + "    return h + _mlp(p, _ln(p, 'ln_2', h))\n"),
        {SHAPE}, "returned dtype torch.float64 for torch.float32 input"),
    mistake("block_in_place_x", block(
        "    x += _attn(p, _ln(p, 'ln_1', x), n_head)\n"
        "    return x + _mlp(p, _ln(p, 'ln_2', x))\n"), {SHAPE}, "changed its argument `x` in place"),
    mistake("block_pops_params", block(
        "    gamma, beta = p.pop('ln_1.gamma'), p.pop('ln_1.beta')\n"
        "    h = x + _attn(p, layer_norm(x, gamma, beta), n_head)\n"
        "    return h + _mlp(p, _ln(p, 'ln_2', h))\n"), {SHAPE}, "changed its argument `params`"),
    mistake("block_in_place_param", block(
        "    y = x + _attn(p, _ln(p, 'ln_1', x), n_head)\n"
        "    y = y + _mlp(p, _ln(p, 'ln_2', y))\n"
        "    p['mlp.b2'].zero_()  # tidy up\n"
        "    return y\n"), {SHAPE}, "changed its argument `params['mlp.b2']` in place"),
]


def right(name, body, head="", **kw):
    return Entry(NB, name, block(body, head), **kw)


CORRECT = [
    right("block_ok_solution", H + "    return h + _mlp(p, _ln(p, 'ln_2', h))\n"),
    right("block_ok_in_place_temporaries", "    h = _attn(p, _ln(p, 'ln_1', x), n_head)\n"
          "    h += x\n"
          "    out = _mlp(p, _ln(p, 'ln_2', h))\n"
          "    out.add_(h)\n"
          "    return out\n"),
    right("block_ok_loop", "    for norm, sub in (('ln_1', lambda t: _attn(p, t, n_head)), ('ln_2', lambda t: _mlp(p, t))):\n"
          "        x = x + sub(_ln(p, norm, x))\n"
          "    return x\n"),
    right("block_ok_inline", "    u = layer_norm(x, params['ln_1.gamma'], params['ln_1.beta'])\n"
          "    a = causal_self_attention(u, params['attn.w_q'], params['attn.b_q'], params['attn.w_k'],\n"
          "                              params['attn.b_k'], params['attn.w_v'], params['attn.b_v'],\n"
          "                              params['attn.w_o'], params['attn.b_o'], n_head)\n"
          "    h = x + a\n"
          "    v = layer_norm(h, params['ln_2.gamma'], params['ln_2.beta'])\n"
          "    return h + mlp(v, params['mlp.w1'], params['mlp.b1'], params['mlp.w2'], params['mlp.b2'])\n"),
    right("block_ok_kwargs", "    a = {k.split('.', 1)[1]: v for k, v in p.items() if k.startswith('attn.')}\n"
          "    m = {k.split('.', 1)[1]: v for k, v in p.items() if k.startswith('mlp.')}\n"
          "    h = x + causal_self_attention(_ln(p, 'ln_1', x), n_head=n_head, **a)\n"
          "    return h + mlp(_ln(p, 'ln_2', h), **m)\n"),
    right("block_ok_float64_inside", "    y = x.double()\n"
          "    q = {k: v.double() for k, v in p.items()}\n"
          "    h = y + _attn(q, _ln(q, 'ln_1', y), n_head)\n"
          "    return (h + _mlp(q, _ln(q, 'ln_2', h))).to(x.dtype)\n"),
    right("block_ok_float32_inside", "    y = x.float()\n"
          "    q = {k: v.float() for k, v in p.items()}\n"
          "    h = y + _attn(q, _ln(q, 'ln_1', y), n_head)\n"
          "    return (h + _mlp(q, _ln(q, 'ln_2', h))).to(x.dtype)\n"),
    right("block_ok_torch_add", "    h = torch.add(x, _attn(p, _ln(p, 'ln_1', x), n_head))\n"
          "    return torch.add(h, _mlp(p, _ln(p, 'ln_2', h)))\n"),
    right("block_ok_copy_of_params", "    q = dict(params)\n"
          "    q['ln_1.gamma'] = q['ln_1.gamma'].clone()\n"
          "    h = x + _attn(q, _ln(q, 'ln_1', x), n_head)\n"
          "    return h + _mlp(q, _ln(q, 'ln_2', h))\n"),
    right("block_ok_class", "    return _Block(p, n_head)(x)\n",
          head="class _Block:\n"
               "    def __init__(self, p, n_head):\n"
               "        self.p, self.n_head = p, n_head\n\n"
               "    def __call__(self, x):\n"
               "        x = x + _attn(self.p, _ln(self.p, 'ln_1', x), self.n_head)\n"
               "        return x + _mlp(self.p, _ln(self.p, 'ln_2', x))\n\n"),
    right("block_ok_sublayer_helper", "    h = _sublayer(x, lambda t: _attn(p, t, n_head), p, 'ln_1')\n"
          "    return _sublayer(h, lambda t: _mlp(p, t), p, 'ln_2')\n",
          head="def _sublayer(x, f, p, norm):\n    return x + f(_ln(p, norm, x))\n\n"),
]
