"""Checks for the GELU notebook: ``gelu(x)``, the tanh approximation.

============================  ====================================================
``check_gelu_shape``          a new plain tensor of x's shape, dtype and device, in
                              float16, float32 and float64 (the only check that
                              judges dtype and device); input left unchanged
``check_gelu_values``         the tanh formula over [-6, 6] (including +-2.7, where
                              the exact erf form is farthest away) within
                              rtol = atol = 1e-5, in float32 and float64 alike (the
                              tolerance the notebook states)
``check_gelu_extremes``       finite and right for huge inputs (+-30 ... +-1e4, and
                              float16), where an exp-based tanh overflows: x or 0
                              within rtol = 1e-3, atol = 1e-5
============================  ====================================================

The erf form (4.7e-4 away at |x| = 2.7), the sigmoid approximation (2e-2), ReLU and a
wrong constant all agree with GELU far from zero, so they fail ``check_gelu_values``
only; sqrt(2/pi) rounded to six digits (0.797885) is within the tolerance. In this
notebook GELU is built from elementary operations: an executed ``aten.gelu`` or a call
into ``andrea_ref``'s GELU fails every check.
"""
from __future__ import annotations

import math

import torch

from ..gelu import gelu_exact as _exact
from ..gelu import gelu_tanh_torch as _reference
from . import _core as C
from ._core import N_, _

NAME = "gelu"
FORBIDDEN = C.Forbidden(
    N_("in this notebook GELU is built from elementary tensor operations (multiplication, "
       "addition, torch.tanh); torch.nn.functional.gelu, nn.GELU and andrea_ref's gelu are "
       "not allowed, whatever name they are called by."),
    aten_words=("gelu",),
    ref_files=("gelu.py", "kernels" + "/", "mlp.py", "block.py", "model.py"),
)


# The tolerance the notebook states for huge inputs, (rtol, atol); the values are
# compared with _core's, rtol = atol = 1e-5 in float32 and float64.
EXTREMES_TOL = (1e-3, 1e-5)


def _run(fn, x):
    """The learner's values (any floating dtype, any device: those are judged by the
    shape check only)."""
    out = C.call(fn, (C._clone(x),), name=NAME, forbidden=FORBIDDEN)
    return C.values_result(out, name=NAME, shape=x.shape)


def _grid(seed):
    g = C.generator(seed)
    xs = torch.cat([
        torch.linspace(-6, 6, 1201, dtype=torch.float64),
        torch.tensor([-2.7, 2.7, -2.70, 2.7001, 0.0, -1e-3, 1e-3], dtype=torch.float64),
        torch.randn(300, generator=g, dtype=torch.float64) * 3,
    ])
    return xs.reshape(2, -1)


def _variants(x):
    x = C.f64(x)
    tanh = lambda c, k: 0.5 * x * (1 + torch.tanh(c * (x + k * x ** 3)))  # noqa: E731
    return [
        (_("the exact erf form x * Phi(x). The course uses the tanh approximation: "
           "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."), lambda: _exact(x)),
        (_("the sigmoid approximation x * sigmoid(1.702 x). The course uses the tanh "
           "approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."),
         lambda: x * torch.sigmoid(1.702 * x)),
        (_("ReLU (max(x, 0)) instead of GELU."), lambda: torch.clamp(x, min=0)),
        (_("the constant sqrt(2/pi) is written as sqrt(2*pi) or sqrt(pi/2); it is about 0.7979."),
         lambda: tanh(math.sqrt(2 * math.pi), 0.044715)),
        (_("the constant sqrt(2/pi) is written as sqrt(2*pi) or sqrt(pi/2); it is about 0.7979."),
         lambda: tanh(math.sqrt(math.pi / 2), 0.044715)),
        (_("the square root is missing: the factor is sqrt(2/pi) ~ 0.7979, not 2/pi."),
         lambda: tanh(2 / math.pi, 0.044715)),
        (_("the cubic term is x^2 instead of x^3."), lambda: 0.5 * x * (1 + torch.tanh(
            math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 2)))),
        (_("the factor 0.5 is missing."), lambda: 2 * _reference(x)),
    ]


