"""The self-check's yardstick: the tanh-GELU in float64, the tolerances, and the comparison.

Every kernel result is compared (:func:`compare`) with :func:`ref_forward` /
:func:`ref_derivative` evaluated in float64 on the same (rounded) inputs, within the
tolerances ``FWD_TOL`` / ``BWD_TOL`` of the design notes (see the doc of
:mod:`andrea_ref.kernels.selfcheck`); each comparison is recorded as a :class:`Check`.
Also used by ``cuda/memcheck_pass.py``.
"""

from __future__ import annotations

import dataclasses
from typing import Optional, Tuple

import torch

SQRT_2_OVER_PI = (2.0 / torch.pi) ** 0.5
KAPPA = 0.044715

# (rtol, atol) per dtype and variant; backward may differ (fp32 fast).
FWD_TOL = {
    ("float32", "precise"): (1.3e-6, 1e-5),
    ("float32", "fast"): (1e-4, 1e-4),
    ("bfloat16", "precise"): (1.6e-2, 1e-3),
    ("bfloat16", "fast"): (1.6e-2, 1e-3),
    ("float16", "precise"): (1e-3, 1e-4),
    ("float16", "fast"): (1e-3, 1e-4),
    ("float64", "precise"): (1e-12, 1e-12),
}
BWD_TOL = dict(FWD_TOL)
BWD_TOL[("float32", "fast")] = (1e-3, 1e-3)


# --------------------------------------------------------------------------- reference


def ref_forward(h: torch.Tensor) -> torch.Tensor:
    h = h.double()
    return 0.5 * h * (1.0 + torch.tanh(SQRT_2_OVER_PI * (h + KAPPA * h**3)))


def ref_derivative(h: torch.Tensor) -> torch.Tensor:
    h = h.double()
    t = torch.tanh(SQRT_2_OVER_PI * (h + KAPPA * h**3))
    return 0.5 * (1.0 + t) + 0.5 * h * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * KAPPA * h * h)


@dataclasses.dataclass
class Check:
    op: str
    dtype: str
    variant: str
    case: str
    numel: int
    max_abs_err: float
    worst_ratio: float  # max(err / (atol + rtol |ref|)); <= 1 passes
    passed: bool
    note: str = ""


def compare(got: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float,
            scale: Optional[torch.Tensor] = None, terms: int = 1) -> Tuple[float, float, bool]:
    """Max abs error, worst err/bound ratio, and pass/fail of
    |got - ref| <= terms * atol + rtol * scale   (scale defaults to |ref|).

    For a sum of ``terms`` values each held to atol + rtol |v| (the bias gradient), the bound
    of the sum is terms * atol + rtol * sum |v|: pass ``scale = sum |v|`` and ``terms``."""
    if got.shape != ref.shape:
        return float("inf"), float("inf"), False
    if got.numel() == 0:
        return 0.0, 0.0, True
    g = got.detach().double()
    scale = ref.abs() if scale is None else scale
    err = (g - ref).abs()
    bound = terms * atol + rtol * scale
    finite = bool(torch.isfinite(g).all())
    ratio = float((err / bound).max())
    return float(err.max()), ratio, finite and ratio <= 1.0
