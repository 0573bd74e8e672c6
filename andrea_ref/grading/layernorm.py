"""Checks for the LayerNorm notebook: ``layer_norm(x, gamma, beta, eps=1e-5)``.

Four properties, one graded cell each, built so that one classic mistake fails one
property and no other:

============================  ====================================================
``check_layer_norm_shape``    a new plain tensor of x's shape, dtype and device
                              (the only check that judges dtype and device); inputs
                              left unchanged
``check_layer_norm_normalises``  mean and *biased* variance over the *last* axis.
                              Run with gamma = beta = 1, so a mistake in the affine
                              step cannot show here, and with eps tiny next to the
                              variance, so eps placement cannot either; a function
                              that adds its own fixed eps instead of the argument
                              is measured against LayerNorm with that eps.
``check_layer_norm_affine``   ``gamma * x_hat + beta``, measured against the
                              learner's *own* x_hat, so a wrong normalisation
                              cannot show here.
``check_layer_norm_eps``      eps inside the square root, measured by relations the
                              right placement satisfies whatever the variance
                              convention or axis: ``LN(s x, s^2 eps) = LN(x, eps)``.
============================  ====================================================

Values are compared within rtol = atol = 1e-5 (``_core.FLOAT32_TOL``/``FLOAT64_TOL``,
as the notebook states), whatever dtype the result has. In this notebook LayerNorm is
built from elementary operations: any executed ATen norm op or a call into
``andrea_ref``'s LayerNorm fails every check.
"""
from __future__ import annotations

import torch

from ..layernorm import layer_norm as _reference
from . import _core as C
from ._core import N_, _

NAME = "layer_norm"
FORBIDDEN = C.Forbidden(
    N_("in this notebook LayerNorm is built from elementary tensor operations (mean, "
       "subtraction, multiplication, square root); torch.nn.functional.layer_norm, "
       "nn.LayerNorm, other library norms and andrea_ref's layer_norm are not allowed, "
       "whatever name they are called by."),
    aten_words=("layer_norm", "group_norm", "batch_norm", "instance_norm", "rms_norm"),
    ref_files=("layernorm.py", "block.py", "model.py"),
)

_SHAPES = ((4, 8), (2, 3, 8), (3, 5, 16))  # small d: the unbiased variance shows


def _run(fn, x, gamma, beta, *eps):
    """The learner's values (any floating dtype, any device: those are judged by the
    shape check only)."""
    out = C.call(fn, (C._clone(x), C._clone(gamma), C._clone(beta), *eps), name=NAME, forbidden=FORBIDDEN)
    return C.values_result(out, name=NAME, shape=x.shape)


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
    k = ((C.f64(out) - shift) * c).sum(dim=-1) / (c * c).sum(dim=-1)
    e = (1.0 / (k * k) - var).reshape(-1).median().item()
    return e if 0.0 <= e <= _OWN_EPS_MAX else None


def _normalises_with_own_eps(out, x, shift, tol):
    """``out`` is LayerNorm of ``x`` (gamma = 1, beta = ``shift``) with the eps the
    function really added, whatever eps it was given."""
    own = _own_eps(out, x, shift)
    if own is None:
        return False
    ones = torch.ones(x.shape[-1], dtype=torch.float64)
    return C.close(out, _reference(x, ones, 0 * ones, own) + shift, tol)


