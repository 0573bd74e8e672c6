"""Checks for the GELU notebook: ``gelu(x)``, the tanh approximation.

============================  ====================================================
``check_gelu_shape``          a new plain tensor of x's shape, dtype and device, in
                              float16, float32 and float64 (the only check that
                              judges dtype and device); x not changed in place, on
                              every input any of the three checks uses
``check_gelu_values``         the tanh formula over [-6, 6] (an even grid, the
                              points near +-2.7 where the exact erf form is
                              farthest away, and seeded random points, all inside
                              the range whatever the seed) within rtol = atol =
                              1e-5, in float32 and float64 alike (the tolerance the
                              notebook states)
``check_gelu_extremes``       finite and right for huge inputs (+-30 ... +-1e4, and
                              float16), where an exp-based tanh overflows: x or 0
                              within rtol = 1e-3, atol = 1e-5
============================  ====================================================

The erf form (4.7e-4 away at |x| = 2.7), the sigmoid approximation (2e-2), ReLU and a
wrong constant all agree with GELU far from zero, so they fail ``check_gelu_values``
only; sqrt(2/pi) rounded to six digits (0.797885) is within the tolerance. A "likely
mistake" is named only when the output matches that mistake's formula within the
tolerance (a mistyped constant: when the formula with the constants fitted to the
output reproduces it). In this notebook GELU is built from elementary operations: an
executed ``aten.gelu`` or a call into ``andrea_ref``'s GELU fails every check.
"""
from __future__ import annotations

import math

import torch

from ..gelu import gelu_exact as _exact
from ..gelu import gelu_tanh_torch as _reference
from ..i18n import N_
from . import core as C, captured, compare, inputs, messages, runner, watch
from .messages import _

NAME = "gelu"
FORBIDDEN = watch.Forbidden(
    N_("in this notebook GELU is built from elementary tensor operations (multiplication, "
       "addition, torch.tanh); torch.nn.functional.gelu, nn.GELU and andrea_ref's gelu are "
       "not allowed, whatever name they are called by."),
    aten_words=("gelu",),
    ref_files=("gelu.py", "kernels" + "/", "mlp.py", "block.py", "model.py"),
)


# The tolerance the notebook states for huge inputs, (rtol, atol); the values are
# compared with compare.py's, rtol = atol = 1e-5 in float32 and float64.
EXTREMES_TOL = (1e-3, 1e-5)


def _run(fn, x):
    """The learner's values (any floating dtype, any device: those are judged by the
    shape check only)."""
    out = C.call(fn, (captured.clone(x),), name=NAME, forbidden=FORBIDDEN)
    return compare.values_result(out, name=NAME, shape=x.shape)


_RANGE = 6.0  # the values check's inputs stay in [-6, 6], as the notebook states


def _grid(seed):
    """[-6, 6]: an even grid, the points near +-2.7 where the erf form is farthest, zero
    and its neighbours, and 300 seeded random points, all inside the range whatever
    the seed."""
    g = inputs.generator(seed)
    xs = torch.cat([
        torch.linspace(-_RANGE, _RANGE, 1201, dtype=torch.float64, device="cpu"),
        torch.tensor([-2.7, 2.7, -2.70, 2.7001, 0.0, -1e-3, 1e-3], dtype=torch.float64, device="cpu"),
        inputs.uniform(g, (300,), -_RANGE, _RANGE),
    ])
    return xs.reshape(2, -1)


_BIG = (-1e4, -500.0, -60.0, -30.0, 30.0, 60.0, 500.0, 1e4)
_BIG_HALF = (-300.0, -60.0, -30.0, 30.0, 60.0, 300.0)


def _extremes_inputs():
    for device in inputs.devices():
        for dtype, values in ((torch.float32, _BIG), (torch.float64, _BIG), (torch.float16, _BIG_HALF)):
            x64 = torch.tensor(values, dtype=torch.float64, device="cpu")
            yield device, dtype, x64, x64.to(device=device, dtype=dtype)


def _values_inputs(seed):
    x64 = _grid(seed)
    for device in inputs.devices():
        for dtype in (torch.float32, torch.float64):
            yield device, dtype, x64.to(device=device, dtype=dtype)


_SHAPE_CASES = ((torch.float32, (3, 5, 7), 2.0), (torch.float64, (10,), 2.0),
                (torch.float32, (2, 0, 4), 2.0), (torch.float16, (4, 6), 0.5))


def _shape_inputs(seed):
    g = inputs.generator(seed)
    for device in inputs.devices():
        for dtype, shape, scale in _SHAPE_CASES:
            # float16 inputs stay small: overflow is the extremes check's business
            yield device, dtype, shape, inputs.normal(g, shape, scale).to(device=device, dtype=dtype)


