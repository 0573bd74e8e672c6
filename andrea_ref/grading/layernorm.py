"""Checks for the LayerNorm notebook: ``layer_norm(x, gamma, beta, eps=1e-5)``.

Four properties, one graded cell each, built so that one classic mistake fails the
property it breaks and no other:

============================  ====================================================
``check_layer_norm_shape``    a new plain tensor of x's shape, dtype and device
                              (the only check that judges dtype and device); no
                              argument changed in place, on every input any of the
                              four checks uses
``check_layer_norm_normalises``  mean and *biased* variance over the *last* axis,
                              against the float64 reference. Run with gamma = beta
                              = 1, which every slip in the affine step turns into
                              x_hat + 1, x_hat or x_hat + 2 (all accepted here), and
                              with eps tiny next to the variance, so eps placement
                              cannot show; a function that adds its own fixed eps
                              instead of the argument is measured against LayerNorm
                              with that eps.
``check_layer_norm_affine``   ``gamma * x_hat + beta``, measured against the
                              learner's *own* x_hat (``layer_norm(x, 1, 0)``, which
                              must be finite and vary within each token), so a
                              wrong normalisation cannot show here.
``check_layer_norm_eps``      eps added inside the square root: the output must
                              depend on eps as ``c / sqrt(v + eps)`` does, for the
                              numerator ``c`` and the variance ``v`` the function
                              itself uses (fitted, element by element, from its
                              outputs at two values of eps, then checked at three
                              more and at the default 1e-5), so a wrong variance
                              or axis cannot show here while eps outside the
                              root, eps squared, an ignored eps or a wrong default
                              can; a token of equal entries must stay finite.
============================  ====================================================

Values are compared within rtol = atol = 1e-5 (``compare.FLOAT32_TOL``/``FLOAT64_TOL``,
as the notebook states), whatever dtype the result has. A "likely mistake" is named
only when the output matches that mistake's formula (or, for eps, its law) within
the tolerance. In this notebook LayerNorm is built from elementary operations: any
executed ATen norm op or a call into ``andrea_ref``'s LayerNorm fails every check.
"""
from __future__ import annotations

import re

import torch

from ..i18n import N_
from ..layernorm import layer_norm as _reference
from . import _core as C, captured, compare, inputs, messages, runner, watch
from .messages import _

NAME = "layer_norm"
FORBIDDEN = watch.Forbidden(
    N_("in this notebook LayerNorm is built from elementary tensor operations (mean, "
       "subtraction, multiplication, square root); torch.nn.functional.layer_norm, "
       "nn.LayerNorm, other library norms and andrea_ref's layer_norm are not allowed, "
       "whatever name they are called by."),
    aten_words=("layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm"),
    ref_files=("layernorm.py", "block.py", "model.py"),
)
LABELS = ("x", "gamma", "beta", "eps")

_SHAPES = ((4, 8), (2, 3, 8), (3, 5, 16))  # small d: the unbiased variance shows
_EPS_SHAPES = ((6, 8), (2, 3, 16))
# eps values comparable to the eps check's variances (about 2.5e-3 ... 4e-2), where
# where eps goes changes the output most. The law is fitted at the first two and
# checked at the others.
_EPS_FIT = (1e-3, 6.4e-2)
_EPS_CHECK = (4e-3, 1.6e-2, 3e-2)
_FLAT = 0.75  # the entries of the eps check's token of equal entries
# What every slip in the affine step makes of gamma = beta = 1 (x_hat + shift): right,
# swapped or beta added before scaling (1), beta or both missing (0), gamma added (2).
_SHIFTS = (1.0, 0.0, 2.0)


