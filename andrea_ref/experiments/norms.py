"""LayerNorm, BatchNorm and RMSNorm side by side: what each one removes, and what each lets through."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def norm_contrast(batch: int = 3, seq_len: int = 5, d: int = 6, seed: int = 0, eps: float = 1e-5) -> dict:
    """LayerNorm, BatchNorm and RMSNorm applied to one random ``[batch, seq_len, d]`` tensor.

    The input has a different mean and spread in every feature and every token, so
    each normalisation shows what it removes. Returns ``x`` and the three outputs
    (``layer``, ``batch``, ``rms``; unit gains, zero shifts; BatchNorm with the
    statistics of this batch, as in training), and three measurements:
    ``other_sequence``: how far each norm's output for sequence 1 moves when
    sequence 2 alone is changed; ``later_position``: how far its output at position 1
    moves when only the last position changes; ``rms_vs_layer``: the largest gap
    between RMSNorm and LayerNorm, on ``x`` and on ``x`` with each token's mean removed.
    """
    from ..layernorm import layer_norm

    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(batch, seq_len, d, generator=g, dtype=torch.float64)
         * torch.linspace(0.5, 2.0, d, dtype=torch.float64) + torch.linspace(-1.0, 1.5, d, dtype=torch.float64))
    ones, zeros = torch.ones(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)

    def norms(t):
        return {
            "layer": layer_norm(t, ones, zeros, eps),
            # BatchNorm: one mean and variance per feature, over the batch and the positions
            "batch": F.batch_norm(t.transpose(1, 2), None, None, ones, zeros, training=True,
                                  eps=eps).transpose(1, 2),
            "rms": F.rms_norm(t, (d,), ones, eps),
        }

    out = norms(x)
    other = x.clone()
    other[1] = torch.randn(seq_len, d, generator=g, dtype=torch.float64) * 3
    later = x.clone()
    later[:, -1] = later[:, -1] + 5.0
    moved_other, moved_later = norms(other), norms(later)
    centred = x - x.mean(-1, keepdim=True)
    return {
        "x": x, **out,
        "other_sequence": {k: float((moved_other[k][0] - out[k][0]).abs().max()) for k in out},
        "later_position": {k: float((moved_later[k][:, 0] - out[k][:, 0]).abs().max()) for k in out},
        "rms_vs_layer": {"raw": float((out["rms"] - out["layer"]).abs().max()),
                         "centred": float((F.rms_norm(centred, (d,), ones, eps)
                                           - layer_norm(centred, ones, zeros, eps)).abs().max())},
    }
