"""Training a model on a character corpus, and measuring it on text it has not seen.

    torch.manual_seed(seed); model = AndreaModel(config)     # the seed draws the weights...
    for step in 1 .. steps:
        lr_step = lr * min(1, step / warmup_steps)          # ...and the batches; no warm-up: lr
        x, y = get_batch(train split)                       # y is x shifted by one character
        loss = cross_entropy(model(x), y)                   # nats per character
        Adam step with lr_step
        every eval_every steps (and at step 0): loss on fixed validation windows

The validation windows are drawn once, from their own seed, so every run of every
configuration is measured on the same stretch of unseen text. Training runs on one
thread, so a run is deterministic: the same configurations give the same numbers bit
for bit on one machine.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .config import ModelConfig
from .corpus import CharCorpus, get_batch, load_corpus
from .experiments.workers import single_thread
from .model import AndreaModel

VAL_SEED = 12345  # the seed of the validation windows, shared by every run


@dataclass(frozen=True)
class TrainConfig:
    """How a model is trained: steps, batch, learning rate, warm-up, evaluation, seed."""

    steps: int = 400
    batch_size: int = 32
    lr: float = 2e-3
    warmup_steps: int = 0  # 0: the full learning rate from the first step
    eval_every: int = 50
    eval_windows: int = 256  # validation windows of context_length characters
    seed: int = 0

    def __post_init__(self):
        for name in ("steps", "batch_size", "eval_every", "eval_windows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        for name in ("warmup_steps", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be an int >= 0, got {value!r}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a positive number, got {self.lr!r}")

    def replace(self, **changes) -> "TrainConfig":
        return dataclasses.replace(self, **changes)


@dataclass
class TrainResult:
    """What a run measured. ``val_losses[i]`` is the validation loss after ``eval_steps[i]``
    steps (step 0: the untrained model); a run whose loss stopped being finite is
    ``diverged`` and its later losses are NaN."""

    eval_steps: list[int]
    val_losses: list[float]
    train_losses: list[float]
    diverged: bool = False
    cpu_seconds: float = 0.0  # processor time of the run (a measurement, not a result)
    state_dict: dict | None = field(default=None, repr=False)

    @property
    def final_val_loss(self) -> float:
        return self.val_losses[-1]


def learning_rate(step: int, config: TrainConfig) -> float:
    """The learning rate of step ``step`` (1-based): linear warm-up, then constant."""
    if config.warmup_steps == 0:
        return config.lr
    return config.lr * min(1.0, step / config.warmup_steps)


def fixed_windows(ids: torch.Tensor, context: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` windows of ``ids`` at offsets drawn from the fixed seed ``VAL_SEED``: the same
    windows every time (``ids = corpus.val``: the windows every run is measured on)."""
    return get_batch(ids, n, context, torch.Generator().manual_seed(VAL_SEED))


@torch.no_grad()
def evaluate(model: AndreaModel, x: torch.Tensor, y: torch.Tensor, batch_size: int = 64) -> float:
    """Mean cross-entropy (nats per character) of ``model`` on windows ``x`` -> ``y``."""
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, x.shape[0], batch_size):
        logits = model(x[i:i + batch_size])
        total += float(F.cross_entropy(logits.flatten(0, 1), y[i:i + batch_size].flatten(), reduction="sum"))
    model.train(was_training)
    return total / y.numel()


def train_model(model_config: ModelConfig, train_config: TrainConfig = TrainConfig(),
                corpus: CharCorpus | None = None, keep_state: bool = False) -> TrainResult:
    """Train a fresh :class:`AndreaModel` built from ``model_config`` on ``corpus`` (default:
    Tiny Shakespeare) as ``train_config`` says; ``keep_state`` keeps the final weights."""
    if not isinstance(model_config, ModelConfig):
        raise TypeError(f"model_config must be an andrea_ref.ModelConfig, got {type(model_config).__name__}")
    if not isinstance(train_config, TrainConfig):
        raise TypeError(f"train_config must be an andrea_ref.train.TrainConfig, got {type(train_config).__name__}")
    corpus = load_corpus() if corpus is None else corpus
    if model_config.vocab_size != corpus.vocab_size:
        raise ValueError(f"model_config.vocab_size is {model_config.vocab_size}, but the corpus has "
                         f"{corpus.vocab_size} characters; use model_config.replace(vocab_size={corpus.vocab_size})")
    cfg, ctx = train_config, model_config.context_length
    val_x, val_y = fixed_windows(corpus.val, ctx, cfg.eval_windows)
    result = TrainResult(eval_steps=[], val_losses=[], train_losses=[])
    start = time.process_time()
    with single_thread():
        torch.manual_seed(cfg.seed)
        model = AndreaModel(model_config)
        opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        batches = torch.Generator().manual_seed(cfg.seed)
        result.eval_steps.append(0)
        result.val_losses.append(evaluate(model, val_x, val_y))
        for step in range(1, cfg.steps + 1):
            for group in opt.param_groups:
                group["lr"] = learning_rate(step, cfg)
            x, y = get_batch(corpus.train, cfg.batch_size, ctx, batches)
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
            if not torch.isfinite(loss):
                result.diverged = True
            else:
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
            result.train_losses.append(loss.item())
            if step % cfg.eval_every == 0 or step == cfg.steps:
                result.eval_steps.append(step)
                result.val_losses.append(math.nan if result.diverged else evaluate(model, val_x, val_y))
            if result.diverged:
                break
    if result.diverged:  # the evaluations the run did not reach
        planned = [s for s in range(cfg.eval_every, cfg.steps + 1, cfg.eval_every)]
        planned += [] if cfg.steps % cfg.eval_every == 0 else [cfg.steps]
        for s in planned[len(result.eval_steps) - 1:]:
            result.eval_steps.append(s)
            result.val_losses.append(math.nan)
    result.cpu_seconds = time.process_time() - start
    if keep_state:
        result.state_dict = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return result