def _rows(g, shape, scale, offset):
    """Random rows, each with its own spread (uniform in ``scale``) and mean."""
    lo, hi = scale
    row_shape = (*shape[:-1], 1)
    spread = torch.rand(row_shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
    centre = (torch.rand(row_shape, generator=g, dtype=torch.float64) * 2 - 1) * offset
    return torch.randn(shape, generator=g, dtype=torch.float64) * spread + centre


def _variant(x, eps, *, dim=-1, unbiased=False, eps_outside=False, center=True, sqrt=True):
    """A (mis)implementation of LayerNorm without the affine step, in float64."""
    x = C.f64(x)
    dims = dim if dim is not None else tuple(range(x.dim()))
    mean = x.mean(dim=dims, keepdim=True)
    c = x - mean
    var = c.pow(2).sum(dim=dims, keepdim=True) / (c[..., :].numel() / mean.numel() - (1 if unbiased else 0))
    if not center:
        c = x
    if not sqrt:
        return c / (var + eps)
    if eps_outside:
        return c / (var.sqrt() + eps)
    return c / (var + eps).sqrt()


def _cases(seed, dtypes=(torch.float64, torch.float32)):
    g = C.generator(seed)
    for device in C.devices():
        for dtype in dtypes:
            for shape in _SHAPES:
                yield device, dtype, shape, g


@C.graded
def check_layer_norm_shape(fn, seed=0):
    """layer_norm returns a new tensor of x's shape, dtype and device and leaves its inputs alone."""
    g = C.generator(seed)
    for device in C.devices():
        for dtype, shape in ((torch.float32, (2, 3, 8)), (torch.float64, (4, 6))):
            x = _rows(g, shape, (0.5, 2.0), 1.0).to(device=device, dtype=dtype)
            d = shape[-1]
            gamma = (torch.rand(d, generator=g, dtype=torch.float64) + 0.5).to(device=device, dtype=dtype)
            beta = torch.randn(d, generator=g, dtype=torch.float64).to(device=device, dtype=dtype)
            keep = [C._clone(t) for t in (x, gamma, beta)]
            args = [C._clone(t) for t in (x, gamma, beta)]
            out = C.call(fn, (*args, 1e-5), name=NAME, forbidden=FORBIDDEN)
            out = C.check_result(out, name=NAME, shape=x.shape, dtype=dtype, device=x.device)
            for label, before, after in zip(("x", "gamma", "beta"), keep, args):
                if not C.same(before, after):
                    C.fail(
                        _("`{name}` changed its argument `{argument}` in place.").format(
                            name=NAME, argument=label),
                        _("A function must leave its inputs as they were: compute into new "
                          "tensors (x - mean, not x -= mean; in-place ops are fine on tensors "
                          "you created yourself)."),
                    )
            if not C.all_finite(out):
                C.fail(_("`{name}` returned nan or inf for ordinary input of shape {shape}.").format(
                    name=NAME, shape=shape), "")
            again = [C._clone(t) for t in (x * 0.5 + 0.25, gamma, beta)]
            C.check_new_result(fn, (*[C._clone(t) for t in (x, gamma, beta)], 1e-5), (*again, 1e-5),
                               name=NAME, forbidden=FORBIDDEN)


@C.graded
def check_layer_norm_normalises(fn, seed=0):
    """Each token is normalised over the last axis with the biased variance."""
    for device, dtype, shape, g in _cases(seed):
        x = _rows(g, shape, (2.0, 6.0), 3.0)
        d = shape[-1]
        ones = torch.ones(d, dtype=torch.float64)
        eps = 1e-8  # tiny next to the variance: eps placement is checked elsewhere
        out = _run(fn, x.to(device=device, dtype=dtype), ones.to(device=device, dtype=dtype),
                   ones.to(device=device, dtype=dtype), eps)
        zeros = torch.zeros(d, dtype=torch.float64)
        x_hat = _reference(x, ones, zeros, eps)
        tol = C.tol_for(dtype, result=out)
        # With gamma = beta = 1 the answer is x_hat + 1. A learner whose only slip is a
        # missing beta returns x_hat: that is charged to the affine check, not here.
        if C.close(out, x_hat + 1, tol) or C.close(out, x_hat, tol):
            continue
        # A fixed eps used instead of the argument (1e-5 written into the formula) is
        # the eps check's to charge: compare with LayerNorm using the eps really added.
        if any(_normalises_with_own_eps(out, x, shift, tol) for shift in (1.0, 0.0)):
            continue
        variants = []
        for shift in (1.0, 0.0):
            variants += [
                (_("the variance divides by d - 1 (the unbiased estimate, torch.var's default). "
                   "LayerNorm uses the biased variance, dividing by d: use .mean of the squared "
                   "deviations, or torch.var(..., unbiased=False) / correction=0."),
                 lambda s=shift: _variant(x, eps, unbiased=True) + s),
            ]
            for dim in range(len(shape) - 1):
                variants.append((
                    _("the statistics are taken over dimension {dim}, not the last one. Each token "
                      "is normalised on its own: mean and variance over dim=-1 with keepdim=True.").format(
                          dim=dim),
                    lambda s=shift, dim=dim: _variant(x, eps, dim=dim) + s))
            variants += [
                (_("mean and variance are taken over the whole tensor. Each token (row) is "
                   "normalised on its own: dim=-1, keepdim=True."),
                 lambda s=shift: _variant(x, eps, dim=None) + s),
                (_("the mean is not subtracted before dividing by the standard deviation."),
                 lambda s=shift: _variant(x, eps, center=False) + s),
                (_("the centred values are divided by the variance instead of its square root."),
                 lambda s=shift: _variant(x, eps, sqrt=False) + s),
            ]
        likely = C.diagnose(out, variants, tol, None)
        C.fail(
            _("With gamma = beta = 1, `{name}` should return x_hat + 1, where x_hat = (x - mean) / "
              "sqrt(var + eps) over the last dimension.").format(name=NAME),
            _("Input shape {shape}, {dtype}, on {device}: {mismatch}.").format(
                shape=shape, dtype=dtype, device=device, mismatch=C.mismatch(out, x_hat + 1, tol)),
            likely,
        )


@C.graded
def check_layer_norm_affine(fn, seed=0):
    """gamma scales and beta shifts the normalised values: gamma * x_hat + beta."""
    for device, dtype, shape, g in _cases(seed + 1):
        d = shape[-1]
        x = _rows(g, shape, (1.0, 3.0), 2.0)
        sign = torch.where(torch.rand(d, generator=g) < 0.3, -1.0, 1.0).double()
        gamma = (torch.rand(d, generator=g, dtype=torch.float64) * 1.5 + 0.5) * sign
        beta = torch.randn(d, generator=g, dtype=torch.float64)
        ones, zeros = torch.ones(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)
        on = lambda t: t.to(device=device, dtype=dtype)  # noqa: E731
        own_hat = _run(fn, on(x), on(ones), on(zeros), 1e-5)
        out = _run(fn, on(x), on(gamma), on(beta), 1e-5)
        tol = C.tol_for(dtype, result=out)
        expected = C._add(C._mul(C.f64(own_hat), gamma), beta)
        # A result narrower than x (float16 for float32, say) has own_hat rounded too,
        # and gamma carries that rounding into `expected`: allow it.
        rounding = C.rounding(dtype, own_hat)
        if rounding:
            tol = (tol[0], tol[1] + rounding * C._item(C._amax(C._abs_f(C._mul(C.f64(own_hat), gamma)))))
        spread_ok = bool((C.f64(own_hat).std(dim=-1) > 0.1).all())
        if spread_ok and C.close(out, expected, tol):
            continue
        x_hat = _reference(x, ones, zeros, 1e-5)
        variants = [
            (_("gamma and beta are swapped: the result must be gamma * x_hat + beta."),
             lambda: beta * x_hat + gamma),
            (_("gamma and beta are swapped: the result must be gamma * x_hat + beta."),
             lambda: beta * C.f64(own_hat) + gamma),
            (_("gamma is never applied: multiply the normalised values by gamma."),
             lambda: x_hat + beta),
            (_("beta is never applied: add beta after scaling by gamma."),
             lambda: gamma * x_hat),
            (_("neither gamma nor beta is applied: return gamma * x_hat + beta."),
             lambda: x_hat),
            (_("beta is added before scaling: the result must be gamma * x_hat + beta, "
               "not gamma * (x_hat + beta)."),
             lambda: gamma * (x_hat + beta)),
        ]
        likely = C.diagnose(out, variants, tol, None)
        if likely is None and not spread_ok:
            likely = _("with gamma = 1 and beta = 0 the output does not vary within a token, "
                       "so the normalised values never reach the output.")
        C.fail(
            _("`{name}(x, gamma, beta)` should equal gamma * `{name}(x, 1, 0)` + beta.").format(name=NAME),
            _("Input shape {shape}, {dtype}, on {device}: {mismatch}.").format(
                shape=shape, dtype=dtype, device=device, mismatch=C.mismatch(out, expected, tol)),
            likely,
        )


@C.graded
def check_layer_norm_eps(fn, seed=0):
    """eps is added to the variance inside the square root (default 1e-5)."""
    g = C.generator(seed + 2)
    for device in C.devices():
        for shape in ((6, 8), (2, 3, 16)):
            d = shape[-1]
            # rows with variance comparable to eps, where its placement matters
            x = _rows(g, shape, (0.05, 0.2), 1.0)
            ones = torch.ones(d, dtype=torch.float64, device=device)
            xd = x.to(device)
            eps, s = 1e-2, 10.0
            where = _("Input shape {shape}, float64, on {device}").format(shape=shape, device=device)

            flat = xd.clone()
            flat[..., 0, :] = 0.75  # one token whose entries are all equal: variance 0
            out = _run(fn, flat, ones, ones, eps)
            if not C.all_finite(out):
                C.fail(
                    _("A token whose entries are all equal has variance 0; eps must keep the "
                      "division finite, but the output has nan or inf."),
                    where,
                    _("eps is missing: divide by sqrt(var + eps), not sqrt(var)."),
                )

            base = _run(fn, xd, ones, ones, eps)
            small = _run(fn, xd, ones, ones, 1e-6)
            tol = C.tol_for(torch.float64, result=base)
            if C.close(base, small, tol):
                C.fail(
                    _("Changing eps from 1e-6 to 1e-2 on tokens with variance about 1e-2 "
                      "does not change the output."),
                    where,
                    _("the eps argument is ignored (a fixed number used instead?): add the eps "
                      "you are given to the variance."),
                )

            scaled = _run(fn, xd * s, ones, ones, eps * s * s)
            if not C.close(scaled, base, tol):
                outside = _run(fn, xd * s, ones, ones, eps * s)
                likely = None
                if C.close(outside, base, tol):
                    likely = _("eps is added outside the square root (to the standard deviation): "
                               "divide by sqrt(var + eps), not sqrt(var) + eps.")
                C.fail(
                    _("With eps inside the square root, scaling x by s and eps by s**2 leaves "
                      "the output unchanged; here `{name}(10 x, 1, 1, 1.0)` differs from "
                      "`{name}(x, 1, 1, 0.01)`.").format(name=NAME),
                    f"{where}: {C.mismatch(scaled, base, tol)}.",
                    likely or _("eps is not added to the variance inside the square root."),
                )

            default = _run(fn, xd, ones, ones)
            if not C.close(default, _run(fn, xd, ones, ones, 1e-5), tol):
                C.fail(
                    _("`{name}(x, gamma, beta)` should use eps = 1e-5 by default.").format(name=NAME),
                    where,
                    _("the default value of eps in the signature is not 1e-5."),
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
    return C.run_report(_("Checking `{name}`:").format(name=NAME), CHECKS, fn)
