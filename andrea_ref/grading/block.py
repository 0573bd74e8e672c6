"""Checks for the block notebook: ``block(x, params, n_head)``, the pre-norm block

    h = x + causal_self_attention(layer_norm_1(x))
    y = h + mlp(layer_norm_2(h))

``layer_norm``, ``causal_self_attention`` and ``mlp`` are provided from ``andrea_ref``,
so only the wiring is judged.

============================  ====================================================
``check_block_shape``         a new ``[batch, seq, d_model]`` tensor, dtype and
                              device kept (the only check that judges them); no
                              argument changed in place (``x``, every entry of
                              ``params``, its keys), on every input any of the four
                              checks uses
``check_block_residual``      with both output projections zeroed, each sublayer
                              adds nothing and a pre-norm block returns x exactly
                              (a post-norm block returns LN(x), a block without
                              skip connections 0, one whose residual starts after
                              the norm LN(x)); switched on, the sublayers must
                              change it (x alone is no block)
``check_block_norms``         each sublayer has its own LayerNorm: ln_1's and ln_2's
                              parameters both change the output (by more than
                              rtol = atol = 1e-4), a finite one
``check_block_values``        the whole block against ``andrea_ref.block`` on random
                              parameters (every wiring mistake fails this too,
                              sublayers in the wrong order included)
============================  ====================================================

Values are compared with the float64 reference within rtol = atol = 1e-5, as the
notebook states, whatever dtype the result has. A "likely mistake" is named only when
the output matches that wiring's reference on a full random block.
"""
from __future__ import annotations

import torch

from ..attention import causal_self_attention as _attn
from ..block import block as _reference
from ..config import ModelConfig
from ..i18n import N_
from ..layernorm import layer_norm as _ln
from ..mlp import mlp as _mlp
from . import core as C, compare, inputs, messages, runner, watch
from .messages import _

NAME = "block"
FORBIDDEN = watch.Forbidden(
    N_("in this notebook the block is wired from the provided layer_norm, "
       "causal_self_attention and mlp; andrea_ref.block and andrea_ref.Block are not allowed."),
    ref_files=("block.py", "model.py"),
)
ATTN = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")
MLP = ("w1", "b1", "w2", "b2")


def make_params(g, d, h, dtype=torch.float64):
    """Random parameters with the names of ``andrea_ref.Block``; everything non-trivial."""
    p = {}
    for ln in ("ln_1", "ln_2"):
        p[f"{ln}.gamma"] = inputs.uniform(g, (d,), 0.5, 1.5)
        p[f"{ln}.beta"] = inputs.normal(g, (d,), 0.3)
    for n in ATTN:
        shape = (d, d) if n.startswith("w") else (d,)
        p[f"attn.{n}"] = inputs.normal(g, shape, d ** -0.5 if n.startswith("w") else 0.1)
    p["mlp.w1"] = inputs.normal(g, (d, h), d ** -0.5)
    p["mlp.b1"] = inputs.normal(g, (h,), 0.1)
    p["mlp.w2"] = inputs.normal(g, (h, d), h ** -0.5)
    p["mlp.b2"] = inputs.normal(g, (d,), 0.1)
    return {k: v.to(dtype) for k, v in p.items()}


def _config(d, h, n_head):
    return ModelConfig(name="grading", n_layer=1, n_head=n_head, d_model=d, mlp_dim=h)


def _run(fn, x, params, n_head):
    out = C.call(fn, inputs.copy_args((x, params, n_head)), name=NAME, forbidden=FORBIDDEN)
    return compare.values_result(out, name=NAME, shape=x.shape)


