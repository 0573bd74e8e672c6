"""Causal multi-head self-attention (met in the previous lesson; provided ready-made).

    q, k, v = x @ Wq + bq, x @ Wk + bk, x @ Wv + bv        # each [B, T, d_model]
    split into n_head heads of width d_model / n_head
    a = softmax(q k^T / sqrt(head_dim), masked so position t sees 0..t) v
    y = concat(heads) @ Wo + bo

All four weights are ``[d_model, d_model]`` laid out ``[in, out]``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ._validate import check_positive_int, check_same, check_shape, check_tensor


def causal_self_attention(x, w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o, n_head: int) -> torch.Tensor:
    """Causal self-attention over ``x`` of shape ``[batch, seq_len, d_model]``.

    Biases may be None. Returns a tensor shaped like ``x``.
    """
    check_tensor(x, "x", ndim=3)
    check_positive_int(n_head, "n_head")
    B, T, d = x.shape
    if d % n_head != 0:
        raise ValueError(f"d_model ({d}, the last dimension of x) must be divisible by n_head ({n_head})")
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        check_shape(w, name, (d, d))
    for name, b in (("b_q", b_q), ("b_k", b_k), ("b_v", b_v), ("b_o", b_o)):
        if b is not None:
            check_shape(b, name, (d,))
    check_same(x, "x", w_q=w_q, b_q=b_q, w_k=w_k, b_k=b_k, w_v=w_v, b_v=b_v, w_o=w_o, b_o=b_o)

    def project(w, b):
        y = x @ w
        y = y if b is None else y + b
        return y.view(B, T, n_head, d // n_head).transpose(1, 2)  # [B, H, T, hd]

    q, k, v = project(w_q, b_q), project(w_k, b_k), project(w_v, b_v)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // n_head)  # [B, H, T, T]
    future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
    scores = scores.masked_fill(future, float("-inf"))
    heads = F.softmax(scores, dim=-1) @ v  # [B, H, T, hd]
    y = heads.transpose(1, 2).reshape(B, T, d) @ w_o
    return y if b_o is None else y + b_o


class CausalSelfAttention(nn.Module):
    """Attention sublayer with parameters ``w_q b_q w_k b_k w_v b_v w_o b_o`` (weights ``[in, out]``)."""

    def __init__(self, d_model: int, n_head: int, bias: bool = True):
        super().__init__()
        if d_model % n_head != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by n_head ({n_head})")
        self.n_head = n_head
        for name in ("q", "k", "v", "o"):
            self.register_parameter(f"w_{name}", nn.Parameter(torch.empty(d_model, d_model)))
            self.register_parameter(f"b_{name}", nn.Parameter(torch.zeros(d_model)) if bias else None)
        self.reset_parameters()

    def reset_parameters(self, std: float = 0.02, out_std: float | None = None) -> None:
        """Weights ~ N(0, std); the output projection ~ N(0, out_std); biases zero."""
        for name in ("q", "k", "v", "o"):
            s = out_std if (name == "o" and out_std is not None) else std
            nn.init.normal_(getattr(self, f"w_{name}"), std=s)
            b = getattr(self, f"b_{name}")
            if b is not None:
                nn.init.zeros_(b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return causal_self_attention(
            x, self.w_q, self.b_q, self.w_k, self.b_k, self.w_v, self.b_v, self.w_o, self.b_o, self.n_head
        )
