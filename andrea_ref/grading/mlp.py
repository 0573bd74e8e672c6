"""Checks for the MLP notebook: ``mlp(x, w1, b1, w2, b2) = gelu(x @ w1 + b1) @ w2 + b2``.

``gelu`` is provided (``andrea_ref.gelu.gelu``), so a GELU mistake from the previous
notebook never shows here. Each property is measured where the others cannot
interfere: a wrong activation costs the activation's points only, wrong biases the
biases' only, transposed weights the layout's only.

============================  ====================================================
``check_mlp_shape``           a new ``[batch, seq, d_model]`` tensor, dtype and
                              device kept (the only check that judges them), no
                              argument changed in place, on every input any of the
                              four checks uses
``check_mlp_layout``          weights laid out ``[in, out]``. With permutation
                              matrices P and Q as weights and zero biases, the
                              right layout gives ``f(x P) Q = f(x) P Q`` for
                              *any* activation f that acts on each feature alike
                              (GELU, tanh, ReLU, none, or one after the second
                              layer), so: ``mlp(x, P, 0, Q, 0)`` must equal
                              ``mlp(x, I, 0, I, 0) @ P @ Q``, where the latter
                              must tell the features apart. A transposed or
                              swapped weight gives another permutation.
``check_mlp_activation``      GELU between the two layers, and only there: against
                              the float64 reference, with zero biases (bias slips
                              cannot show) and ``w1 = w2 = S`` symmetric (so
                              ``S.T = S`` and a transposed or swapped weight
                              cannot show either).
``check_mlp_bias``            both biases added where they belong, whatever the
                              activation. With ``w1 = w2 = S`` symmetric and
                              invertible: b1 acts as a shift of ``x @ w1``, so
                              ``mlp(x, S, b1, S, b2)`` must equal ``mlp(x + b1
                              S^-1, S, 0, S, b2)`` (and differ from ``b1 = 0``);
                              b2 is added last, so changing it by ``d`` must change
                              the output by exactly ``d`` (with b2 so large that a
                              GELU misplaced after the second layer is the
                              identity there). A bias added after GELU, before the
                              second matmul, twice, swapped or not at all breaks
                              one of the two.
============================  ====================================================

Values are compared within rtol = atol = 1e-5, as the notebook states, whatever
dtype the result has: with the float64 reference for the activation, and with what
the function itself returns for related inputs for the layout and the biases (never
with that alone: the related inputs are ours, and the output must depend on them).
A "likely mistake" is named only when the output matches that mistake's formula, or
the relation it breaks says which one it is.
"""
from __future__ import annotations

import torch

from ..gelu import gelu as _gelu
from ..gelu import gelu_exact as _gelu_exact
from ..i18n import N_
from ..mlp import mlp as _reference
from . import core as C, compare, inputs, messages, runner, watch
from .messages import _

NAME = "mlp"
FORBIDDEN = watch.Forbidden(
    N_("in this notebook the MLP is written with matrix products, the bias additions and "
       "the provided gelu; andrea_ref.mlp.mlp and andrea_ref.MLP are not allowed."),
    ref_files=("mlp.py", "block.py", "model.py"),
)
_ARGS = ("x", "w1", "b1", "w2", "b2")
_D = 8  # d_model = mlp_dim: swapped biases still add up, so only the bias check sees them


def _run(fn, args):
    out = C.call(fn, inputs.copy_args(args), name=NAME, forbidden=FORBIDDEN)
    return compare.values_result(out, name=NAME, shape=args[0].shape)


def _dtypes_devices():
    for device in inputs.devices():
        for dtype in (torch.float64, torch.float32):
            yield dtype, device


def _on(args, dtype, device):
    return tuple(a.to(device=device, dtype=dtype) for a in args)


def _symmetric_invertible(g, n):
    """A random symmetric matrix with eigenvalues of size 0.6 ... 1.2 and both signs."""
    q, _r = torch.linalg.qr(inputs.normal(g, (n, n)))
    lam = inputs.uniform(g, (n,), 0.6, 1.2) * torch.where(inputs.uniform(g, (n,)) < 0.3, -1.0, 1.0)
    return (q * lam) @ q.T


def _where(args, dtype, device):
    return _("x {x_shape}, w1 {w1_shape}, {dtype}, on {device}").format(
        x_shape=tuple(args[0].shape), w1_shape=tuple(args[1].shape), dtype=dtype, device=device)


# ---------------------------------------------------------------------------
# The inputs of each check, drawn from the seed alone.

def _shape_inputs(seed):
    g = inputs.generator(seed)
    d = _D
    for dtype, device in _dtypes_devices():
        args = (inputs.normal(g, (2, 5, d)), inputs.normal(g, (d, d), d ** -0.5), inputs.normal(g, (d,)),
                inputs.normal(g, (d, d), d ** -0.5), inputs.normal(g, (d,)))
        yield dtype, device, _on(args, dtype, device)