def _hint(error, where, args):
    """A mean or variance that lost its last dimension (keepdim missing) no longer
    lines up with x: the broadcast error then names the token count and d."""
    x = args[0] if args else None
    if isinstance(error, TypeError) and "'eps'" in str(error) and "missing" in str(error) and len(args) == 3:
        return _("eps has no default value: the signature is layer_norm(x, gamma, beta, eps=1e-5).")
    found = re.search(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)", str(error))
    if found and isinstance(x, torch.Tensor) and x.dim() >= 2:
        if {int(found.group(1)), int(found.group(2))} == {x.shape[-1], x.shape[-2]}:
            return _("a mean or variance lost its last dimension (keepdim=True is missing), so it no longer "
                     "lines up with x: use .mean(dim=-1, keepdim=True).")
    return None


def _run(fn, x, gamma, beta, *eps):
    """The learner's values (any floating dtype, any device: those are judged by the
    shape check only)."""
    out = C.call(fn, inputs.copy_args((x, gamma, beta, *eps)), name=NAME, forbidden=FORBIDDEN, hint=_hint)
    return compare.values_result(out, name=NAME, shape=x.shape)


# The largest fixed eps a function may add in place of the argument and still be
# judged on its normalisation (the eps check charges it): 1e-12 ... 1e-3 are all common.
_OWN_EPS_MAX = 1e-2


def _own_eps(out, x, shift):
    """The eps a function that returned ``out = (x - mean) / sqrt(var + e) + shift``
    really added: the median over tokens of ``1 / k^2 - var``, where ``k`` is the
    least-squares factor between the output and the centred input. ``None`` if it is
    not a number in [0, _OWN_EPS_MAX]."""
    c = x - x.mean(dim=-1, keepdim=True)
    var = (c * c).mean(dim=-1)
    k = ((compare.f64(out) - shift) * c).sum(dim=-1) / (c * c).sum(dim=-1)
    e = (1.0 / (k * k) - var).reshape(-1).median().item()
    return e if 0.0 <= e <= _OWN_EPS_MAX else None


def _normalises_with_own_eps(out, x, shift, tol):
    """``out`` is LayerNorm of ``x`` (gamma = 1, beta = ``shift``) with the eps the
    function really added, whatever eps it was given."""
    if not compare.all_finite(out):
        return False
    own = _own_eps(out, x, shift)
    if own is None:
        return False
    return compare.close(out, _variant(x, own) + shift, tol)


def _rows(g, shape, scale, offset):
    """Random rows, each with its own spread (uniform in ``scale``) and mean."""
    row_shape = (*shape[:-1], 1)
    spread = inputs.uniform(g, row_shape, *scale)
    centre = inputs.uniform(g, row_shape, -offset, offset)
    return inputs.normal(g, shape) * spread + centre


def _variant(x, eps, *, dim=-1, unbiased=False, spread="std", eps_outside=False, center=True):
    """A (mis)implementation of LayerNorm without the affine step, in float64.
    ``spread``: "std" (right), "var" (no square root), "mad" (mean absolute deviation
    in place of the standard deviation), "mad_var" (it in place of the variance),
    "rms" (root mean square of x, RMSNorm)."""
    x = compare.f64(x)
    dims = dim if dim is not None else tuple(range(x.dim()))
    mean = x.mean(dim=dims, keepdim=True)
    c = x - mean
    n = x.numel() / mean.numel()
    var = c.pow(2).sum(dim=dims, keepdim=True) / (n - (1 if unbiased else 0))
    num = c if center else x
    if spread == "var":
        return num / (var + eps)
    if spread == "mad":
        return num / (c.abs().mean(dim=dims, keepdim=True) + eps)
    if spread == "mad_var":
        return num / (c.abs().mean(dim=dims, keepdim=True) + eps).sqrt()
    if spread == "rms":
        return x / (x.pow(2).mean(dim=dims, keepdim=True) + eps).sqrt()
    if eps_outside:
        return num / (var.sqrt() + eps)
    return num / (var + eps).sqrt()


def _cases(seed, dtypes=(torch.float64, torch.float32)):
    g = inputs.generator(seed)
    for device in inputs.devices():
        for dtype in dtypes:
            for shape in _SHAPES:
                yield device, dtype, shape, g


# ---------------------------------------------------------------------------
# The inputs of each check, drawn from the seed alone (the shape check calls the
# function on all of them, to see any argument changed in place).