def _variants(x, p, n_head):
    x = compare.f64(x)
    p = {k: compare.f64(v) for k, v in p.items()}
    d, h = p["mlp.w1"].shape
    cfg = _config(d, h, n_head)
    ln = lambda name, t: _ln(t, p[f"{name}.gamma"], p[f"{name}.beta"])  # noqa: E731
    attn = lambda t: _attn(t, *(p[f"attn.{n}"] for n in ATTN), n_head)  # noqa: E731
    mlp = lambda t: _mlp(t, *(p[f"mlp.{n}"] for n in MLP))  # noqa: E731

    def after_norm():
        u = ln("ln_1", x)
        hid = u + attn(u)
        v = ln("ln_2", hid)
        return v + mlp(v)

    def shared(name):
        q = dict(p)
        other = "ln_2" if name == "ln_1" else "ln_1"
        q[f"{other}.gamma"], q[f"{other}.beta"] = p[f"{name}.gamma"], p[f"{name}.beta"]
        return _reference(x, q, cfg)

    def mlp_first(norm_mlp, norm_attn):
        hid = x + mlp(ln(norm_mlp, x))
        return hid + attn(ln(norm_attn, hid))

    def swapped_norms():
        q = dict(p)
        for part in ("gamma", "beta"):
            q[f"ln_1.{part}"], q[f"ln_2.{part}"] = p[f"ln_2.{part}"], p[f"ln_1.{part}"]
        return _reference(x, q, cfg)

    def final_norm(name):
        return ln(name, _reference(x, p, cfg))

    order = _("the sublayers are in the wrong order: the MLP sublayer comes before attention. "
              "Attention comes first, h = x + attention(ln_1(x)), then the MLP, "
              "h + mlp(ln_2(h)).")
    return [
        (_("a post-norm block, LN(x + f(x)). ANDREA is pre-norm: x + f(LN(x)), so the "
           "residual stream itself is never normalised."),
         lambda: _reference(x, p, cfg.replace(norm_position="post"))),
        (_("the residual connections are missing: each sublayer's output is added to its "
           "input, x = x + attention(ln_1(x)), then x = x + mlp(ln_2(x))."),
         lambda: _reference(x, p, cfg.replace(residual=False))),
        (_("the residual is added after the norm: the normalised x replaces x, so the skip "
           "connection carries LN(x). Keep x and add the sublayer to it: x + f(LN(x))."),
         after_norm),
        (_("one LayerNorm (ln_1) is used for both sublayers; the MLP sublayer has its own, ln_2."),
         lambda: shared("ln_1")),
        (_("one LayerNorm (ln_2) is used for both sublayers; the attention sublayer has its own, ln_1."),
         lambda: shared("ln_2")),
        (_("the MLP sublayer has no residual connection: x + mlp(ln_2(x))."),
         lambda: mlp(ln("ln_2", x + attn(ln("ln_1", x))))),
        (_("the attention sublayer has no residual connection: x + attention(ln_1(x))."),
         lambda: (lambda a: a + mlp(ln("ln_2", a)))(attn(ln("ln_1", x)))),
        (_("the MLP reads the attention output instead of the updated residual stream."),
         lambda: (lambda a: x + a + mlp(ln("ln_2", a)))(attn(ln("ln_1", x)))),
        (_("ln_1 and ln_2 are swapped: attention normalises its input with ln_1, the MLP with ln_2."),
         swapped_norms),
        (_("attention reads x itself: its input is ln_1(x), the normalised residual stream."),
         lambda: (lambda hid: hid + mlp(ln("ln_2", hid)))(x + attn(x))),
        (_("the MLP reads h itself: its input is ln_2(h), the normalised residual stream."),
         lambda: (lambda hid: hid + mlp(hid))(x + attn(ln("ln_1", x)))),
        (_("the MLP reads ln_2(x), the block's input, so the two sublayers run side by side: it reads "
           "ln_2(h), with h = x + attention(ln_1(x))."),
         lambda: x + attn(ln("ln_1", x)) + mlp(ln("ln_2", x))),
        (_("an extra LayerNorm is applied to the block's output: a pre-norm block returns "
           "h + mlp(ln_2(h)) as it is."),
         lambda: final_norm("ln_2")),
        (_("an extra LayerNorm is applied to the block's output: a pre-norm block returns "
           "h + mlp(ln_2(h)) as it is."),
         lambda: final_norm("ln_1")),
        (_("x is added twice: each sublayer's output is added to the stream once, x + attention(ln_1(x))."),
         lambda: x + _reference(x, p, cfg)),
        (_("attention runs with one head, not n_head: pass n_head on to causal_self_attention."),
         lambda: _reference(x, p, cfg.replace(n_head=1))),
        (order, lambda: mlp_first("ln_2", "ln_1")),  # each sublayer keeps its own norm
        (order + " " + _("Each keeps its own LayerNorm: ln_1 for attention, ln_2 for the MLP."),
         lambda: mlp_first("ln_1", "ln_2")),  # the norms follow the positions
    ]