def _layout_perms(g, d):
    """Two permutation matrices P, Q whose products P Q differ from Q P, P.T Q.T,
    Q.T P.T, P.T Q, P Q.T, Q P.T and Q.T P: every transposition or swap of the weights
    shows as another permutation."""
    eye = inputs.eye(d)
    while True:
        p, q = eye[inputs.permutation(g, d)], eye[inputs.permutation(g, d)]
        right = p @ q
        others = (q @ p, p.T @ q.T, q.T @ p.T, p.T @ q, p @ q.T, q @ p.T, q.T @ p, p, q, eye)
        if all(not torch.equal(right, o) for o in others):
            return p, q


def _layout_inputs(seed):
    g = inputs.generator(seed + 1)
    d = _D
    for dtype, device in _dtypes_devices():
        # every token holds d distinct positive values (0.5 ... 2.5, 0.25 apart, shuffled),
        # so that any activation keeps the features apart
        base = torch.linspace(0.5, 2.5, d, dtype=torch.float64, device="cpu")
        x = torch.stack([base[inputs.permutation(g, d)] for _ in range(2 * 3)]).reshape(2, 3, d)
        p, q = _layout_perms(g, d)
        zero = inputs.const(0.0, (d,))
        yield dtype, device, p, q, _on((x, p, zero, q, zero), dtype, device), \
            _on((x, inputs.eye(d), zero, inputs.eye(d), zero), dtype, device)


def _activation_inputs(seed):
    g = inputs.generator(seed + 2)
    d = _D
    for dtype, device in _dtypes_devices():
        x = inputs.normal(g, (2, 5, d), 1.5)
        s = _symmetric_invertible(g, d)
        zero = inputs.const(0.0, (d,))
        yield dtype, device, _on((x, s, zero, s, zero), dtype, device)


def _bias_inputs(seed):
    g = inputs.generator(seed + 3)
    d = _D
    for dtype, device in _dtypes_devices():
        x = inputs.normal(g, (2, 5, d))
        s = _symmetric_invertible(g, d)
        b1 = inputs.normal(g, (d,)) * 1.5
        b2 = inputs.uniform(g, (d,), 12.0, 16.0)  # large: GELU after the second layer is the identity
        step = inputs.uniform(g, (d,), 1.0, 2.0) * torch.where(inputs.uniform(g, (d,)) < 0.5, -1.0, 1.0)
        zero = inputs.const(0.0, (d,))
        x_shifted = x + b1 @ torch.linalg.inv(s)  # (x + b1 S^-1) S = x S + b1
        yield dtype, device, s, b1, b2, step, {
            "b1": _on((x, s, b1, s, zero), dtype, device),
            "b1 absorbed": _on((x_shifted, s, zero, s, zero), dtype, device),
            "no b1": _on((x, s, zero, s, zero), dtype, device),
            "b2": _on((x, s, b1, s, b2), dtype, device),
            "b2 moved": _on((x, s, b1, s, b2 + step), dtype, device),
        }


def _all_inputs(seed):
    for *_ignored, args in _shape_inputs(seed):
        yield args
    for *_ignored, args, identity in _layout_inputs(seed):
        yield args
        yield identity
    for *_ignored, args in _activation_inputs(seed):
        yield args
    for *_ignored, calls in _bias_inputs(seed):
        yield from calls.values()


@runner.graded
def check_mlp_shape(fn, seed=0):
    """mlp returns a new [batch, seq, d_model] tensor with x's dtype and device, inputs unchanged."""
    for dtype, device, args in _shape_inputs(seed):
        out = C.call(fn, inputs.copy_args(args), name=NAME, forbidden=FORBIDDEN)
        compare.check_result(out, name=NAME, shape=args[0].shape, dtype=dtype, device=args[0].device)
        inputs.check_new_result(fn, inputs.copy_args(args), inputs.copy_args((args[0] * 0.5 + 0.25, *args[1:])),
                                name=NAME, forbidden=FORBIDDEN)
    inputs.inputs_left_alone(fn, _all_inputs(seed), name=NAME, labels=_ARGS,
                             advice=_("A function must leave its inputs as they were; in-place ops are fine "
                                      "on tensors you created yourself."))