def _normalise_inputs(seed):
    for device, dtype, shape, g in _cases(seed):
        x = _rows(g, shape, (2.0, 6.0), 3.0)
        ones = inputs.const(1.0, shape[-1:])
        on = lambda t: t.to(device=device, dtype=dtype)  # noqa: E731
        yield device, dtype, shape, x, (on(x), on(ones), on(ones), 1e-8)  # eps tiny next to the variance


def _affine_inputs(seed):
    for device, dtype, shape, g in _cases(seed + 1):
        d = shape[-1]
        x = _rows(g, shape, (1.0, 3.0), 2.0)
        sign = torch.where(inputs.uniform(g, (d,)) < 0.3, -1.0, 1.0)
        gamma = inputs.uniform(g, (d,), 0.5, 2.0) * sign
        beta = inputs.normal(g, (d,))
        on = lambda t: t.to(device=device, dtype=dtype)  # noqa: E731
        yield (device, dtype, shape, x, gamma, beta,
               (on(x), on(inputs.const(1.0, (d,))), on(inputs.const(0.0, (d,))), 1e-5),
               (on(x), on(gamma), on(beta), 1e-5))


def _eps_inputs(seed):
    g = inputs.generator(seed + 2)
    for device in inputs.devices():
        for shape in _EPS_SHAPES:
            # rows with variance comparable to eps, where its placement matters; the
            # first token's entries are all equal (variance 0)
            x = _rows(g, shape, (0.05, 0.2), 1.0)
            x[..., 0, :] = _FLAT
            ones = inputs.const(1.0, shape[-1:]).to(device)
            yield device, shape, x.to(device), ones


_SCALE = 10.0  # x scaled by this, eps by its square: what tells a variance from a spread


def _eps_calls(x, ones):
    """(key, argument tuple) of every call the eps check makes: key eps, None for the
    default, "scaled" for 10 x with 100 times the first eps."""
    for eps in (*_EPS_FIT, *_EPS_CHECK):
        yield eps, (x, ones, ones, eps)
    yield None, (x, ones, ones)
    yield "scaled", (x * _SCALE, ones, ones, _EPS_FIT[0] * _SCALE ** 2)


def _all_inputs(seed):
    for *_ignored, args in _normalise_inputs(seed):
        yield args
    for *_ignored, hat_args, args in _affine_inputs(seed):
        yield hat_args
        yield args
    for _device, _shape, x, ones in _eps_inputs(seed):
        for _eps, args in _eps_calls(x, ones):
            yield args
    g = inputs.generator(seed)
    for device in inputs.devices():
        for dtype, shape in ((torch.float32, (2, 3, 8)), (torch.float64, (4, 6))):
            yield _shape_args(g, device, dtype, shape)


def _shape_args(g, device, dtype, shape):
    x = _rows(g, shape, (0.5, 2.0), 1.0)
    d = shape[-1]
    gamma = inputs.uniform(g, (d,), 0.5, 1.5)
    beta = inputs.normal(g, (d,))
    return tuple(t.to(device=device, dtype=dtype) for t in (x, gamma, beta)) + (1e-5,)


_INPLACE_ADVICE = N_("A function must leave its inputs as they were: compute into new tensors (x - mean, "
                     "not x -= mean; in-place ops are fine on tensors you created yourself).")


@runner.graded
def check_layer_norm_shape(fn, seed=0):
    """layer_norm returns a new tensor of x's shape, dtype and device and leaves its inputs alone."""
    g = inputs.generator(seed)
    for device in inputs.devices():
        for dtype, shape in ((torch.float32, (2, 3, 8)), (torch.float64, (4, 6))):
            args = _shape_args(g, device, dtype, shape)
            x = args[0]
            out = C.call(fn, inputs.copy_args(args), name=NAME, forbidden=FORBIDDEN, hint=_hint)
            compare.check_result(out, name=NAME, shape=x.shape, dtype=dtype, device=x.device)
            again = (x * 0.5 + 0.25, *args[1:])
            inputs.check_new_result(fn, inputs.copy_args(args), inputs.copy_args(again), name=NAME, forbidden=FORBIDDEN,
                                    hint=_hint)
    inputs.inputs_left_alone(fn, _all_inputs(seed), name=NAME, labels=LABELS, advice=_(_INPLACE_ADVICE),
                             hint=_hint)


