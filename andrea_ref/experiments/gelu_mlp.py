"""The numbers of the GELU and MLP chapters: approximation errors of the tanh form (exact
and with the GPU's hardware tanh), LLaMA's MLP width and the memory traffic of GELU passes."""
from __future__ import annotations

import math

import torch

from ..gelu import gelu_exact, gelu_tanh_torch


def gelu_approximation_error(lo: float = -8.0, hi: float = 8.0, n: int = 160_001) -> tuple[float, float]:
    """Largest |tanh-GELU - exact GELU| on a uniform float64 grid, and the |x| where it occurs."""
    x = torch.linspace(lo, hi, n, dtype=torch.float64)
    err = (gelu_tanh_torch(x) - gelu_exact(x)).abs()
    i = int(err.argmax())
    return float(err[i]), abs(float(x[i]))


def llama_mlp_hidden(d_model: int, multiple_of: int = 256) -> int:
    """Hidden width of a LLaMA-style SwiGLU MLP for a stream of width ``d_model``.

    LLaMA keeps the parameter count of a 4x MLP with three matrices by taking two
    thirds of ``4 * d_model``; its reference code truncates that to an integer and
    then rounds it *up* to a multiple of ``multiple_of`` (256), a width that maps
    well onto GPU matrix tiles. Exact integer arithmetic: ``8 * d_model // 3`` is
    ``int(2 * 4 * d_model / 3)`` for every positive ``d_model``.
    """
    if d_model <= 0 or multiple_of <= 0:
        raise ValueError("d_model and multiple_of must be positive")
    two_thirds = 8 * d_model // 3
    return multiple_of * -(-two_thirds // multiple_of)


# The largest relative error of the GPU's hardware tanh (PTX ``tanh.approx.f32``) over
# the whole float range, as NVIDIA's PTX ISA documents it: a bound, not a typical error.
PTX_TANH_APPROX_REL_ERR = 2.0 ** -11


def fast_tanh_gelu_error_emulated(tanh_rel_err: float = PTX_TANH_APPROX_REL_ERR, saturate_at: float = 10.0,
                                  lo: float = -12.0, hi: float = 12.0,
                                  n: int = 2_400_001) -> tuple[float, float]:
    """Emulated worst-case gap between a GELU that uses the GPU's hardware tanh and the
    tanh formula, on a float64 grid over ``[lo, hi]``; returns (gap, |x| where it occurs).

    The emulation assumes the hardware ``tanh(u)`` is off by the relative error
    ``tanh_rel_err`` (default: the documented bound, ``PTX_TANH_APPROX_REL_ERR``) at
    every point, with the sign that hurts most, except where
    ``|u| >= saturate_at``, where the kernel returns exactly +-1 (``cuda/gelu_math.h``).
    GELU = 0.5 x (1 + t), so an error ``d`` in ``t`` moves GELU by ``0.5 |x| |t| d``.
    This is a CPU estimate, not a measurement of the instruction.
    """
    x = torch.linspace(lo, hi, n, dtype=torch.float64)
    u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))
    t = torch.tanh(u)
    gap = torch.where(u.abs() >= saturate_at, torch.zeros_like(x), 0.5 * x.abs() * t.abs() * tanh_rel_err)
    i = int(gap.argmax())
    return float(gap[i]), abs(float(x[i]))


def gelu_memory_traffic(n_elements: int, bytes_per_element: int, bias_elements: int = 0) -> dict[str, int]:
    """Bytes read plus bytes written by each GELU pass over ``n_elements`` values.

    ``gelu_forward`` reads x and writes y; ``gelu_backward`` reads x and dy and writes
    dx (tanh is recomputed, not stored); ``bias_gelu_unfused`` is ``h + b`` in one pass
    (read h and b, write the sum) followed by GELU (read the sum, write y);
    ``bias_gelu_fused`` reads h and b and writes y once. The bias is counted once per
    pass, as if it stayed in cache after its first read.
    """
    n, b, nb = n_elements, bytes_per_element, bias_elements
    return {
        "gelu_forward": 2 * n * b,
        "gelu_backward": 3 * n * b,
        "bias_gelu_unfused": (2 * n + nb) * b + 2 * n * b,
        "bias_gelu_fused": (2 * n + nb) * b,
    }