@runner.graded
def check_mlp_layout(fn, seed=0):
    """Weights are laid out [in, out]: x @ w1 with w1 [d_model, mlp_dim], h @ w2 with w2 [mlp_dim, d_model]."""
    for dtype, device, p, q, args, identity in _layout_inputs(seed):
        out = compare.f64(_run(fn, args))
        own = compare.f64(_run(fn, identity))  # f(x), whatever f the function applies
        tol = compare.tol_for(dtype, result=out)
        where = _where(args, dtype, device)
        title = _("With permutation matrices P and Q as weights and zero biases, `{name}(x, P, 0, Q, 0)` "
                  "should equal `{name}(x, I, 0, I, 0)` @ P @ Q (the weights used as [in, out]).").format(name=NAME)
        if not compare.all_finite(own) or not compare.all_finite(out):
            messages.fail(title, _("{where}: the output has nan or inf for ordinary input.").format(where=where))
        # the features of f(x) must differ, or no permutation could be seen
        gaps = (own.unsqueeze(-1) - own.unsqueeze(-2)).abs() + inputs.eye(own.shape[-1]) * 1e9
        if float(gaps.min()) <= 10 * (tol[1] + tol[0] * float(own.abs().max())):
            messages.fail(title, _("{where}: `{name}(x, I, 0, I, 0)` gives equal values for different features, so "
                                   "the layout cannot be seen; the output must depend on x.").format(
                                       where=where, name=NAME))
        expected = own @ p @ q
        if compare.close(out, expected, tol):
            continue
        variants = [
            (_("transposed weights: with [in, out] layout the layers are x @ w1 and h @ w2, no .T "
               "(nn.Linear stores the transpose, [out, in])."), own @ p.T @ q.T),
            (_("w1 is transposed: the first layer is x @ w1, no .T."), own @ p.T @ q),
            (_("w2 is transposed: the second layer is h @ w2, no .T."), own @ p @ q.T),
            (_("w1 and w2 are swapped: the first layer is x @ w1, the second h @ w2."), own @ q @ p),
            (_("w1 and w2 are swapped and transposed: the first layer is x @ w1, the second h @ w2."),
             own @ q.T @ p.T),
            (_("w2 is never used: the second layer is h @ w2 + b2."), own @ p),
            (_("w1 is never used: the first layer is x @ w1 + b1."), own @ q),
        ]
        likely = compare.diagnose(out, [(label, lambda v=v: v) for label, v in variants], tol, None)
        messages.fail(title,
                      _("{where}: {mismatch}.").format(where=where, mismatch=compare.mismatch(out, expected, tol)),
                      likely)


def _activation_variants(args):
    x, w1, b1, w2, b2 = (compare.f64(a) for a in args)
    return [
        (_("ReLU is used in place of GELU: apply the provided gelu between the layers."),
         lambda: torch.relu(x @ w1 + b1) @ w2 + b2),
        (_("tanh is used in place of GELU: apply the provided gelu between the layers."),
         lambda: torch.tanh(x @ w1 + b1) @ w2 + b2),
        (_("the sigmoid is used in place of GELU: apply the provided gelu between the layers."),
         lambda: torch.sigmoid(x @ w1 + b1) @ w2 + b2),
        (_("SiLU (x * sigmoid(x)) is used in place of GELU: apply the provided gelu between the layers."),
         lambda: torch.nn.functional.silu(x @ w1 + b1) @ w2 + b2),
        (_("GELU is applied after the second linear layer. It goes between the layers: "
           "gelu(x @ w1 + b1) @ w2 + b2."),
         lambda: _gelu((x @ w1 + b1) @ w2 + b2)),
        (_("GELU is applied after both linear layers; it belongs only between them."),
         lambda: _gelu(_gelu(x @ w1 + b1) @ w2 + b2)),
        (_("GELU is applied twice between the layers; once is enough: gelu(x @ w1 + b1) @ w2 + b2."),
         lambda: _gelu(_gelu(x @ w1 + b1)) @ w2 + b2),
        (_("GELU is applied to x before the first layer; it goes between the layers: "
           "gelu(x @ w1 + b1) @ w2 + b2."),
         lambda: (_gelu(x) @ w1 + b1) @ w2 + b2),
        (_("no activation: without GELU the two layers collapse into one linear map."),
         lambda: (x @ w1 + b1) @ w2 + b2),
        (_("the exact erf GELU (torch.nn.functional.gelu's default) is used; the course's "
           "GELU is the tanh approximation: use the provided gelu."),
         lambda: _gelu_exact(x @ w1 + b1) @ w2 + b2),
        (_("the sigmoid approximation of GELU, x * sigmoid(1.702 x), is used; use the provided gelu."),
         lambda: (lambda z: z * torch.sigmoid(1.702 * z))(x @ w1 + b1) @ w2 + b2),
    ]


@runner.graded
def check_mlp_activation(fn, seed=0):
    """GELU sits between the two linear layers: gelu(x @ w1 + b1) @ w2 + b2."""
    for dtype, device, args in _activation_inputs(seed):
        out = _run(fn, args)
        want = _reference(*(compare.f64(a) for a in args))
        tol = compare.tol_for(dtype, result=out)
        if compare.close(out, want, tol):
            continue
        messages.fail(
            _("`{name}` with zero biases and w1 = w2 symmetric should return gelu(x @ w1) @ w2.").format(name=NAME),
            _("{where}: {mismatch}.").format(where=_where(args, dtype, device),
                                             mismatch=compare.mismatch(out, want, tol)),
            compare.diagnose(out, _activation_variants(args), tol, None),
        )


