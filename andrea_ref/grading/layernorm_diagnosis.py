"""What the classic LayerNorm mistakes compute, for the "likely mistake" a failed check of
:mod:`.layernorm` names: :func:`variant` (LayerNorm and its mis-implementations, without
the affine step), the eps a function really added, and the laws of how the output depends
on eps, fitted from the function's own outputs (where eps goes)."""
from __future__ import annotations

import torch

from . import compare, runner
from .layernorm_inputs import EPS_FIT, SCALE
from .messages import _

# What every slip in the affine step makes of gamma = beta = 1 (x_hat + shift): right,
# swapped or beta added before scaling (1), beta or both missing (0), gamma added (2).
SHIFTS = (1.0, 0.0, 2.0)

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


def normalises_with_own_eps(out, x, shift, tol):
    """``out`` is LayerNorm of ``x`` (gamma = 1, beta = ``shift``) with the eps the
    function really added, whatever eps it was given."""
    if not compare.all_finite(out):
        return False
    own = _own_eps(out, x, shift)
    if own is None:
        return False
    return compare.close(out, variant(x, own) + shift, tol)


def variant(x, eps, *, dim=-1, unbiased=False, spread="std", eps_outside=False, center=True):
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


def normalise_variants(x, eps):
    variants = []
    for shift in SHIFTS:
        variants += [
            (_("the variance divides by d - 1 (the unbiased estimate, torch.var's and torch.std's "
               "default). LayerNorm uses the biased variance, dividing by d: use .mean of the squared "
               "deviations, or torch.var(..., unbiased=False) / correction=0."),
             lambda s=shift: variant(x, eps, unbiased=True) + s),
        ]
        for dim in range(x.dim() - 1):
            variants.append((
                _("the statistics are taken over dimension {dim}, not the last one. Each token "
                  "is normalised on its own: mean and variance over dim=-1 with keepdim=True.").format(dim=dim),
                lambda s=shift, dim=dim: variant(x, eps, dim=dim) + s))
        variants += [
            (_("mean and variance are taken over the whole tensor. Each token (row) is "
               "normalised on its own: dim=-1, keepdim=True."),
             lambda s=shift: variant(x, eps, dim=None) + s),
            (_("the mean is not subtracted before dividing by the standard deviation."),
             lambda s=shift: variant(x, eps, center=False) + s),
            (_("x is divided by its root mean square (RMSNorm): LayerNorm subtracts the mean first and "
               "divides by the standard deviation of the centred values."),
             lambda s=shift: variant(x, eps, spread="rms") + s),
            (_("the centred values are divided by the variance instead of its square root."),
             lambda s=shift: variant(x, eps, spread="var") + s),
            (_("the spread is the mean absolute deviation, mean(|x - mean|), not the standard "
               "deviation sqrt(mean((x - mean)^2))."),
             lambda s=shift: variant(x, eps, spread="mad") + s),
            (_("the mean absolute deviation, mean(|x - mean|), is used as the variance: the variance "
               "is the mean of the squared deviations, mean((x - mean)^2)."),
             lambda s=shift: variant(x, eps, spread="mad_var") + s),
        ]
    return variants


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


RIGHT = _law_inside(lambda e: e)


def follows(law, outs, shift, tol):
    """``law`` fitted at the two fitting eps predicts every output in ``outs`` ({eps:
    output}, eps None for the default 1e-5): None if it does, else (eps, mismatch) of
    the first that it does not."""
    ea, eb = EPS_FIT
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
    u = outs[EPS_FIT[0]] - shift
    return compare.close(outs["scaled"] - shift, u / SCALE, tol)


def placement(outs, shift, tol):
    """The law eps follows when it sits where it belongs: added to the variance inside
    the square root (c / sqrt(v + eps), whatever c and v), or added to the variance
    when the square root itself is missing (c / (v + eps): the normalisation check
    charges that); ``None`` if neither fits the outputs at the given eps."""
    given = {e: o for e, o in outs.items() if isinstance(e, float)}
    if follows(RIGHT, given, shift, tol) is None:
        return RIGHT
    if follows(_law_outside, given, shift, tol) is None and _added_to_variance(outs, shift, tol):
        return _law_outside
    return None


def eps_message(outs, shift, tol):
    """The likely mistake in the eps placement, named only when the outputs follow that
    mistake's law at every eps; ``None`` otherwise."""
    given = {e: o for e, o in outs.items() if isinstance(e, float)}
    if follows(_law_ignored, given, shift, tol) is None:
        return _("the eps argument is ignored (a fixed number used instead?): add the eps "
                 "you are given to the variance.")
    if follows(_law_outside, given, shift, tol) is None and not _added_to_variance(outs, shift, tol):
        return _("eps is added to the spread itself, outside the square root: divide by "
                 "sqrt(var + eps), not by sqrt(var) + eps.")
    laws = (
        (_law_inside(lambda e: e * e), _("eps is squared: add eps itself to the variance, sqrt(var + eps).")),
        (_law_inside(lambda e: e ** 0.5), _("the square root of eps is added to the variance: add eps "
                                            "itself, sqrt(var + eps).")),
        (_law_added, _("eps is added to the result instead of to the variance under the square root.")),
    )
    for law, message in laws:
        if follows(law, given, shift, tol) is None:
            return message
    return None


def default_eps(outs, shift):
    """The eps the function's default acts like (the right law solved for eps at the
    default call's output), if that is one positive number for every element."""
    ea, eb = EPS_FIT
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