def _normalise_variants(x, eps):
    variants = []
    for shift in _SHIFTS:
        variants += [
            (_("the variance divides by d - 1 (the unbiased estimate, torch.var's and torch.std's "
               "default). LayerNorm uses the biased variance, dividing by d: use .mean of the squared "
               "deviations, or torch.var(..., unbiased=False) / correction=0."),
             lambda s=shift: _variant(x, eps, unbiased=True) + s),
        ]
        for dim in range(x.dim() - 1):
            variants.append((
                _("the statistics are taken over dimension {dim}, not the last one. Each token "
                  "is normalised on its own: mean and variance over dim=-1 with keepdim=True.").format(dim=dim),
                lambda s=shift, dim=dim: _variant(x, eps, dim=dim) + s))
        variants += [
            (_("mean and variance are taken over the whole tensor. Each token (row) is "
               "normalised on its own: dim=-1, keepdim=True."),
             lambda s=shift: _variant(x, eps, dim=None) + s),
            (_("the mean is not subtracted before dividing by the standard deviation."),
             lambda s=shift: _variant(x, eps, center=False) + s),
            (_("x is divided by its root mean square (RMSNorm): LayerNorm subtracts the mean first and "
               "divides by the standard deviation of the centred values."),
             lambda s=shift: _variant(x, eps, spread="rms") + s),
            (_("the centred values are divided by the variance instead of its square root."),
             lambda s=shift: _variant(x, eps, spread="var") + s),
            (_("the spread is the mean absolute deviation, mean(|x - mean|), not the standard "
               "deviation sqrt(mean((x - mean)^2))."),
             lambda s=shift: _variant(x, eps, spread="mad") + s),
            (_("the mean absolute deviation, mean(|x - mean|), is used as the variance: the variance "
               "is the mean of the squared deviations, mean((x - mean)^2)."),
             lambda s=shift: _variant(x, eps, spread="mad_var") + s),
        ]
    return variants


@runner.graded
def check_layer_norm_normalises(fn, seed=0):
    """Each token is normalised over the last axis with the biased variance."""
    for device, dtype, shape, x, args in _normalise_inputs(seed):
        eps = args[3]
        out = _run(fn, *args)
        x_hat = _variant(x, eps)
        tol = compare.tol_for(dtype, result=out)
        # With gamma = beta = 1 the answer is x_hat + 1. A slip in the affine step turns
        # that into x_hat or x_hat + 2: that is the affine check's to charge, not here's.
        if any(compare.close(out, x_hat + shift, tol) for shift in _SHIFTS):
            continue
        # A fixed eps used instead of the argument (1e-5 written into the formula) is
        # the eps check's to charge: compare with LayerNorm using the eps really added.
        if any(_normalises_with_own_eps(out, x, shift, tol) for shift in _SHIFTS):
            continue
        likely = compare.diagnose(out, _normalise_variants(x, eps), tol, None)
        messages.fail(
            _("With gamma = beta = 1, `{name}` should return x_hat + 1, where x_hat = (x - mean) / "
              "sqrt(var + eps) over the last dimension.").format(name=NAME),
            _("Input shape {shape}, {dtype}, on {device}: {mismatch}.").format(
                shape=shape, dtype=dtype, device=device, mismatch=compare.mismatch(out, x_hat + 1, tol)),
            likely,
        )


