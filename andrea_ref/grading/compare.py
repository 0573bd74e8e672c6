"""Comparing what the learner's function returned with the reference: what a shape or a
value check accepts (:func:`check_result`, :func:`values_result`), the tolerances the
notebooks state (:func:`tol_for`), and the one comparison that lets no nan or inf
through (:func:`mismatch`)."""
from __future__ import annotations

import math

import torch

from .captured import (
    Tensor as _Tensor, abs_f as _abs_f, add as _add, all_ as _all, any_ as _any, argmax as _argmax,
    clone as _clone, detach as _detach, div as _div, eq as _eq, equal as _equal, finfo as _finfo,
    float64 as _float64, full_like as _full_like, is_floating as _is_floating, isfinite as _isfinite,
    isinstance_ as _isinstance, isnan as _isnan, item as _item, le as _le, logical_and as _logical_and,
    logical_not as _logical_not, logical_or as _logical_or, mul as _mul, reshape as _reshape, sub as _sub,
    to as _to, type_ as _type, where as _where)
from .messages import GradingError, _, number


# (rtol, atol): a value passes when |got - expected| <= atol + rtol * |expected|. The
# notebooks state these numbers; float64 gets float32's tolerance so that a rounded
# constant or a float32 intermediate costs nothing the notebook did not announce.
FLOAT64_TOL = (1e-5, 1e-5)
FLOAT32_TOL = (1e-5, 1e-5)


def check_result(out, *, name, shape, dtype, device):
    """Accept only a plain tensor with the expected shape, dtype and device.

    This is the shape checks' property; the value checks use :func:`values_result`,
    which leaves dtype and device to them. Returns a copy, so that a later call of the
    learner's function cannot change what this one returned.
    """
    out = plain_tensor(out, name=name, shape=shape)
    if out.dtype != dtype:
        raise GradingError(
            _("`{name}` returned dtype {got} for {dtype} input; the output must keep "
              "the input's dtype (a constant made with torch.tensor(...) can promote it: "
              "use plain Python numbers).").format(name=name, got=out.dtype, dtype=dtype)
        )
    if out.device != device:
        raise GradingError(_("`{name}` returned a tensor on {got}; the input was on {device}.").format(
            name=name, got=out.device, device=device))
    return _clone(_detach(out))


def f64(t):
    """A float64 CPU copy, made with captured functions."""
    return _to(_detach(t), device="cpu", dtype=_float64)


def mismatch(out, ref, tol):
    """``None`` if ``out`` is within ``tol = (rtol, atol)`` of ``ref`` everywhere, else a
    short description of the worst element: where it is, what it is and should be (with
    enough digits to see the difference), and the tolerance applied.

    Where ``ref`` is finite, ``out`` must be finite and within the tolerance: nan or inf
    never matches a number. Where ``ref`` itself is nan or inf, ``out`` must be the same
    (nan matching nan): nothing in the reference excuses an element."""
    rtol, atol = tol
    a, b = f64(out), f64(ref)
    if tuple(a.shape) != tuple(b.shape):
        return _("shape {got}, expected {shape}").format(got=tuple(a.shape), shape=tuple(b.shape))
    diff = _abs_f(_sub(a, b))
    bound = _add(_mul(_abs_f(b), rtol), atol)
    ref_finite = _isfinite(b)
    near = _logical_and(_le(diff, bound), _isfinite(a))
    identical = _logical_or(_eq(a, b), _logical_and(_isnan(a), _isnan(b)))
    bad = _logical_not(_where(ref_finite, near, identical))
    if not _item(_any(bad)):
        return None
    flat_bad = _reshape(bad, (-1,))
    # worst element: the one furthest outside its allowance (a non-finite one counts as worst)
    ratio = _reshape(_div(diff, bound), (-1,))
    scored = _where(_isfinite(ratio), ratio, _full_like(ratio, math.inf))
    scored = _where(flat_bad, scored, _full_like(ratio, -1.0))
    i = _item(_argmax(scored))
    got = _item(_reshape(a, (-1,))[i])
    want = _item(_reshape(b, (-1,))[i])
    where = _index_text(i, tuple(a.shape))
    g, w = _two_numbers(got, want)
    if not math.isfinite(want):
        return _("at {index} got {got}, expected {expected} exactly").format(index=where, got=g, expected=w)
    allowed = atol + rtol * abs(want)
    return _("at {index} got {got}, expected {expected}: difference {difference}, "
             "allowed {allowed} (rtol = {rtol}, atol = {atol})").format(
        index=where, got=g, expected=w, difference=number(abs(got - want), ".3g"),
        allowed=number(allowed, ".3g"), rtol=number(rtol), atol=number(atol))


