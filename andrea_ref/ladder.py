"""The loss ladder: the same small character model trained with one choice changed at a time.

    baseline ("pre_norm"): ANDREA's block (pre-norm, residuals, GELU, MLP ratio 4, tied)
    every other rung = the baseline with one change, listed in RUNGS
    each rung is trained with several seeds; a seed draws the weights and the batches

Every run is an ordinary :func:`andrea_ref.train.train_model` call. :func:`run_ladder`
spreads the runs over a pool of worker processes, one thread each: a run's numbers do
not depend on which process ran it, so two workers give the same ladder as one.
"""
from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing
from collections.abc import Sequence

import torch

from .config import ModelConfig
from .corpus import load_corpus
from .train import TrainConfig, TrainResult, train_model

# The baseline: 2 blocks of width 64 with 4 heads, reading 64 characters; 500 steps of
# 8 windows (256,000 characters seen, about a quarter of the training split).
BASE_MODEL = ModelConfig(name="ANDREA-char", n_layer=2, n_head=4, d_model=64, vocab_size=65,
                         context_length=64)
BASE_TRAIN = TrainConfig(steps=500, batch_size=8, lr=3e-3, eval_every=50, eval_windows=128)
WARMUP_STEPS = 100
SEEDS = (0, 1, 2)

# One change per rung; a key of TrainConfig changes the training, any other the model.
RUNGS: dict[str, dict] = {
    "pre_norm": {},
    "no_residual": {"residual": False},
    "post_norm": {"norm_position": "post"},
    "post_norm_warmup": {"norm_position": "post", "warmup_steps": WARMUP_STEPS},
    "no_layernorm": {"norm_position": "none"},
    "relu": {"activation": "relu"},
    "mlp_ratio_2": {"mlp_dim": 2 * BASE_MODEL.d_model},
    "mlp_ratio_8": {"mlp_dim": 8 * BASE_MODEL.d_model},
    "untied": {"tied_embeddings": False},
}
BASELINE = "pre_norm"
_TRAIN_FIELDS = {f.name for f in TrainConfig.__dataclass_fields__.values()}


def rung_configs(rung: str, seed: int = 0, model: ModelConfig = BASE_MODEL,
                 train: TrainConfig = BASE_TRAIN) -> tuple[ModelConfig, TrainConfig]:
    """The model and training configurations of ``rung`` with ``seed``."""
    if rung not in RUNGS:
        raise ValueError(f"rung must be one of {sorted(RUNGS)}, got {rung!r}")
    changes = RUNGS[rung]
    model_changes = {k: v for k, v in changes.items() if k not in _TRAIN_FIELDS}
    train_changes = {k: v for k, v in changes.items() if k in _TRAIN_FIELDS}
    return model.replace(**model_changes), train.replace(seed=int(seed), **train_changes)


def run_rung(rung: str, seed: int = 0, keep_state: bool = False, model: ModelConfig = BASE_MODEL,
             train: TrainConfig = BASE_TRAIN) -> TrainResult:
    """Train one rung with one seed on Tiny Shakespeare."""
    model_config, train_config = rung_configs(rung, seed, model, train)
    return train_model(model_config, train_config, load_corpus(), keep_state=keep_state)


def _cost(rung: str) -> int:
    """A rough relative cost, so the slowest runs start first and the pool stays busy."""
    model_config, train_config = rung_configs(rung)
    return train_config.steps * (4 * model_config.d_model + 2 * model_config.mlp_dim)


def _worker_init() -> None:
    torch.set_num_threads(1)


def run_ladder(rungs: Sequence[str] = tuple(RUNGS), seeds: Sequence[int] = SEEDS, workers: int = 2,
               keep_state: Sequence[tuple[str, int]] = ((BASELINE, 0),), model: ModelConfig = BASE_MODEL,
               train: TrainConfig = BASE_TRAIN) -> dict[str, list[TrainResult]]:
    """Every rung with every seed: ``{rung: [result of seed 0, seed 1, ...]}``.

    ``keep_state`` names the (rung, seed) runs whose final weights are kept;
    ``workers`` processes run at a time (1: all in this process)."""
    rungs, seeds = list(rungs), [int(s) for s in seeds]
    unknown = sorted(set(rungs) - set(RUNGS))
    if unknown or not rungs or not seeds:
        raise ValueError(f"rungs must be a non-empty list of {sorted(RUNGS)} and seeds non-empty; got {rungs}, {seeds}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    keep = {(r, int(s)) for r, s in keep_state}
    jobs = sorted(((r, s) for r in rungs for s in seeds), key=lambda job: -_cost(job[0]))
    args = [(r, s, (r, s) in keep, model, train) for r, s in jobs]
    if workers == 1:
        done = [run_rung(*a) for a in args]
    else:
        context = multiprocessing.get_context("spawn")  # no state inherited from the caller's torch
        with cf.ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init) as pool:
            done = list(pool.map(run_rung, *zip(*args)))
    by_job = dict(zip(jobs, done))
    return {r: [by_job[(r, s)] for s in seeds] for r in rungs}


def band(results: Sequence[TrainResult]) -> dict[str, float]:
    """Final validation loss over seeds: ``min``, ``median``, ``max`` (NaN if any diverged)."""
    finals = sorted(r.final_val_loss for r in results)
    if any(math.isnan(v) for v in finals):
        return {"min": math.nan, "median": math.nan, "max": math.nan}
    n = len(finals)
    median = finals[n // 2] if n % 2 else 0.5 * (finals[n // 2 - 1] + finals[n // 2])
    return {"min": finals[0], "median": median, "max": finals[-1]}


def overlaps(a: dict[str, float], b: dict[str, float]) -> bool:
    """Whether two min-max bands share any value (then the seeds cannot tell the rungs apart)."""
    return a["min"] <= b["max"] and b["min"] <= a["max"]
