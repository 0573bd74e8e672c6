"""The MLP sublayer: expand, activate, contract.

    h = x @ W1 + b1        # d_model -> mlp_dim (4 * d_model in ANDREA)
    h = GELU(h)            # (ReLU with activation="relu", for experiments)
    y = h @ W2 + b2        # mlp_dim -> d_model

Weights are laid out ``[in, out]`` as in the text, so ``x @ W`` needs no transpose
(``torch.nn.Linear`` stores the transpose, ``[out, in]``). Each token is transformed
on its own: nothing here mixes positions.
"""
from __future__ import annotations

import torch
from torch import nn

from ._validate import check_same, check_shape, check_tensor
from .gelu import gelu


ACTIVATION_FUNCTIONS = {"gelu": gelu, "relu": torch.relu}


def _bias_gelu(h: torch.Tensor, b1: torch.Tensor | None) -> torch.Tensor:
    """GELU(h + b1); on CUDA the kernel fuses the bias add into the activation."""
    if b1 is not None and h.is_cuda:
        from . import kernels

        if kernels.fast_path_ready(h):
            return kernels.bias_gelu(h, b1)
    return gelu(h if b1 is None else h + b1)


def mlp(x, w1, b1, w2, b2, activation: str = "gelu") -> torch.Tensor:
    """Position-wise two-layer perceptron with a GELU (or, for experiments, a ReLU) in between.

    Args:
        x: ``[..., d_model]``.
        w1: ``[d_model, mlp_dim]``;  b1: ``[mlp_dim]`` or None.
        w2: ``[mlp_dim, d_model]``;  b2: ``[d_model]`` or None.

    Returns:
        ``[..., d_model]``, same dtype and device as ``x``.
    """
    check_tensor(x, "x", min_ndim=1)
    check_tensor(w1, "w1", ndim=2)
    d_model = x.shape[-1]
    if w1.shape[0] != d_model:
        raise ValueError(
            f"w1 must have shape [d_model, mlp_dim] = [{d_model}, mlp_dim] (laid out [in, out]), "
            f"got {tuple(w1.shape)}"
        )
    mlp_dim = w1.shape[1]
    check_shape(w2, "w2", (mlp_dim, d_model))
    if b1 is not None:
        check_shape(b1, "b1", (mlp_dim,))
    if b2 is not None:
        check_shape(b2, "b2", (d_model,))
    check_same(x, "x", w1=w1, b1=b1, w2=w2, b2=b2)
    if activation not in ACTIVATION_FUNCTIONS:
        raise ValueError(f"activation must be one of {tuple(ACTIVATION_FUNCTIONS)}, got {activation!r}")
    if activation == "gelu":
        h = _bias_gelu(x @ w1, b1)
    else:
        h = ACTIVATION_FUNCTIONS[activation](x @ w1 if b1 is None else x @ w1 + b1)
    y = h @ w2
    return y if b2 is None else y + b2


class MLP(nn.Module):
    """The MLP sublayer with parameters ``w1 [d_model, mlp_dim]``, ``b1``, ``w2 [mlp_dim, d_model]``, ``b2``."""

    def __init__(self, d_model: int, mlp_dim: int, bias: bool = True, activation: str = "gelu"):
        super().__init__()
        if activation not in ACTIVATION_FUNCTIONS:
            raise ValueError(f"activation must be one of {tuple(ACTIVATION_FUNCTIONS)}, got {activation!r}")
        self.activation = activation
        self.w1 = nn.Parameter(torch.empty(d_model, mlp_dim))
        self.w2 = nn.Parameter(torch.empty(mlp_dim, d_model))
        self.b1 = nn.Parameter(torch.zeros(mlp_dim)) if bias else None
        self.b2 = nn.Parameter(torch.zeros(d_model)) if bias else None
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.02, out_std: float | None = None) -> None:
        """Weights ~ N(0, std); the output projection ~ N(0, out_std); biases zero."""
        nn.init.normal_(self.w1, std=std)
        nn.init.normal_(self.w2, std=std if out_std is None else out_std)
        for b in (self.b1, self.b2):
            if b is not None:
                nn.init.zeros_(b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return mlp(x, self.w1, self.b1, self.w2, self.b2, self.activation)
