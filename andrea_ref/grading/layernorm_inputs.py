"""The inputs of the LayerNorm checks (:mod:`.layernorm`), drawn from the seed alone:
per check, rows each with its own spread and mean, and :func:`all_inputs`, every input
any check uses. The eps check's values of eps (:data:`EPS_FIT`, :data:`SCALE`) are read
by :mod:`.layernorm_diagnosis` too, which fits its laws at them."""
from __future__ import annotations

import torch

from . import inputs

_SHAPES = ((4, 8), (2, 3, 8), (3, 5, 16))  # small d: the unbiased variance shows
_EPS_SHAPES = ((6, 8), (2, 3, 16))
# eps values comparable to the eps check's variances (about 2.5e-3 ... 4e-2), where
# where eps goes changes the output most. The law is fitted at the first two and
# checked at the others.
EPS_FIT = (1e-3, 6.4e-2)
_EPS_CHECK = (4e-3, 1.6e-2, 3e-2)
_FLAT = 0.75  # the entries of the eps check's token of equal entries


def _rows(g, shape, scale, offset):
    """Random rows, each with its own spread (uniform in ``scale``) and mean."""
    row_shape = (*shape[:-1], 1)
    spread = inputs.uniform(g, row_shape, *scale)
    centre = inputs.uniform(g, row_shape, -offset, offset)
    return inputs.normal(g, shape) * spread + centre


def _cases(seed, dtypes=(torch.float64, torch.float32)):
    g = inputs.generator(seed)
    for device in inputs.devices():
        for dtype in dtypes:
            for shape in _SHAPES:
                yield device, dtype, shape, g


# ---------------------------------------------------------------------------
# The inputs of each check, drawn from the seed alone (the shape check calls the
# function on all of them, to see any argument changed in place).

def normalise_inputs(seed):
    for device, dtype, shape, g in _cases(seed):
        x = _rows(g, shape, (2.0, 6.0), 3.0)
        ones = inputs.const(1.0, shape[-1:])
        on = lambda t: t.to(device=device, dtype=dtype)  # noqa: E731
        yield device, dtype, shape, x, (on(x), on(ones), on(ones), 1e-8)  # eps tiny next to the variance


def affine_inputs(seed):
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


def eps_inputs(seed):
    g = inputs.generator(seed + 2)
    for device in inputs.devices():
        for shape in _EPS_SHAPES:
            # rows with variance comparable to eps, where its placement matters; the
            # first token's entries are all equal (variance 0)
            x = _rows(g, shape, (0.05, 0.2), 1.0)
            x[..., 0, :] = _FLAT
            ones = inputs.const(1.0, shape[-1:]).to(device)
            yield device, shape, x.to(device), ones


SCALE = 10.0  # x scaled by this, eps by its square: what tells a variance from a spread


def eps_calls(x, ones):
    """(key, argument tuple) of every call the eps check makes: key eps, None for the
    default, "scaled" for 10 x with 100 times the first eps."""
    for eps in (*EPS_FIT, *_EPS_CHECK):
        yield eps, (x, ones, ones, eps)
    yield None, (x, ones, ones)
    yield "scaled", (x * SCALE, ones, ones, EPS_FIT[0] * SCALE ** 2)


def all_inputs(seed):
    for *_ignored, args in normalise_inputs(seed):
        yield args
    for *_ignored, hat_args, args in affine_inputs(seed):
        yield hat_args
        yield args
    for _device, _shape, x, ones in eps_inputs(seed):
        for _eps, args in eps_calls(x, ones):
            yield args
    g = inputs.generator(seed)
    for device in inputs.devices():
        for dtype, shape in ((torch.float32, (2, 3, 8)), (torch.float64, (4, 6))):
            yield shape_args(g, device, dtype, shape)


def shape_args(g, device, dtype, shape):
    x = _rows(g, shape, (0.5, 2.0), 1.0)
    d = shape[-1]
    gamma = inputs.uniform(g, (d,), 0.5, 1.5)
    beta = inputs.normal(g, (d,))
    return tuple(t.to(device=device, dtype=dtype) for t in (x, gamma, beta)) + (1e-5,)