def _b1_message(outs, calls, s, b1, tol):
    """What the b1 relation shows, named only when the outputs say it: b1 without any
    effect, or added where b2 belongs, tell it by themselves; a misplaced b1 is named
    when the output is that formula with the provided gelu."""
    with_b1, no_b1 = outs["b1"], outs["no b1"]
    if compare.close(with_b1, no_b1, tol):
        return _("b1 is never added (changing it changes nothing): the first layer is x @ w1 + b1.")
    if compare.close(with_b1, no_b1 + b1, tol):
        return _("b1 is added at the end, where b2 belongs: the first layer is x @ w1 + b1.")
    x = compare.f64(calls["b1"][0])
    variants = [
        (_("b1 is added after GELU: the first layer is x @ w1 + b1, and GELU acts on that sum."),
         lambda: (_gelu(x @ s) + b1) @ s),
        (_("b1 is added twice: once, right after x @ w1."), lambda: _gelu(x @ s + 2 * b1) @ s),
    ]
    return compare.diagnose(with_b1, variants, tol, None)


def _b2_message(diff, step, s, tol):
    if compare.close(diff, torch.zeros_like(diff), tol):
        return _("b2 is never added (changing it changes nothing): the second layer is h @ w2 + b2.")
    if compare.close(diff, (step @ s).expand_as(diff), tol):
        return _("b2 is added before the second matmul: the second layer is h @ w2 + b2, not (h + b2) @ w2.")
    if compare.close(diff, (2 * step).expand_as(diff), tol):
        return _("b2 is added twice: once, after h @ w2.")
    if compare.close(diff, (-step).expand_as(diff), tol):
        return _("b2 is subtracted: the second layer is h @ w2 + b2.")
    return None


@runner.graded
def check_mlp_bias(fn, seed=0):
    """Both biases are added: b1 after the first layer, b2 after the second."""
    for dtype, device, s, b1, b2, step, calls in _bias_inputs(seed):
        raw = {k: _run(fn, a) for k, a in calls.items()}
        outs = {k: compare.f64(o) for k, o in raw.items()}
        where = _where(calls["b1"], dtype, device)
        tol = compare.tol_for(dtype, result=raw["b1"])
        if not all(compare.all_finite(o) for o in outs.values()):
            messages.fail(_("`{name}` returned nan or inf for ordinary input.").format(name=NAME), where)
        swapped = compare.f64(_gelu(compare.f64(calls["b2"][0]) @ s + b2) @ s + b1)
        # b1: a shift of x @ w1, that must change the output
        b1_ok = (compare.close(outs["b1"], outs["b1 absorbed"], tol)
                 and not compare.close(outs["b1"], outs["no b1"], (1e-3, 1e-3)))
        # b2: added last
        diff = outs["b2 moved"] - outs["b2"]
        b2_ok = compare.close(diff, step.expand_as(diff), (tol[0], tol[1] + tol[0] * float(outs["b2"].abs().max())))
        if b1_ok and b2_ok:
            continue
        both = compare.close(outs["b2"], swapped, tol)
        swap_msg = _("b1 and b2 are swapped: b1 belongs to the first layer (x @ w1 + b1), b2 to the second "
                     "(h @ w2 + b2).")
        if not b1_ok:
            likely = swap_msg if both else _b1_message(outs, calls, s, b1, tol)
            if (not b2_ok and compare.close(outs["b1"], outs["no b1"], tol)
                    and compare.close(diff, torch.zeros_like(diff), tol)):
                likely = _("neither bias is added: x @ w1 + b1, then h @ w2 + b2.")
            messages.fail(
                _("b1 shifts x @ w1: `{name}(x, w1, b1, w2, 0)` should equal `{name}(x + b1 w1^-1, w1, 0, w2, 0)` "
                  "and differ from `{name}(x, w1, 0, w2, 0)`.").format(name=NAME),
                _("{where}: {mismatch}.").format(
                    where=where, mismatch=compare.mismatch(outs["b1"], outs["b1 absorbed"], tol) or
                    _("b1 changes nothing")),
                likely,
            )
        likely = swap_msg if both else _b2_message(diff, step, s, tol)
        messages.fail(
            _("b2 is added last: changing b2 by d should change the output of `{name}` by exactly d.").format(
                name=NAME),
            _("{where}: {mismatch}.").format(where=where, mismatch=compare.mismatch(diff, step.expand_as(diff), tol)),
            likely,
        )


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
    return runner.run_report(_("Checking `{name}`:").format(name=NAME), CHECKS, fn)