@C.graded
def check_gelu_shape(fn, seed=0):
    """gelu returns a new tensor of x's shape, dtype and device and leaves x alone."""
    g = C.generator(seed)
    for device in C.devices():
        for dtype, shape, scale in ((torch.float32, (3, 5, 7), 2.0), (torch.float64, (10,), 2.0),
                                    (torch.float32, (2, 0, 4), 2.0), (torch.float16, (4, 6), 0.5)):
            # float16 inputs stay small: overflow is the extremes check's business
            x = (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(device=device, dtype=dtype)
            keep, arg = C._clone(x), C._clone(x)
            out = C.call(fn, (arg,), name=NAME, forbidden=FORBIDDEN)
            out = C.check_result(out, name=NAME, shape=x.shape, dtype=dtype, device=x.device)
            if not C.same(keep, arg):
                C.fail(
                    _("`{name}` changed its argument `{argument}` in place.").format(name=NAME, argument="x"),
                    _("Compute into new tensors (0.5 * x * ..., not x.mul_(0.5)); in-place ops "
                      "are fine on tensors you created yourself."),
                )
            if not C.all_finite(out):
                C.fail(_("`{name}` returned nan or inf for ordinary input of shape {shape}.").format(
                    name=NAME, shape=shape), "")
            if x.numel():
                C.check_new_result(fn, (C._clone(x),), (C._clone(x) * 0.5 + 0.25,),
                                   name=NAME, forbidden=FORBIDDEN)


@C.graded
def check_gelu_values(fn, seed=0):
    """gelu is the tanh approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x64 = _grid(seed)
    for device in C.devices():
        for dtype in (torch.float32, torch.float64):
            x = x64.to(device=device, dtype=dtype)
            out = _run(fn, x)
            # compare with the float64 formula at the inputs the learner really saw
            want = _reference(C.f64(x))
            tol = C.tol_for(dtype, result=out)
            if C.close(out, want, tol):
                continue
            likely = C.diagnose(out, _variants(x), (1e-4, 1e-4), None)
            if likely is None and C.close(out, want, (1e-2, 1e-2)):
                likely = _("close to GELU but not the tanh formula: check the constants "
                           "sqrt(2/pi) ~ 0.7978845608 and 0.044715.")
            C.fail(
                _("`{name}` does not match 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).").format(name=NAME),
                _("Inputs in [-6, 6], {dtype}, on {device}: {mismatch}.").format(
                    dtype=dtype, device=device, mismatch=C.mismatch(out, want, tol)),
                likely,
            )


@C.graded
def check_gelu_extremes(fn, seed=0):
    """gelu stays finite for huge inputs: about x for large x and 0 for very negative x."""
    big = torch.tensor([-1e4, -500.0, -60.0, -30.0, 30.0, 60.0, 500.0, 1e4], dtype=torch.float64)
    for device in C.devices():
        for dtype, x64 in ((torch.float32, big), (torch.float64, big),
                           (torch.float16, torch.tensor([-300.0, -60.0, -30.0, 30.0, 60.0, 300.0],
                                                        dtype=torch.float64))):
            x = x64.to(device=device, dtype=dtype)
            out = _run(fn, x)
            want = torch.clamp(C.f64(x), min=0)  # GELU's limits: x and 0
            tol = (EXTREMES_TOL[0] + C.rounding(dtype, out), EXTREMES_TOL[1])
            if C.all_finite(out) and C.close(out, want, tol):
                continue
            C.fail(
                _("For inputs as large as +-{largest} ({dtype}, on {device}), "
                  "`{name}` should return about x for x > 0 and 0 for x < 0.").format(
                      largest=f"{C._item(x64.abs().max()):g}", dtype=dtype, device=device, name=NAME),
                f"{C.mismatch(out, want, tol)}.",
                _("an intermediate overflows: torch.tanh handles huge arguments, a tanh written "
                  "with exp (e^z - e^-z)/(e^z + e^-z) gives inf/inf = nan.")
                if not C.all_finite(out) else None,
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
    return C.run_report(_("Checking `{name}`:").format(name=NAME), CHECKS, fn)