def _all_inputs(seed):
    for *_ignored, x in _shape_inputs(seed):
        yield (x,)
    for *_ignored, x in _values_inputs(seed):
        yield (x,)
    for *_ignored, x in _extremes_inputs():
        yield (x,)


def _tanh_form(x, half=0.5, c=math.sqrt(2 / math.pi), k=0.044715):
    return half * x * (1 + torch.tanh(c * (x + k * x ** 3)))


def _variants(x):
    x = compare.f64(x)
    c = math.sqrt(2 / math.pi)
    return [
        (_("the exact erf form x * Phi(x). The course uses the tanh approximation: "
           "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."), lambda: _exact(x)),
        (_("the sigmoid approximation x * sigmoid(1.702 x). The course uses the tanh "
           "approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."),
         lambda: x * torch.sigmoid(1.702 * x)),
        (_("SiLU, x * sigmoid(x), instead of GELU."), lambda: x * torch.sigmoid(x)),
        (_("ReLU (max(x, 0)) instead of GELU."), lambda: torch.clamp(x, min=0)),
        (_("the output is the input itself: GELU multiplies x by 0.5 (1 + tanh(...))."), lambda: x),
        (_("the constant sqrt(2/pi) is written as sqrt(2*pi) or sqrt(pi/2); it is about 0.7979."),
         lambda: _tanh_form(x, c=math.sqrt(2 * math.pi))),
        (_("the constant sqrt(2/pi) is written as sqrt(2*pi) or sqrt(pi/2); it is about 0.7979."),
         lambda: _tanh_form(x, c=math.sqrt(math.pi / 2))),
        (_("the square root is missing: the factor is sqrt(2/pi) ~ 0.7979, not 2/pi."),
         lambda: _tanh_form(x, c=2 / math.pi)),
        (_("the cubic term is x^2 instead of x^3."),
         lambda: 0.5 * x * (1 + torch.tanh(c * (x + 0.044715 * x ** 2)))),
        (_("the cubic term 0.044715 x^3 is missing inside the tanh."), lambda: _tanh_form(x, k=0.0)),
        (_("sqrt(2/pi) multiplies only x, not the cubic term: the argument of tanh is "
           "sqrt(2/pi) (x + 0.044715 x^3)."), lambda: 0.5 * x * (1 + torch.tanh(c * x + 0.044715 * x ** 3))),
        (_("the factor 0.5 is missing."), lambda: _tanh_form(x, half=1.0)),
        (_("the factor x is missing: GELU is x times 0.5 (1 + tanh(...))."),
         lambda: 0.5 * (1 + torch.tanh(c * (x + 0.044715 * x ** 3)))),
        (_("the sign is flipped: 1 + tanh(...), not 1 - tanh(...)."),
         lambda: 0.5 * x * (1 - torch.tanh(c * (x + 0.044715 * x ** 3)))),
    ]


_CONSTANTS = (0.5, math.sqrt(2 / math.pi), 0.044715)


def _fitted_constants(out, x):
    """(half, c, k) with which ``half x (1 + tanh(c (x + k x^3)))`` reproduces ``out``
    (Gauss-Newton from the right constants, in float64), or ``None``."""
    x, y = compare.f64(x).reshape(-1), compare.f64(out).reshape(-1)
    if not compare.all_finite(y):
        return None
    theta = torch.tensor(_CONSTANTS, dtype=torch.float64, device="cpu")
    for _step in range(50):
        h, c, k = theta
        z = c * (x + k * x ** 3)
        t = torch.tanh(z)
        r = h * x * (1 + t) - y
        dt = h * x * (1 - t * t)
        jac = torch.stack([x * (1 + t), dt * (x + k * x ** 3), dt * c * x ** 3], dim=1)
        step = torch.linalg.lstsq(jac, -r.unsqueeze(1)).solution.squeeze(1)
        if not bool(torch.isfinite(step).all()):
            return None
        theta = theta + step
        if float(step.abs().max()) < 1e-13:
            break
    return tuple(float(v) for v in theta)


def _constant_message(out, x, tol):
    """Which constant of the tanh formula is written differently, named only when the
    formula with the fitted constants reproduces the output within ``tol``."""
    fitted = _fitted_constants(out, x)
    if fitted is None or not compare.close(out, _tanh_form(compare.f64(x), *fitted), tol):
        return None
    names = ("0.5", "sqrt(2/pi) ~ 0.7978846", "0.044715")
    wrong = [(n, v) for n, v, right in zip(names, fitted, _CONSTANTS)
             if abs(v - right) > 1e-4 * abs(right)]
    if not wrong:
        return None
    return _("the constants of the formula differ: {constants}.").format(constants="; ".join(
        _("{name} is written as {value}").format(name=n, value=messages.number(v, ".6g")) for n, v in wrong))


