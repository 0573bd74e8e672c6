"""Input checks shared by every op: clear errors that name the argument.

Every public function in ``andrea_ref`` validates its inputs with these helpers, so a
wrong shape, dtype or device is reported as ``ValueError``/``TypeError`` with the
argument's name, what was expected and what arrived -- never a silent broadcast.
"""
from __future__ import annotations

import torch

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_tensor(x, name: str, *, ndim=None, min_ndim=None, last_dim=None, floating=True):
    """Check that ``x`` is a tensor of the expected rank and last dimension."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if floating and x.dtype not in FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be a floating-point tensor (float16, bfloat16, float32 or float64), got {x.dtype}"
        )
    if ndim is not None and x.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {tuple(x.shape)}")
    if min_ndim is not None and x.dim() < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s), got shape {tuple(x.shape)}")
    if last_dim is not None and (x.dim() == 0 or x.shape[-1] != last_dim):
        raise ValueError(f"{name} must have last dimension {last_dim}, got shape {tuple(x.shape)}")
    return x


def check_shape(x, name: str, shape: tuple[int, ...]):
    """Check that tensor ``x`` has exactly ``shape``."""
    check_tensor(x, name)
    if tuple(x.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(x.shape)}")
    return x


def check_same(reference: torch.Tensor, ref_name: str, **others):
    """Check that every tensor in ``others`` shares ``reference``'s dtype and device.

    ``None`` values are skipped (optional biases).
    """
    for name, t in others.items():
        if t is None:
            continue
        if t.dtype != reference.dtype:
            raise TypeError(f"{name} has dtype {t.dtype} but {ref_name} has dtype {reference.dtype}; they must match")
        if t.device != reference.device:
            raise ValueError(f"{name} is on device {t.device} but {ref_name} is on {reference.device}; they must match")


def check_positive_int(value, name: str):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value
