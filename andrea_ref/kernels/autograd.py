"""``torch.autograd.Function`` wrappers: the handwritten kernels, differentiable.

The forward saves only its inputs; the backward recomputes tanh from x inside the backward
kernel (``dx = dy * gelu'(x)``), so one activation-sized tensor is stored, as with PyTorch's
own GELU. Double backward is not provided by the kernels (``once_differentiable``): asking for
it raises a clear error instead of silently returning zeros.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable


class GeluFunction(torch.autograd.Function):
    """y = gelu(x) through the kernel; dx = gelu_bwd(dy, x)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, fast: bool, ops) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.fast = fast
        ctx.ops = ops
        return ops.gelu_fwd(x, fast)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy: torch.Tensor):
        (x,) = ctx.saved_tensors
        return ctx.ops.gelu_bwd(dy, x, ctx.fast), None, None


class BiasGeluFunction(torch.autograd.Function):
    """y = gelu(x + b) in one pass (b along the last dimension).

    Backward: one kernel gives dx = dy * gelu'(x + b); the bias gradient is dx summed over
    every leading dimension, done with torch's reduction (deterministic, fp32 accumulation
    for fp16/bf16) and only when b needs a gradient.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, b: torch.Tensor, fast: bool, ops) -> torch.Tensor:
        ctx.save_for_backward(x, b)
        ctx.fast = fast
        ctx.ops = ops
        return ops.bias_gelu_fwd(x, b, fast)

    @staticmethod
    @once_differentiable
    def backward(ctx, dy: torch.Tensor):
        x, b = ctx.saved_tensors
        need_dx, need_db = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        if not (need_dx or need_db):
            return None, None, None, None
        dx = ctx.ops.bias_gelu_bwd(dy, x, b, ctx.fast)
        db = None
        if need_db:
            # x of shape [..., n] -> db of shape [n]. A 1-D x has no leading dimension to sum.
            db = dx.sum(dim=tuple(range(dx.dim() - 1))) if dx.dim() > 1 else dx.clone()
        return (dx if need_dx else None), db, None, None