def close(out, ref, tol):
    return mismatch(out, ref, tol) is None


def same(a, b):
    """Exactly equal, dtype, shape and device included (used to check that inputs were
    left unchanged)."""
    a, b = _detach(a), _detach(b)
    return (a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and a.device == b.device
            and _equal(a, b))


def all_finite(t):
    return _item(_all(_isfinite(t)))


def diagnose(out, variants, tol, default):
    """Name of the first variant ``out`` matches within ``tol``, else ``default``."""
    for label, compute in variants:
        try:
            candidate = compute()
        except Exception:
            continue
        if tuple(candidate.shape) == tuple(out.shape) and close(out, candidate, tol):
            return label
    return default


def tol_for(dtype, *, result=None):
    """The ``(rtol, atol)`` the notebooks state for values computed from ``dtype`` input.

    ``result``: what the learner returned. A result of a narrower dtype than the input
    (float32 for float64 input, say) costs the shape check's dtype point; its values are
    still judged, with that dtype's rounding (its machine epsilon) added to ``rtol``.
    """
    rtol, atol = FLOAT64_TOL if dtype == torch.float64 else FLOAT32_TOL
    if result is not None:
        rtol = rtol + rounding(dtype, result)
    return (rtol, atol)


def _is_floating_dtype(dtype):
    return _isinstance(dtype, torch.dtype) and dtype.is_floating_point


def rounding(dtype, result):
    """The relative error rounding to ``result``'s dtype adds when it is narrower than
    ``dtype`` (its machine epsilon), else 0: what a value check allows on top of its
    tolerance, so that a dtype slip costs only the shape check's point."""
    if not (_is_floating(result) and _is_floating_dtype(dtype)):
        return 0.0
    extra = _finfo(result.dtype).eps
    return extra if extra > _finfo(dtype).eps else 0.0


def plain_tensor(out, *, name, shape):
    """``out`` if it is a plain ``torch.Tensor`` of ``shape``, else ``AssertionError``."""
    if out is None:
        raise GradingError(_("`{name}` returned None: did you forget the `return`?").format(name=name))
    if _type(out) is not _Tensor:
        if _isinstance(out, _Tensor):
            raise GradingError(
                _("`{name}` must return a plain torch.Tensor, got the subclass {type}.").format(
                    name=name, type=_type(out).__name__)
            )
        raise GradingError(_("`{name}` must return a torch.Tensor, got {type}.").format(
            name=name, type=_type(out).__name__))
    got_shape = tuple(out.shape)
    if got_shape != tuple(shape):
        raise GradingError(
            _("`{name}` returned shape {got}; expected {shape}.").format(
                name=name, got=got_shape, shape=tuple(shape))
        )
    return out


def values_result(out, *, name, shape):
    """What a value check accepts: a plain floating-point tensor of ``shape``, of any
    floating dtype and on any device (keeping x's dtype and device is the shape check's
    property, so a slip there costs only that). Returns a copy, so that a later call of
    the learner's function cannot change it. Compare it with :func:`close` and
    ``tol_for(dtype, result=...)``."""
    out = plain_tensor(out, name=name, shape=shape)
    if not _is_floating(out):
        raise GradingError(
            _("`{name}` returned a tensor of dtype {dtype}; its values must be floating point.").format(
                name=name, dtype=out.dtype)
        )
    return _clone(_detach(out))


def _index_text(i, shape):
    """The flat index ``i`` of a tensor of ``shape``, written as ``[i0, i1, ...]``."""
    idx = []
    for n in reversed(shape):
        idx.append(i % n if n else 0)
        i = i // n if n else 0
    return "[" + ", ".join(str(k) for k in reversed(idx)) + "]"


def _two_numbers(got, want):
    """``got`` and ``want`` as text, with enough significant digits to tell them apart."""
    diff = abs(got - want)
    size = max(abs(got), abs(want))
    digits = 6
    if math.isfinite(diff) and math.isfinite(size) and 0 < diff < size:
        digits = min(17, max(6, math.ceil(math.log10(size / diff)) + 2))
    return number(got, f".{digits}g"), number(want, f".{digits}g")