@runner.graded
def check_layer_norm_affine(fn, seed=0):
    """gamma scales and beta shifts the normalised values: gamma * x_hat + beta."""
    for device, dtype, shape, x, gamma, beta, hat_args, args in _affine_inputs(seed):
        own_hat = _run(fn, *hat_args)
        out = _run(fn, *args)
        tol = compare.tol_for(dtype, result=out)
        x_hat = _variant(x, 1e-5)
        where = _("Input shape {shape}, {dtype}, on {device}").format(shape=shape, dtype=dtype, device=device)
        if not compare.all_finite(own_hat):
            messages.fail(
                _("`{name}(x, gamma, beta)` should equal gamma * `{name}(x, 1, 0)` + beta.").format(name=NAME),
                _("{where}: `{name}(x, 1, 0)` has nan or inf for ordinary input, so gamma and beta cannot "
                  "be measured.").format(where=where, name=NAME),
            )
        own = compare.f64(own_hat)
        expected = captured.add(captured.mul(own, gamma), beta)
        # A result narrower than x (float16 for float32, say) has own_hat rounded too,
        # and gamma carries that rounding into `expected`: allow it.
        rounding = compare.rounding(dtype, own_hat)
        if rounding:
            tol = (tol[0], tol[1] + rounding * captured.item(captured.amax(captured.abs_f(captured.mul(own, gamma)))))
        # gamma can only show where x_hat is not 0: a function returning beta alone must not pass
        spread_ok = bool((own.abs().mean(dim=-1) > 0.1).all())
        if spread_ok and compare.close(out, expected, tol):
            continue
        variants = [
            (_("gamma and beta are swapped: the result must be gamma * x_hat + beta."),
             lambda: beta * x_hat + gamma),
            (_("gamma and beta are swapped: the result must be gamma * x_hat + beta."),
             lambda: beta * own + gamma),
            (_("gamma is never applied: multiply the normalised values by gamma."),
             lambda: own + beta),
            (_("beta is never applied: add beta after scaling by gamma."),
             lambda: gamma * own),
            (_("neither gamma nor beta is applied: return gamma * x_hat + beta."),
             lambda: own),
            (_("beta is added before scaling: the result must be gamma * x_hat + beta, "
               "not gamma * (x_hat + beta)."),
             lambda: gamma * (own + beta)),
            (_("gamma is added instead of multiplied: the result must be gamma * x_hat + beta."),
             lambda: own + gamma + beta),
            (_("gamma is added instead of multiplied: the result must be gamma * x_hat + beta."),
             lambda: x_hat + gamma + beta),
            (_("gamma scales x before it is normalised, where normalising undoes it: scale the "
               "normalised values, gamma * x_hat + beta."),
             lambda: _variant(x * gamma, 1e-5) + beta),
        ]
        likely = compare.diagnose(out, variants, tol, None) if compare.all_finite(out) else None
        if likely is None and not spread_ok:
            likely = _("with gamma = 1 and beta = 0 the output is (nearly) 0 within a token, so the "
                       "normalised values never reach the output.")
        messages.fail(
            _("`{name}(x, gamma, beta)` should equal gamma * `{name}(x, 1, 0)` + beta.").format(name=NAME),
            _("{where}: {mismatch}.").format(where=where, mismatch=compare.mismatch(out, expected, tol)),
            likely,
        )


# ---------------------------------------------------------------------------
# eps: how the output depends on it.
#
# With gamma = beta = 1 the output is u + shift, and for eps inside the square root
# u = c / sqrt(v + eps) element by element, whatever numerator c and variance v the
# function uses. Two values of eps fix c and v for each element; the law then
# predicts u at every other eps. The wrong placements have laws of their own, fitted
# the same way, and are named only when the outputs follow them.

def _fit_inside(ua, ub, ga, gb):
    """(c, v) of ``u = c / sqrt(v + g)`` through (ga, ua) and (gb, ub), elementwise."""
    rho = (ua / ub) ** 2
    v = (gb - rho * ga) / (rho - 1)
    c = ua * torch.sqrt(v + ga)
    return c, v


def _law_inside(g):
    def fit(ua, ub, ea, eb):
        c, v = _fit_inside(ua, ub, g(ea), g(eb))
        return lambda e: c / torch.sqrt(v + g(e))
    return fit


