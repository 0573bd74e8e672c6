"""Checks for the MLP notebook: ``mlp(x, w1, b1, w2, b2) = gelu(x @ w1 + b1) @ w2 + b2``.

``gelu`` is provided (``andrea_ref.gelu.gelu``), so a GELU mistake from the previous
notebook never shows here. Each property is measured where the others cannot
interfere:

============================  ====================================================
``check_mlp_shape``           a new ``[batch, seq, d_model]`` tensor, dtype and
                              device kept (the only check that judges them), inputs
                              unchanged (square sizes: layout is not judged)
``check_mlp_layout``          weights laid out ``[in, out]``: d_model = 6 and
                              mlp_dim = 10, so a transposed weight fails loudly.
                              Inputs and weights are positive and the biases zero,
                              so every pre-activation is large and GELU acts as the
                              identity: activation and bias mistakes cannot show.
``check_mlp_activation``      GELU between the layers, and only there. Symmetric
                              square weights (so W and W.T agree) and zero biases.
``check_mlp_bias``            both biases added. Symmetric weights and large
                              positive pre-activations, where GELU is the identity.
============================  ====================================================

Values are compared with the float64 reference within rtol = atol = 1e-5, as the
notebook states, whatever dtype the result has.
"""
from __future__ import annotations

import torch

from ..gelu import gelu as _gelu
from ..gelu import gelu_exact as _gelu_exact
from ..mlp import mlp as _reference
from . import _core as C
from ._core import N_, _

NAME = "mlp"
FORBIDDEN = C.Forbidden(
    N_("in this notebook the MLP is written with matrix products, the bias additions and "
       "the provided gelu; andrea_ref.mlp.mlp and andrea_ref.MLP are not allowed."),
    ref_files=("mlp.py", "block.py", "model.py"),
)
_ARGS = ("x", "w1", "b1", "w2", "b2")


def _layout_hint(exc):
    text = str(exc)
    if isinstance(exc, RuntimeError) and ("shape" in text or "size" in text):
        return _("transposed weights. The weights are laid out [in, out]: w1 is "
                 "[d_model, mlp_dim] and w2 is [mlp_dim, d_model], so the layers are "
                 "x @ w1 and h @ w2, with no .T (nn.Linear stores the transpose, [out, in]).")
    return None


def _run(fn, args):
    x = args[0]
    out = C.call(fn, tuple(C._clone(a) for a in args), name=NAME, forbidden=FORBIDDEN, hint=_layout_hint)
    return C.values_result(out, name=NAME, shape=x.shape)


def _symmetric(g, n, low, high):
    a = torch.rand(n, n, generator=g, dtype=torch.float64) * (high - low) + low
    return (a + a.T) / 2


def _variants(args):
    x, w1, b1, w2, b2 = (C.f64(a) for a in args)
    return [
        (_("ReLU is used in place of GELU: apply the provided gelu between the layers."),
         lambda: torch.relu(x @ w1 + b1) @ w2 + b2),
        (_("GELU is applied after the second linear layer. It goes between the layers: "
           "gelu(x @ w1 + b1) @ w2 + b2."),
         lambda: _gelu((x @ w1 + b1) @ w2 + b2)),
        (_("GELU is applied after both linear layers; it belongs only between them."),
         lambda: _gelu(_gelu(x @ w1 + b1) @ w2 + b2)),
        (_("no activation: without GELU the two layers collapse into one linear map."),
         lambda: (x @ w1 + b1) @ w2 + b2),
        (_("the exact erf GELU (torch.nn.functional.gelu's default) is used; the course's "
           "GELU is the tanh approximation: use the provided gelu."),
         lambda: _gelu_exact(x @ w1 + b1) @ w2 + b2),
        (_("b1 is never added: the first layer is x @ w1 + b1."),
         lambda: _gelu(x @ w1) @ w2 + b2),
        (_("b2 is never added: the second layer is h @ w2 + b2."),
         lambda: _gelu(x @ w1 + b1) @ w2),
        (_("neither bias is added: x @ w1 + b1, then h @ w2 + b2."),
         lambda: _gelu(x @ w1) @ w2),
        (_("transposed weights: with [in, out] layout the layers are x @ w1 and h @ w2, no .T."),
         lambda: _gelu(x @ w1.T + b1) @ w2.T + b2),
    ]


def _compare(fn, args, dtype, device, title):
    args = tuple(a.to(device=device, dtype=dtype) for a in args)
    out = _run(fn, args)
    want = _reference(*(C.f64(a) for a in args))
    tol = C.tol_for(dtype, result=out)
    if C.close(out, want, tol):
        return
    C.fail(
        title,
        _("x {x_shape}, w1 {w1_shape}, {dtype}, on {device}: {mismatch}.").format(
            x_shape=tuple(args[0].shape), w1_shape=tuple(args[1].shape), dtype=dtype, device=device,
            mismatch=C.mismatch(out, want, tol)),
        C.diagnose(out, _variants(args), tol, None),
    )


def _dtypes_devices():
    for device in C.devices():
        for dtype in (torch.float64, torch.float32):
            yield dtype, device


