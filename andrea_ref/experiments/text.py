"""The character data of the training experiments: the text, its ids, batches of windows of
it, and the entropy of its characters."""
from __future__ import annotations

import torch


# A short original text for the character-level training runs (no downloads).
TRAINING_TEXT = (
    "A transformer block reads the residual stream, computes a small correction and adds it back. "
    "The attention sublayer lets every position gather information from the positions before it. "
    "The MLP sublayer then rewrites each position on its own, with two linear maps and a smooth "
    "activation between them. Stack twelve such blocks, put an embedding table below them and a "
    "final layer norm above them, and you have a language model that predicts the next token. "
    "Layer normalisation rescales each token to zero mean and unit variance before a sublayer sees it, "
    "and learned gains and shifts give back the scale that the sublayer needs. Placed before the "
    "sublayer it leaves the residual stream untouched; placed after the addition it normalises the "
    "stream itself, and deep stacks of that kind need a careful warm-up of the learning rate. "
    "The GELU activation weighs its input by the probability that a standard normal variable lies "
    "below it: large positive inputs pass almost unchanged, large negative inputs are silenced, and "
    "near zero the curve bends smoothly instead of breaking at a corner. "
) * 2


def char_data(text: str) -> tuple[list[str], torch.Tensor]:
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    return chars, torch.tensor([index[c] for c in text], dtype=torch.long)


def windows(data: torch.Tensor, batch: int, seq_len: int, gen: torch.Generator):
    """``batch`` random windows of ``seq_len`` characters and, one character later, their targets."""
    starts = torch.randint(0, len(data) - seq_len - 1, (batch, 1), generator=gen)
    offsets = torch.arange(seq_len)
    return data[starts + offsets], data[starts + offsets + 1]


def char_batch(batch: int = 16, seq_len: int = 32, seed: int = 0,
               text: str = TRAINING_TEXT) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch of character windows of ``text`` (ids, and the next character of each as
    targets), drawn the way :func:`train_char_model` draws its training batches."""
    return windows(char_data(text)[1], batch, seq_len, torch.Generator().manual_seed(seed))


def unigram_entropy(text: str = TRAINING_TEXT) -> float:
    """Entropy (nats/char) of the character frequencies of ``text``: the loss of a
    model that has learned which characters are common and nothing else."""
    _, data = char_data(text)
    p = torch.bincount(data).double() / len(data)
    p = p[p > 0]
    return float(-(p * p.log()).sum())