_SIZES = ((2, 5, 8, 32, 2), (1, 7, 12, 20, 3))  # batch, seq, d_model, mlp_dim, n_head


def _cases(seed, dtypes=(torch.float64, torch.float32)):
    g = inputs.generator(seed)
    for device in inputs.devices():
        for dtype in dtypes:
            for b, t, d, h, n_head in _SIZES:
                x = inputs.normal(g, (b, t, d), 1.5, 0.5)
                p = make_params(g, d, h)
                on = {k: v.to(device=device, dtype=dtype) for k, v in p.items()}
                yield device, dtype, x.to(device=device, dtype=dtype), on, n_head


def _diagnosis_inputs(seed, device, dtype):
    g = inputs.generator(seed + 99)
    b, t, d, h, n_head = _SIZES[0]
    x = inputs.normal(g, (b, t, d), 1.5, 0.5).to(device=device, dtype=dtype)
    p = {k: v.to(device=device, dtype=dtype) for k, v in make_params(g, d, h).items()}
    return x, p, n_head


def _diagnosis(fn, seed, device, dtype):
    """Run the learner on a full random block and name the wiring it matches."""
    x, p, n_head = _diagnosis_inputs(seed, device, dtype)
    try:
        out = _run(fn, x, p, n_head)
    except AssertionError:
        return None
    return compare.diagnose(out, _variants(x, p, n_head), compare.tol_for(dtype, result=out), None)


def _switched_off(p):
    off = dict(p)
    for k in ("attn.w_o", "attn.b_o", "mlp.w2", "mlp.b2"):
        off[k] = torch.zeros_like(p[k])
    return off


def _norms_inputs(seed):
    g = inputs.generator(seed + 2)
    for device, dtype, x, p, n_head in _cases(seed + 2, dtypes=(torch.float64,)):
        d = x.shape[-1]
        changed = {}
        for name in ("ln_1", "ln_2"):
            q = dict(p)
            q[f"{name}.gamma"] = inputs.uniform(g, (d,), 1.5, 2.5).to(device)
            q[f"{name}.beta"] = inputs.normal(g, (d,), 1.0, 1.0).to(device)
            changed[name] = q
        yield device, x, p, n_head, changed


def _all_inputs(seed):
    for _device, _dtype, x, p, n_head in _cases(seed):
        yield x, p, n_head
    for device, dtype, x, p, n_head in _cases(seed + 1):
        yield x, _switched_off(p), n_head
        yield x, p, n_head
        yield _diagnosis_inputs(seed + 1, device, dtype)
    for device, x, p, n_head, changed in _norms_inputs(seed):
        yield x, p, n_head
        for q in changed.values():
            yield x, q, n_head
        yield _diagnosis_inputs(seed + 2, device, torch.float64)
    for _device, _dtype, x, p, n_head in _cases(seed + 3):
        yield x, p, n_head


@runner.graded
def check_block_shape(fn, seed=0):
    """block returns a new [batch, seq, d_model] tensor with x's dtype and device; x and params unchanged."""
    for device, dtype, x, p, n_head in _cases(seed):
        out = C.call(fn, inputs.copy_args((x, p, n_head)), name=NAME, forbidden=FORBIDDEN)
        compare.check_result(out, name=NAME, shape=x.shape, dtype=dtype, device=x.device)
        inputs.check_new_result(fn, inputs.copy_args((x, p, n_head)), inputs.copy_args((x * 0.5 + 0.25, p, n_head)),
                                name=NAME, forbidden=FORBIDDEN)
    inputs.inputs_left_alone(fn, _all_inputs(seed), name=NAME, labels=("x", "params", "n_head"),
                             advice=_("Write x = x + ..., not x += ...: the caller's tensors (x and every entry "
                                      "of params) must stay as they were, and params keeps its keys."))


