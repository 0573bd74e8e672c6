"""GELU, the MLP's activation, in the tanh approximation the course uses.

    GELU(x) = x * Phi(x)                                   (exact, Phi = normal CDF)
            ~ 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))   (tanh form)

``gelu`` is the tanh form. On CUDA tensors it runs the handwritten kernel in
``cuda/`` when that kernel is available (see :mod:`andrea_ref.kernels`); everywhere
else it is the plain PyTorch expression in :func:`gelu_tanh_torch`. The two agree to
float rounding, and both are differentiable.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ._validate import check_tensor

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_COEFF = 0.044715


def gelu_tanh_torch(x: torch.Tensor) -> torch.Tensor:
    """The tanh approximation written with PyTorch ops only (never the kernel)."""
    check_tensor(x, "x")
    inner = SQRT_2_OVER_PI * (x + GELU_COEFF * x * x * x)
    return 0.5 * x * (1.0 + torch.tanh(inner))


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Tanh-approximated GELU, elementwise. Same shape, dtype and device as ``x``."""
    check_tensor(x, "x")
    if x.is_cuda:
        from . import kernels

        if kernels.fast_path_ready(x):
            return kernels.gelu(x)
    return gelu_tanh_torch(x)


def gelu_exact(x: torch.Tensor) -> torch.Tensor:
    """The exact GELU, ``x * Phi(x)`` with ``Phi(x) = (1 + erf(x / sqrt 2)) / 2``."""
    check_tensor(x, "x")
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_derivative(x: torch.Tensor) -> torch.Tensor:
    """d/dx of the tanh approximation:

    0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2),  t = tanh(inner).
    """
    check_tensor(x, "x")
    t = torch.tanh(SQRT_2_OVER_PI * (x + GELU_COEFF * x * x * x))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_COEFF * x * x)


class GELU(nn.Module):
    """Module wrapper of :func:`gelu`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu(x)
