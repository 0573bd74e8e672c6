"""LayerNorm: rescale each token's vector to zero mean and unit variance.

    y = gamma * (x - mean(x)) / sqrt(var(x) + eps) + beta

Mean and variance are taken over the last dimension (``d_model``), separately for
every token. The variance is the *biased* one (divide by ``d``, not ``d - 1``) and
``eps`` sits inside the square root, as in the original LayerNorm paper and in
``torch.nn.LayerNorm``.
"""
from __future__ import annotations

import torch
from torch import nn

from ._validate import check_same, check_shape, check_tensor

DEFAULT_EPS = 1e-5


def layer_norm(x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Normalise ``x`` over its last dimension, then scale by ``gamma`` and shift by ``beta``.

    Args:
        x: ``[..., d]`` floating-point tensor.
        gamma: ``[d]`` gain.
        beta: ``[d]`` bias.
        eps: positive number added to the variance inside the square root.

    Returns:
        A tensor with the shape, dtype and device of ``x``.
    """
    check_tensor(x, "x", min_ndim=1)
    d = x.shape[-1]
    check_shape(gamma, "gamma", (d,))
    check_shape(beta, "beta", (d,))
    check_same(x, "x", gamma=gamma, beta=beta)
    if not (isinstance(eps, (int, float)) and eps > 0):
        raise ValueError(f"eps must be a positive number, got {eps!r}")
    mean = x.mean(dim=-1, keepdim=True)
    centered = x - mean
    var = (centered * centered).mean(dim=-1, keepdim=True)  # biased: divide by d
    return centered * torch.rsqrt(var + eps) * gamma + beta


class LayerNorm(nn.Module):
    """LayerNorm over the last dimension with learned ``gamma`` (ones) and ``beta`` (zeros)."""

    def __init__(self, d_model: int, eps: float = DEFAULT_EPS):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.gamma, self.beta, self.eps)

    def extra_repr(self) -> str:
        return f"{self.gamma.shape[0]}, eps={self.eps}"
