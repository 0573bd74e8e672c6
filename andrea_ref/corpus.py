"""The training text: characters as token ids, a fixed split, and random windows of it.

    chars   = sorted(set(text))                 # the vocabulary: one id per character
    ids     = [chars.index(c) for c in text]
    train   = ids[: n - n_val]                  # the first 90 % of the text
    val     = ids[n - n_val :]                  # the last 10 %: never trained on
    x, y    = window[:-1], window[1:]           # every position predicts the next character
                                                # (get_windows: the windows; get_batch: x and y)

The corpus shipped with the package is Tiny Shakespeare (``andrea_ref/data``, with its
provenance in the README there). The split is a cut, not a shuffle, so the validation
text is a stretch of plays the model has never read, and it is the same on every machine.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from ._validate import check_positive_int, check_tensor

DATA_DIR = Path(__file__).resolve().parent / "data"
TINY_SHAKESPEARE = DATA_DIR / "tinyshakespeare.txt"
TINY_SHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
VAL_FRACTION = 0.1


@dataclass(frozen=True, eq=False)
class CharCorpus:
    """A text cut into a training and a validation split of character ids."""

    chars: tuple[str, ...]
    train: torch.Tensor  # int64 ids, 1-D
    val: torch.Tensor

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    @property
    def ids(self) -> torch.Tensor:
        """The whole text's ids: the training split followed by the validation split."""
        return torch.cat([self.train, self.val])

    def encode(self, text: str) -> torch.Tensor:
        """The ids of ``text`` (every character must be in the vocabulary)."""
        index = {c: i for i, c in enumerate(self.chars)}
        unknown = sorted(set(text) - set(index))
        if unknown:
            raise ValueError(f"text has characters outside the vocabulary: {''.join(unknown)!r}")
        return torch.tensor([index[c] for c in text], dtype=torch.long)

    def decode(self, ids) -> str:
        """The text of a 1-D sequence of ids."""
        return "".join(self.chars[int(i)] for i in ids)


def char_corpus(text: str, val_fraction: float = VAL_FRACTION) -> CharCorpus:
    """Cut ``text`` into the first ``1 - val_fraction`` (training) and the rest (validation)."""
    if not isinstance(text, str) or len(text) < 2:
        raise ValueError("text must be a str of at least 2 characters")
    if not (isinstance(val_fraction, float) and 0.0 < val_fraction < 1.0):
        raise ValueError(f"val_fraction must be a float between 0 and 1, got {val_fraction!r}")
    chars = tuple(sorted(set(text)))
    index = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([index[c] for c in text], dtype=torch.long)
    n_val = max(1, round(len(ids) * val_fraction))
    return CharCorpus(chars=chars, train=ids[:-n_val], val=ids[-n_val:])


@lru_cache(maxsize=4)
def load_corpus(val_fraction: float = VAL_FRACTION) -> CharCorpus:
    """Tiny Shakespeare as a :class:`CharCorpus` (checked against its published sha256)."""
    raw = TINY_SHAKESPEARE.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != TINY_SHAKESPEARE_SHA256:
        raise RuntimeError(f"{TINY_SHAKESPEARE} has sha256 {digest}, expected {TINY_SHAKESPEARE_SHA256} "
                           "(andrea_ref/data/README.md): restore the shipped copy")
    return char_corpus(raw.decode("utf-8"), val_fraction)


def _check_ids(ids, name: str) -> torch.Tensor:
    check_tensor(ids, name, floating=False)
    if ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise TypeError(f"{name} must be an integer tensor, got dtype {ids.dtype}")
    if ids.numel() == 0 or int(ids.min()) < 0:
        raise ValueError(f"{name} must hold at least one id, and no negative one")
    return ids.flatten()


def unigram_loss(fit_ids: torch.Tensor, eval_ids: torch.Tensor) -> float:
    """The loss (nats per character) on ``eval_ids`` of the unigram model fitted to ``fit_ids``:
    a model that predicts every character from the frequencies in ``fit_ids`` alone."""
    fit, ev = _check_ids(fit_ids, "fit_ids"), _check_ids(eval_ids, "eval_ids")
    n = max(int(fit.max()), int(ev.max())) + 1
    p = torch.bincount(fit, minlength=n).double() / fit.numel()
    counts = torch.bincount(ev, minlength=n).double()
    seen = counts > 0
    return float(-(counts[seen] * p[seen].log()).sum() / ev.numel())  # inf if eval has an unseen id


def unigram_entropy(ids: torch.Tensor) -> float:
    """Entropy in nats per character of the id frequencies in ``ids``: the loss of a model
    that knows how often each character occurs and nothing about its neighbours."""
    return unigram_loss(ids, ids)


def uniform_loss(vocab_size: int) -> float:
    """The loss of a model that gives every character the same probability: ln(vocab_size)."""
    check_positive_int(vocab_size, "vocab_size")
    return math.log(vocab_size)


def get_windows(ids: torch.Tensor, batch_size: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``batch_size`` windows of ``length`` consecutive ids, ``[batch_size, length]``, at
    random offsets drawn from ``generator``."""
    check_positive_int(batch_size, "batch_size")
    check_positive_int(length, "length")
    if ids.numel() < length:
        raise ValueError(f"ids holds {ids.numel()} ids, fewer than length = {length}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    starts = torch.randint(0, ids.numel() - length + 1, (batch_size, 1), generator=generator)
    return ids[starts + torch.arange(length)]


def get_batch(ids: torch.Tensor, batch_size: int, context: int,
              generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch_size`` windows at random offsets drawn from ``generator``: inputs ``x`` and
    targets ``y`` (``x`` shifted by one), each ``[batch_size, context]``."""
    check_positive_int(context, "context")
    if ids.numel() < context + 1:
        raise ValueError(f"ids holds {ids.numel()} ids, fewer than context + 1 = {context + 1}")
    windows = get_windows(ids, batch_size, context + 1, generator)
    return windows[:, :-1], windows[:, 1:]
