"""From logits to text: greedy decoding and temperature sampling.

    p = softmax(logits / temperature)       temperature > 0
    temperature = 1    p is the model's own distribution over the next token
    temperature < 1    sharper: likely tokens become likelier
    temperature -> 0   p puts all its mass on the largest logit, i.e. greedy decoding
    temperature = 0    greedy: argmax (the first index among equal maxima); no randomness

Sampling draws from a ``torch.Generator`` the caller seeds, so a sample is reproducible:
the same model, prompt, temperature and seed give the same text.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ._validate import check_tensor


def _check_temperature(temperature) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a number, got {type(temperature).__name__}")
    if not (math.isfinite(temperature) and temperature >= 0):
        raise ValueError(f"temperature must be a finite number >= 0 (0 = greedy), got {temperature!r}")
    return float(temperature)


def next_token_probs(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``softmax(logits / temperature)`` over the last dimension, for ``temperature > 0``.

    The largest logit is subtracted first, so a tiny temperature gives a one-hot
    vector (all mass on the argmax) instead of an overflow."""
    check_tensor(logits, "logits", min_ndim=1)
    t = _check_temperature(temperature)
    if t == 0:
        raise ValueError("temperature must be > 0 for a distribution; temperature 0 is greedy (sample_next)")
    shifted = logits - logits.max(dim=-1, keepdim=True).values
    return F.softmax(shifted / t, dim=-1)


def sample_next(logits: torch.Tensor, temperature: float = 1.0,
                generator: torch.Generator | None = None) -> torch.Tensor:
    """One token id per row of ``logits`` ``[..., vocab]``: the argmax when ``temperature``
    is 0, otherwise a draw from :func:`next_token_probs` with ``generator`` (required)."""
    check_tensor(logits, "logits", min_ndim=1)
    t = _check_temperature(temperature)
    if t == 0:
        return logits.argmax(dim=-1)
    if not isinstance(generator, torch.Generator):
        raise TypeError("generator must be a torch.Generator when temperature > 0, e.g. "
                        f"torch.Generator().manual_seed(0); got {type(generator).__name__}")
    probs = next_token_probs(logits, t)
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])


@torch.no_grad()
def generate(model, prompt: torch.Tensor, n_new: int, temperature: float = 1.0,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """Extend ``prompt`` (token ids ``[T]`` or ``[batch, T]``) by ``n_new`` tokens, one at a
    time: each step feeds the last ``context_length`` tokens to ``model`` and picks the
    next token from the logits of the last position with :func:`sample_next`.

    Returns the prompt followed by the new tokens, with the prompt's number of dimensions.
    """
    if isinstance(n_new, bool) or not isinstance(n_new, int) or n_new < 0:
        raise ValueError(f"n_new must be an int >= 0, got {n_new!r}")
    check_tensor(prompt, "prompt", floating=False)
    if prompt.dtype.is_floating_point or prompt.dim() not in (1, 2) or prompt.shape[-1] == 0:
        raise ValueError(f"prompt must be integer token ids of shape [T] or [batch, T] with T >= 1, "
                         f"got dtype {prompt.dtype} and shape {tuple(prompt.shape)}")
    _check_temperature(temperature)
    context = model.config.context_length
    ids = prompt.long().reshape(-1, prompt.shape[-1])
    was_training = model.training
    model.eval()
    try:
        for _ in range(n_new):
            logits = model(ids[:, -context:])[:, -1]
            ids = torch.cat([ids, sample_next(logits, temperature, generator)[:, None]], dim=1)
    finally:
        model.train(was_training)
    return ids[0] if prompt.dim() == 1 else ids
