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

The inputs are drawn in :mod:`.layernorm_inputs`; what the classic mistakes compute (the
variants a wrong answer is compared with, and the laws of where eps goes) is in
:mod:`.layernorm_diagnosis`.
"""
from __future__ import annotations

import re

import torch

from ..i18n import N_
from . import core as C, captured, compare, inputs, messages, runner, watch
from .layernorm_diagnosis import (RIGHT, SHIFTS, default_eps, eps_message, follows,
                                  normalise_variants, normalises_with_own_eps, placement, variant)
from .layernorm_inputs import EPS_FIT, affine_inputs, all_inputs, eps_calls, eps_inputs, normalise_inputs, shape_args
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


_INPLACE_ADVICE = N_("A function must leave its inputs as they were: compute into new tensors (x - mean, "
                     "not x -= mean; in-place ops are fine on tensors you created yourself).")


@runner.graded
def check_layer_norm_shape(fn, seed=0):
    """layer_norm returns a new tensor of x's shape, dtype and device and leaves its inputs alone."""
    g = inputs.generator(seed)
    for device in inputs.devices():
        for dtype, shape in ((torch.float32, (2, 3, 8)), (torch.float64, (4, 6))):
            args = shape_args(g, device, dtype, shape)
            x = args[0]
            out = C.call(fn, inputs.copy_args(args), name=NAME, forbidden=FORBIDDEN, hint=_hint)
            compare.check_result(out, name=NAME, shape=x.shape, dtype=dtype, device=x.device)
            again = (x * 0.5 + 0.25, *args[1:])
            inputs.check_new_result(fn, inputs.copy_args(args), inputs.copy_args(again), name=NAME, forbidden=FORBIDDEN,
                                    hint=_hint)
    inputs.inputs_left_alone(fn, all_inputs(seed), name=NAME, labels=LABELS, advice=_(_INPLACE_ADVICE),
                             hint=_hint)


@runner.graded
def check_layer_norm_normalises(fn, seed=0):
    """Each token is normalised over the last axis with the biased variance."""
    for device, dtype, shape, x, args in normalise_inputs(seed):
        eps = args[3]
        out = _run(fn, *args)
        x_hat = variant(x, eps)
        tol = compare.tol_for(dtype, result=out)
        # With gamma = beta = 1 the answer is x_hat + 1. A slip in the affine step turns
        # that into x_hat or x_hat + 2: that is the affine check's to charge, not here's.
        if any(compare.close(out, x_hat + shift, tol) for shift in SHIFTS):
            continue
        # A fixed eps used instead of the argument (1e-5 written into the formula) is
        # the eps check's to charge: compare with LayerNorm using the eps really added.
        if any(normalises_with_own_eps(out, x, shift, tol) for shift in SHIFTS):
            continue
        likely = compare.diagnose(out, normalise_variants(x, eps), tol, None)
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
    for device, dtype, shape, x, gamma, beta, hat_args, args in affine_inputs(seed):
        own_hat = _run(fn, *hat_args)
        out = _run(fn, *args)
        tol = compare.tol_for(dtype, result=out)
        x_hat = variant(x, 1e-5)
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
             lambda: variant(x * gamma, 1e-5) + beta),
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


@runner.graded
def check_layer_norm_eps(fn, seed=0):
    """eps is added to the variance inside the square root (default 1e-5)."""
    e1, e2 = EPS_FIT
    for device, shape, x, ones in eps_inputs(seed):
        where = _("Input shape {shape}, float64, on {device}").format(shape=shape, device=device)
        raw = {eps: _run(fn, *args) for eps, args in eps_calls(x, ones)}
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
        found = [(s, law) for s in SHIFTS for law in [placement(outs, s, tol) if changes else None] if law]
        with_default = {e: o for e, o in outs.items() if e != "scaled"}
        if found and follows(found[0][1], with_default, found[0][0], tol) is None:
            continue
        if found:  # right for every eps it is given: only the default is wrong
            shift, law = found[0]
            own = default_eps(outs, shift) if law is RIGHT else None
            _bad, problem = follows(law, with_default, shift, tol)
            messages.fail(
                _("`{name}(x, gamma, beta)` should use eps = 1e-5 by default.").format(name=NAME),
                f"{where}: {problem}.",
                _("the default value of eps in the signature is not 1e-5 (your default acts like "
                  "eps = {value}).").format(value=messages.number(own, ".3g")) if own is not None else None,
            )
        likely = None
        for shift in SHIFTS:
            likely = likely or eps_message(outs, shift, tol)
        if not changes:
            messages.fail(
                _("Changing eps from {low} to {high} on tokens with variance about 1e-2 does not change "
                  "the output.").format(low=e1, high=e2),
                where,
                likely,
            )
        given = {e: o for e, o in outs.items() if isinstance(e, float)}
        bad, problem = follows(RIGHT, given, 1.0, tol)
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
