"""The character bigrams of a text, and the best loss a model without blocks reaches on them."""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from .text import TRAINING_TEXT, char_data, unigram_entropy
from .workers import parallel_map, single_thread


def bigram_statistics(text: str = TRAINING_TEXT) -> dict:
    """The character bigrams of ``text``: ``chars``, ``counts`` ``[V, V]`` (row: the
    character, column: the one after it), ``next_given`` = P(next | current) (rows of
    characters never followed by anything are uniform), ``weights`` = how often each
    character is followed by another, and the ``bigram_entropy`` and
    ``unigram_entropy`` in nats per character: the best losses of a model that sees
    the current character, and of one that sees nothing."""
    chars, data = char_data(text)
    V = len(chars)
    counts = torch.zeros(V, V, dtype=torch.float64)
    counts.index_put_((data[:-1], data[1:]), torch.ones(len(data) - 1, dtype=torch.float64), accumulate=True)
    rows = counts.sum(1, keepdim=True)
    next_given = torch.where(rows > 0, counts / rows.clamp(min=1), torch.full_like(counts, 1.0 / V))
    weights = rows.squeeze(1) / rows.sum()
    plogp = torch.where(next_given > 0, next_given * next_given.log(), torch.zeros_like(next_given))
    return {"chars": chars, "counts": counts, "next_given": next_given, "weights": weights,
            "bigram_entropy": float(-(weights[:, None] * plogp).sum()),
            "unigram_entropy": unigram_entropy(text)}


def fit_direct_path(tied: bool, normalised: bool = True, d_model: int = 64, steps: int = 500, lr: float = 1e-2,
                    seed: int = 0, text: str = TRAINING_TEXT) -> float:
    """The loss a model without blocks reaches on the bigrams of ``text``.

    The model reads the current character's embedding ``E[a]``, optionally passes it
    through a LayerNorm with learned gain and shift (``normalised``, as ``ln_f`` does
    in ANDREA), and scores every next character ``b`` against the unembedding: the
    token table itself (``tied``: ``score(a, b) = LN(E[a]) . E[b]``) or a separate
    matrix ``U``. Adam, ``steps`` full-batch steps on the exact expected loss
    (nats per character); float64. Returns the final loss.
    """
    stats = bigram_statistics(text)
    P, w = stats["next_given"], stats["weights"]
    V = P.shape[0]
    with single_thread():
        g = torch.Generator().manual_seed(seed)
        E = (torch.randn(V, d_model, generator=g, dtype=torch.float64) * 0.02).requires_grad_()
        U = (torch.randn(d_model, V, generator=g, dtype=torch.float64) * 0.02).requires_grad_()
        gamma = torch.ones(d_model, dtype=torch.float64, requires_grad=True)
        beta = torch.zeros(d_model, dtype=torch.float64, requires_grad=True)
        params = [E] + ([gamma, beta] if normalised else []) + ([] if tied else [U])
        opt = torch.optim.Adam(params, lr=lr)

        def loss_now():
            from ..layernorm import layer_norm
            h = layer_norm(E, gamma, beta) if normalised else E
            logits = h @ (E.T if tied else U)
            return -(w[:, None] * P * F.log_softmax(logits, dim=-1)).sum()

        for _ in range(steps):
            loss = loss_now()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        with torch.no_grad():
            return float(loss_now())


def _fit_direct_path(settings: dict) -> float:
    return fit_direct_path(**settings)


def fit_direct_paths(runs: Sequence[dict]) -> list[float]:
    """:func:`fit_direct_path` for several settings (dicts of its arguments), in parallel."""
    return parallel_map(_fit_direct_path, [dict(r) for r in runs])
