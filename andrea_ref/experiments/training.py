"""Short character-level training runs (one, several at once, over seeds) and Adam's first step."""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .._validate import check_positive_int
from ..model import AndreaModel
from .models import model_loss, seeded_model, tiny_config
from .summary import summarise_runs
from .text import TRAINING_TEXT, char_data, windows
from .workers import parallel_map, single_thread


def train_char_model(norm_position: str, steps: int = 100, lr: float = 1e-3, n_layer: int = 12,
                     init: str = "2017", seed: int = 0, batch: int = 16, seq_len: int = 32,
                     text: str = TRAINING_TEXT, warmup: int = 0, d_model: int = 64,
                     ) -> tuple[AndreaModel, list[float]]:
    """Train a small character-level model on ``text`` with Adam; return the model and
    the training loss of every step (nats per character).

    The learning rate is ``lr`` from the first step, or, with ``warmup > 0``, rises
    linearly from ``lr / warmup`` to ``lr`` over the first ``warmup`` steps
    (``torch.optim.lr_scheduler.LambdaLR``) and stays there. ``init="2017"`` uses
    :func:`init_like_2017` (and untied embeddings); ``init="andrea"`` ANDREA's own.
    """
    check_positive_int(steps, "steps")
    if not (isinstance(warmup, int) and warmup >= 0):
        raise ValueError(f"warmup must be a whole number of steps >= 0, got {warmup!r}")
    chars, data = char_data(text)
    cfg = tiny_config(n_layer=n_layer, d_model=d_model, norm_position=norm_position, vocab_size=len(chars),
                      context_length=seq_len, tied_embeddings=(init != "2017"))
    losses = []
    with single_thread():
        model = seeded_model(cfg, init, seed)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(steps):
            x, y = windows(data, batch, seq_len, gen)
            loss = model_loss(model, x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            schedule.step()
            losses.append(loss.item())
    return model, losses


def train_tiny(norm_position: str, steps: int = 100, lr: float = 1e-3, n_layer: int = 12,
               init: str = "2017", seed: int = 0, batch: int = 16, seq_len: int = 32,
               text: str = TRAINING_TEXT, warmup: int = 0, d_model: int = 64) -> list[float]:
    """The training losses of :func:`train_char_model` (no warm-up unless ``warmup`` is given)."""
    return train_char_model(norm_position, steps=steps, lr=lr, n_layer=n_layer, init=init, seed=seed,
                            batch=batch, seq_len=seq_len, text=text, warmup=warmup, d_model=d_model)[1]


def _train_losses(settings: dict) -> list[float]:
    return train_tiny(**settings)


def train_runs(runs: Sequence[dict]) -> list[list[float]]:
    """The loss curves of several :func:`train_tiny` runs, one dict of its arguments per
    run (``{"norm_position": "post", "warmup": 50, "seed": 1}``), trained in parallel;
    the curves come back in the order of ``runs``."""
    runs = [dict(r) for r in runs]
    for r in runs:
        if "norm_position" not in r:
            raise ValueError(f"every run must name its norm_position, got {r!r}")
    return parallel_map(_train_losses, runs)


def train_tiny_over_seeds(norm_position: str, seeds: Sequence[int] = tuple(range(10)),
                          **settings) -> dict[str, list]:
    """:func:`train_tiny` once per seed (weights, batches), in parallel; returns
    :func:`summarise_runs` of the loss curves, step by step."""
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    return summarise_runs(train_runs([dict(settings, norm_position=norm_position, seed=int(s)) for s in seeds]))


def adam_first_step(norm_position: str, seed: int = 0, grad_scale: float = 1.0, lr: float = 1e-3,
                    n_layer: int = 12, batch: int = 16, seq_len: int = 32,
                    text: str = TRAINING_TEXT) -> dict[str, float | torch.Tensor]:
    """One Adam step of the training run of :func:`train_char_model` (2017 initialisation,
    the same first batch), with every gradient multiplied by ``grad_scale`` before the step.

    Returns ``grad_norm`` (of all parameters together, after scaling), ``update``
    (the change of every parameter, flattened into one vector), ``update_rms`` and
    ``logit_change``: the RMS change of the model's logits on the step's own batch.
    """
    chars, data = char_data(text)
    cfg = tiny_config(n_layer=n_layer, norm_position=norm_position, vocab_size=len(chars),
                      context_length=seq_len, tied_embeddings=False)
    with single_thread():
        model = seeded_model(cfg, "2017", seed)
        x, y = windows(data, batch, seq_len, torch.Generator().manual_seed(seed))
        before = [p.detach().clone() for p in model.parameters()]
        with torch.no_grad():
            logits_before = model(x)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        model_loss(model, x, y).backward()
        with torch.no_grad():
            for p in model.parameters():
                p.grad.mul_(grad_scale)
            grad_norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in model.parameters()))
        opt.step()
        with torch.no_grad():
            update = torch.cat([(p - b).flatten() for p, b in zip(model.parameters(), before)])
            logit_change = float((model(x) - logits_before).pow(2).mean().sqrt())
    return {"grad_norm": grad_norm, "update": update, "update_rms": float(update.pow(2).mean().sqrt()),
            "logit_change": logit_change}


def _adam_first_step_summary(settings: dict) -> dict[str, float]:
    out = adam_first_step(**settings)
    out.pop("update")
    return out


def adam_first_steps(runs: Sequence[dict]) -> list[dict[str, float]]:
    """:func:`adam_first_step` for several settings at once, in parallel, without the
    ``update`` vectors (``grad_norm``, ``update_rms`` and ``logit_change`` of each)."""
    return parallel_map(_adam_first_step_summary, [dict(r) for r in runs])