@C.graded
def check_mlp_shape(fn, seed=0):
    """mlp returns a new [batch, seq, d_model] tensor with x's dtype and device, inputs unchanged."""
    g = C.generator(seed)
    d = 8
    for dtype, device in _dtypes_devices():
        args = [torch.randn(2, 5, d, generator=g, dtype=torch.float64),
                torch.randn(d, d, generator=g, dtype=torch.float64) / d ** 0.5,
                torch.randn(d, generator=g, dtype=torch.float64),
                torch.randn(d, d, generator=g, dtype=torch.float64) / d ** 0.5,
                torch.randn(d, generator=g, dtype=torch.float64)]
        args = [a.to(device=device, dtype=dtype) for a in args]
        keep = [C._clone(a) for a in args]
        passed = [C._clone(a) for a in args]
        out = C.call(fn, tuple(passed), name=NAME, forbidden=FORBIDDEN, hint=_layout_hint)
        out = C.check_result(out, name=NAME, shape=args[0].shape, dtype=dtype, device=args[0].device)
        for label, before, after in zip(_ARGS, keep, passed):
            if not C.same(before, after):
                C.fail(_("`{name}` changed its argument `{argument}` in place.").format(
                           name=NAME, argument=label),
                       _("A function must leave its inputs as they were; in-place ops are fine "
                         "on tensors you created yourself."))
        if not C.all_finite(out):
            C.fail(_("`{name}` returned nan or inf for ordinary input.").format(name=NAME), "")
        C.check_new_result(fn, tuple(C._clone(a) for a in args),
                           (C._clone(args[0]) * 0.5 + 0.25, *(C._clone(a) for a in args[1:])),
                           name=NAME, forbidden=FORBIDDEN, hint=_layout_hint)


@C.graded
def check_mlp_layout(fn, seed=0):
    """Weights are laid out [in, out]: x @ w1 with w1 [d_model, mlp_dim], h @ w2 with w2 [mlp_dim, d_model]."""
    g = C.generator(seed + 1)
    d, h = 6, 10
    for dtype, device in _dtypes_devices():
        x = torch.rand(2, 3, d, generator=g, dtype=torch.float64) * 0.5 + 1.5
        w1 = torch.rand(d, h, generator=g, dtype=torch.float64) + 1.0
        w2 = torch.rand(h, d, generator=g, dtype=torch.float64) + 1.0
        zeros = torch.zeros
        _compare(fn, (x, w1, zeros(h, dtype=torch.float64), w2, zeros(d, dtype=torch.float64)),
                 dtype, device,
                 _("`{name}` with d_model = {d_model}, mlp_dim = {mlp_dim}, zero biases and positive "
                   "weights (where GELU is the identity) should return (x @ w1) @ w2.").format(
                       name=NAME, d_model=d, mlp_dim=h))


@C.graded
def check_mlp_activation(fn, seed=0):
    """GELU sits between the two linear layers: gelu(x @ w1 + b1) @ w2 + b2."""
    g = C.generator(seed + 2)
    d = 8
    for dtype, device in _dtypes_devices():
        x = torch.randn(2, 5, d, generator=g, dtype=torch.float64)
        w1 = _symmetric(g, d, -1.0, 1.0) * 0.8
        w2 = _symmetric(g, d, -1.0, 1.0) * 0.8
        zero = torch.zeros(d, dtype=torch.float64)
        _compare(fn, (x, w1, zero, w2, zero), dtype, device,
                 _("`{name}` with zero biases should return gelu(x @ w1) @ w2.").format(name=NAME))


@C.graded
def check_mlp_bias(fn, seed=0):
    """Both biases are added: b1 after the first layer, b2 after the second."""
    g = C.generator(seed + 3)
    d = 8
    for dtype, device in _dtypes_devices():
        x = torch.rand(2, 5, d, generator=g, dtype=torch.float64) * 0.5 + 1.5
        w1 = _symmetric(g, d, 1.0, 2.0)
        w2 = _symmetric(g, d, 1.0, 2.0)
        b1 = torch.randn(d, generator=g, dtype=torch.float64)
        b2 = torch.randn(d, generator=g, dtype=torch.float64) * 5
        _compare(fn, (x, w1, b1, w2, b2), dtype, device,
                 _("`{name}` should add b1 after the first layer and b2 after the second (checked "
                   "where every pre-activation is large and positive, so GELU is the identity).").format(
                       name=NAME))


# (property, check) for the self-check report; the names are translated when shown.
CHECKS = (
    (N_("shape, dtype and device kept"), check_mlp_shape),
    (N_("weights laid out [in, out]"), check_mlp_layout),
    (N_("GELU between the layers"), check_mlp_activation),
    (N_("both biases"), check_mlp_bias),
)


# What each graded check states (its docstring's first line, printed beside its tick
# or cross): marked here to be translated when shown.
PROPERTIES = (
    N_("mlp returns a new [batch, seq, d_model] tensor with x's dtype and device, inputs unchanged."),
    N_("Weights are laid out [in, out]: x @ w1 with w1 [d_model, mlp_dim], h @ w2 with w2 [mlp_dim, d_model]."),
    N_("GELU sits between the two linear layers: gelu(x @ w1 + b1) @ w2 + b2."),
    N_("Both biases are added: b1 after the first layer, b2 after the second."),
)


def report_mlp(fn):
    """Print which properties of ``fn`` hold (never raises): for self-checks."""
    return C.run_report(_("Checking `{name}`:").format(name=NAME), CHECKS, fn)