def _law_outside(ua, ub, ea, eb):
    """``u = c / (s + eps)``: eps added to the spread itself, outside any square root."""
    r = ua / ub
    s = (eb - r * ea) / (r - 1)
    c = ua * (s + ea)
    return lambda e: c / (s + e)


def _law_added(ua, ub, ea, eb):
    """``u = c + eps``: eps added to the result."""
    return lambda e: ua - ea + e


def _law_ignored(ua, ub, ea, eb):
    return lambda e: ua


_RIGHT = _law_inside(lambda e: e)


def _follows(law, outs, shift, tol):
    """``law`` fitted at the two fitting eps predicts every output in ``outs`` ({eps:
    output}, eps None for the default 1e-5): None if it does, else (eps, mismatch) of
    the first that it does not."""
    ea, eb = _EPS_FIT
    ua, ub = outs[ea] - shift, outs[eb] - shift
    with runner.quiet():
        predict = law(ua, ub, ea, eb)
        for e, out in outs.items():
            want = predict(1e-5 if e is None else e)
            # where c is 0 (the token of equal entries) nothing depends on eps
            want = torch.where(torch.isfinite(want), want, ua) + shift
            problem = compare.mismatch(out, want, tol)
            if problem is not None:
                return e, problem
    return None


def _added_to_variance(outs, shift, tol):
    """What eps is added to grows like x^2 (a variance): 10 x with 100 eps gives the
    output for x and eps divided by 10, as c / (var + eps) does. (c / (sqrt(var) + eps)
    does not: there eps is added to the spread.)"""
    u = outs[_EPS_FIT[0]] - shift
    return compare.close(outs["scaled"] - shift, u / _SCALE, tol)


def _placement(outs, shift, tol):
    """The law eps follows when it sits where it belongs: added to the variance inside
    the square root (c / sqrt(v + eps), whatever c and v), or added to the variance
    when the square root itself is missing (c / (v + eps): the normalisation check
    charges that); ``None`` if neither fits the outputs at the given eps."""
    given = {e: o for e, o in outs.items() if isinstance(e, float)}
    if _follows(_RIGHT, given, shift, tol) is None:
        return _RIGHT
    if _follows(_law_outside, given, shift, tol) is None and _added_to_variance(outs, shift, tol):
        return _law_outside
    return None


def _eps_message(outs, shift, tol):
    """The likely mistake in the eps placement, named only when the outputs follow that
    mistake's law at every eps; ``None`` otherwise."""
    given = {e: o for e, o in outs.items() if isinstance(e, float)}
    if _follows(_law_ignored, given, shift, tol) is None:
        return _("the eps argument is ignored (a fixed number used instead?): add the eps "
                 "you are given to the variance.")
    if _follows(_law_outside, given, shift, tol) is None and not _added_to_variance(outs, shift, tol):
        return _("eps is added to the spread itself, outside the square root: divide by "
                 "sqrt(var + eps), not by sqrt(var) + eps.")
    laws = (
        (_law_inside(lambda e: e * e), _("eps is squared: add eps itself to the variance, sqrt(var + eps).")),
        (_law_inside(lambda e: e ** 0.5), _("the square root of eps is added to the variance: add eps "
                                            "itself, sqrt(var + eps).")),
        (_law_added, _("eps is added to the result instead of to the variance under the square root.")),
    )
    for law, message in laws:
        if _follows(law, given, shift, tol) is None:
            return message
    return None


def _default_eps(outs, shift):
    """The eps the function's default acts like (the right law solved for eps at the
    default call's output), if that is one positive number for every element."""
    ea, eb = _EPS_FIT
    c, v = _fit_inside(outs[ea] - shift, outs[eb] - shift, ea, eb)
    u = outs[None] - shift
    keep = (c.abs() > 0.1) & torch.isfinite(c) & torch.isfinite(v) & (u.abs() > 1e-12)
    if not bool(keep.any()):
        return None
    e = ((c / u) ** 2 - v)[keep]
    lo, hi = float(e.min()), float(e.max())
    if lo > 0 and hi <= 10 * lo:
        return float(e.median())
    return None