@runner.graded
def check_block_residual(fn, seed=0):
    """Pre-norm residual stream: with both sublayers switched off the block returns x."""
    for device, dtype, x, p, n_head in _cases(seed + 1):
        out = _run(fn, x, _switched_off(p), n_head)
        tol = compare.tol_for(dtype, result=out)
        if compare.close(out, x, tol):
            # and the sublayers, switched on, do reach it: x alone is no residual stream
            if not compare.close(_run(fn, x, p, n_head), x, (1e-3, 1e-3)):
                continue
            messages.fail(
                _("With random parameters `{name}` returns x unchanged: the sublayers' outputs never reach "
                  "the residual stream.").format(name=NAME),
                _("x {shape}, {dtype}, on {device}.").format(shape=tuple(x.shape), dtype=dtype, device=device),
            )
        likely = _diagnosis(fn, seed + 1, device, dtype)
        messages.fail(
            _("With the output projections attn.w_o, attn.b_o, mlp.w2 and mlp.b2 set to zero both "
              "sublayers add nothing, so a pre-norm block must return x unchanged."),
            _("x {shape}, {dtype}, on {device}: {mismatch}.").format(
                shape=tuple(x.shape), dtype=dtype, device=device, mismatch=compare.mismatch(out, x, tol)),
            likely,
        )


@runner.graded
def check_block_norms(fn, seed=0):
    """Each sublayer has its own LayerNorm: ln_1 and ln_2 both shape the output."""
    for device, x, p, n_head, changed in _norms_inputs(seed):
        where = _("x {shape}, on {device}.").format(shape=tuple(x.shape), device=device)
        base = _run(fn, x, p, n_head)
        for name, q in changed.items():
            out = _run(fn, x, q, n_head)
            if not (compare.all_finite(base) and compare.all_finite(out)):
                messages.fail(_("`{name}` returned nan or inf for ordinary input.").format(name=NAME), where)
            if compare.close(out, base, (1e-4, 1e-4)):
                unused = (_("{norm} is never used: the attention sublayer normalises its input with its own "
                            "parameters, params['{norm}.gamma'] and params['{norm}.beta'].") if name == "ln_1" else
                          _("{norm} is never used: the MLP sublayer normalises its input with its own "
                            "parameters, params['{norm}.gamma'] and params['{norm}.beta'].")).format(norm=name)
                messages.fail(
                    _("Changing {norm}.gamma and {norm}.beta does not change the block's output.").format(
                        norm=name),
                    where,
                    _diagnosis(fn, seed + 2, device, torch.float64) or unused,
                )


@runner.graded
def check_block_values(fn, seed=0):
    """The whole pre-norm block matches the reference on random parameters."""
    for device, dtype, x, p, n_head in _cases(seed + 3):
        out = _run(fn, x, p, n_head)
        cfg = _config(x.shape[-1], p["mlp.w1"].shape[1], n_head)
        want = _reference(compare.f64(x), {k: compare.f64(v) for k, v in p.items()}, cfg)
        tol = compare.tol_for(dtype, result=out)
        if compare.close(out, want, tol):
            continue
        messages.fail(
            _("`{name}` should return h + mlp(ln_2(h)) with h = x + attention(ln_1(x)).").format(name=NAME),
            _("x {shape}, n_head = {n_head}, {dtype}, on {device}: {mismatch}.").format(
                shape=tuple(x.shape), n_head=n_head, dtype=dtype, device=device,
                mismatch=compare.mismatch(out, want, tol)),
            compare.diagnose(out, _variants(x, p, n_head), tol, None),
        )


# (property, check) for the self-check report; the names are translated when shown.
CHECKS = (
    (N_("shape, dtype and device kept"), check_block_shape),
    (N_("pre-norm residual stream"), check_block_residual),
    (N_("a LayerNorm per sublayer"), check_block_norms),
    (N_("the whole block"), check_block_values),
)


# What each graded check states (its docstring's first line, printed beside its tick
# or cross): marked here to be translated when shown.
PROPERTIES = (
    N_("block returns a new [batch, seq, d_model] tensor with x's dtype and device; x and params unchanged."),
    N_("Pre-norm residual stream: with both sublayers switched off the block returns x."),
    N_("Each sublayer has its own LayerNorm: ln_1 and ln_2 both shape the output."),
    N_("The whole pre-norm block matches the reference on random parameters."),
)


def report_block(fn):
    """Print which properties of ``fn`` hold (never raises): for self-checks."""
    return runner.run_report(_("Checking `{name}`:").format(name=NAME), CHECKS, fn)