@runner.graded
def check_gelu_shape(fn, seed=0):
    """gelu returns a new tensor of x's shape, dtype and device and leaves x alone."""
    for device, dtype, shape, x in _shape_inputs(seed):
        out = C.call(fn, (captured.clone(x),), name=NAME, forbidden=FORBIDDEN)
        compare.check_result(out, name=NAME, shape=x.shape, dtype=dtype, device=x.device)
        if x.numel():
            inputs.check_new_result(fn, (captured.clone(x),), (captured.clone(x) * 0.5 + 0.25,),
                                    name=NAME, forbidden=FORBIDDEN)
    inputs.inputs_left_alone(fn, _all_inputs(seed), name=NAME, labels=("x",),
                             advice=_("Compute into new tensors (0.5 * x * ..., not x.mul_(0.5)); in-place ops "
                                      "are fine on tensors you created yourself."))


@runner.graded
def check_gelu_values(fn, seed=0):
    """gelu is the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    for device, dtype, x in _values_inputs(seed):
        out = _run(fn, x)
        # compare with the float64 formula at the inputs the learner really saw
        want = _reference(compare.f64(x))
        tol = compare.tol_for(dtype, result=out)
        if compare.close(out, want, tol):
            continue
        near = (max(tol[0], 1e-6), max(tol[1], 1e-6))
        likely = compare.diagnose(out, _variants(x), near, None) or _constant_message(out, x, near)
        messages.fail(
            _("`{name}` does not match 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).").format(name=NAME),
            _("Inputs in [-6, 6], {dtype}, on {device}: {mismatch}.").format(
                dtype=dtype, device=device, mismatch=compare.mismatch(out, want, tol)),
            likely,
        )


def _extremes_message(got, x, tol):
    """What the (finite) output for huge inputs shows, named only from what it is."""
    pos = x > 0
    top, xs = got[pos], x[pos]
    if compare.close(top, 2 * xs, tol):
        return _("the output is about 2 x for large x: the factor 0.5 is missing.")
    if bool((top == top[0]).all()):
        value = float(top[0])
        if abs(value - 1.0) <= 1e-3:
            return _("the output is 1 for every large x: the factor x is missing, GELU is x times "
                     "0.5 (1 + tanh(...)).")
        if 3.0 <= value < 0.9 * float(xs.min()) and abs(float(_reference(torch.tensor(value, dtype=torch.float64, device="cpu")))
                                                         - value) < 1e-3:
            return _("the output stops growing at {value} for large x, as if x were clamped there: GELU(x) "
                     "is about x; clamp the argument of tanh if anything, never x.").format(value=messages.number(value, ".4g"))
    return None


@runner.graded
def check_gelu_extremes(fn, seed=0):
    """gelu stays finite for huge inputs: about x for large x and 0 for very negative x."""
    for device, dtype, x64, x in _extremes_inputs():
        out = _run(fn, x)
        want = torch.clamp(compare.f64(x), min=0)  # GELU's limits: x and 0
        tol = (EXTREMES_TOL[0] + compare.rounding(dtype, out), EXTREMES_TOL[1])
        if compare.close(out, want, tol):
            continue
        got = compare.f64(out)
        likely = None
        if not compare.all_finite(out):
            likely = _("an intermediate overflows to inf, and inf/inf or inf - inf gives nan: torch.tanh "
                       "handles huge arguments, a tanh written with exp, (e^z - e^-z)/(e^z + e^-z), "
                       "does not.")
        else:
            likely = _extremes_message(got, compare.f64(x), tol)
        messages.fail(
            _("For inputs as large as +-{largest} ({dtype}, on {device}), "
              "`{name}` should return about x for x > 0 and 0 for x < 0.").format(
                  largest=messages.number(captured.item(x64.abs().max())), dtype=dtype, device=device, name=NAME),
            f"{compare.mismatch(out, want, tol)}.",
            likely,
        )


# (property, check) for the self-check report; the names are translated when shown.
CHECKS = (
    (N_("shape, dtype and device kept"), check_gelu_shape),
    (N_("the tanh formula"), check_gelu_values),
    (N_("huge inputs"), check_gelu_extremes),
)


# What each graded check states (its docstring's first line, printed beside its tick
# or cross): marked here to be translated when shown.
PROPERTIES = (
    N_("gelu returns a new tensor of x's shape, dtype and device and leaves x alone."),
    N_("gelu is the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."),
    N_("gelu stays finite for huge inputs: about x for large x and 0 for very negative x."),
)


def report_gelu(fn):
    """Print which properties of ``fn`` hold (never raises): for self-checks."""
    return runner.run_report(_("Checking `{name}`:").format(name=NAME), CHECKS, fn)