@runner.graded
def check_layer_norm_eps(fn, seed=0):
    """eps is added to the variance inside the square root (default 1e-5)."""
    e1, e2 = _EPS_FIT
    for device, shape, x, ones in _eps_inputs(seed):
        where = _("Input shape {shape}, float64, on {device}").format(shape=shape, device=device)
        raw = {eps: _run(fn, *args) for eps, args in _eps_calls(x, ones)}
        outs = {eps: compare.f64(out) for eps, out in raw.items()}
        broken = [e for e, o in outs.items() if not compare.all_finite(o)]
        if broken:
            flat_only = all(compare.all_finite(o[..., 1:, :]) for o in outs.values())
            messages.fail(
                _("A token whose entries are all equal has variance 0; eps must keep the "
                  "division finite, but the output has nan or inf.") if flat_only else
                _("`{name}` returned nan or inf for ordinary input of shape {shape}.").format(name=NAME, shape=shape),
                where,
                _("eps is missing: divide by sqrt(var + eps), not sqrt(var).") if flat_only else None,
            )
        tol = compare.tol_for(torch.float64, result=raw[e1])
        # a result narrower than float64 is rounded, and fitting the law from two outputs
        # multiplies that rounding by up to about ten in the predictions
        tol = (tol[0] + 10 * compare.rounding(torch.float64, raw[e1]), tol[1])
        changes = not compare.close(outs[e1], outs[e2], tol)
        found = [(s, law) for s in _SHIFTS for law in [_placement(outs, s, tol) if changes else None] if law]
        with_default = {e: o for e, o in outs.items() if e != "scaled"}
        if found and _follows(found[0][1], with_default, found[0][0], tol) is None:
            continue
        if found:  # right for every eps it is given: only the default is wrong
            shift, law = found[0]
            own = _default_eps(outs, shift) if law is _RIGHT else None
            _bad, problem = _follows(law, with_default, shift, tol)
            messages.fail(
                _("`{name}(x, gamma, beta)` should use eps = 1e-5 by default.").format(name=NAME),
                f"{where}: {problem}.",
                _("the default value of eps in the signature is not 1e-5 (your default acts like "
                  "eps = {value}).").format(value=messages.number(own, ".3g")) if own is not None else None,
            )
        likely = None
        for shift in _SHIFTS:
            likely = likely or _eps_message(outs, shift, tol)
        if not changes:
            messages.fail(
                _("Changing eps from {low} to {high} on tokens with variance about 1e-2 does not change "
                  "the output.").format(low=e1, high=e2),
                where,
                likely,
            )
        given = {e: o for e, o in outs.items() if isinstance(e, float)}
        bad, problem = _follows(_RIGHT, given, 1.0, tol)
        messages.fail(
            _("With eps inside the square root the output is c / sqrt(var + eps): fitted at eps = "
              "{low} and {high}, that law predicts the output at eps = {eps}, and `{name}` does not "
              "follow it.").format(low=e1, high=e2, eps=bad, name=NAME),
            f"{where}: {problem}.",
            likely,
        )


# (property, check) for the self-check report; the names are translated when shown.
CHECKS = (
    (N_("shape, dtype and device kept"), check_layer_norm_shape),
    (N_("normalisation over the last axis"), check_layer_norm_normalises),
    (N_("gamma and beta"), check_layer_norm_affine),
    (N_("eps inside the square root"), check_layer_norm_eps),
)


# What each graded check states (its docstring's first line, printed beside its tick
# or cross): marked here to be translated when shown.
PROPERTIES = (
    N_("layer_norm returns a new tensor of x's shape, dtype and device and leaves its inputs alone."),
    N_("Each token is normalised over the last axis with the biased variance."),
    N_("gamma scales and beta shifts the normalised values: gamma * x_hat + beta."),
    N_("eps is added to the variance inside the square root (default 1e-5)."),
)


def report_layer_norm(fn):
    """Print which properties of ``fn`` hold (never raises): for self-checks."""
    return runner.run_report(_("Checking `{name}`:").format(name=NAME), CHECKS, fn)
