"""Gradients at initialisation: how much reaches the embeddings through stacks of each
depth (with and without residuals), and how large each block's weight gradients are."""
from __future__ import annotations

import functools
from collections.abc import Sequence

import torch

from ..config import ModelConfig
from ..model import AndreaModel
from .models import model_loss, seeded_model, tiny_config
from .summary import summarise_runs
from .workers import parallel_map, single_thread


def _random_batch(config: ModelConfig, batch: int, generator: torch.Generator):
    ids = torch.randint(0, config.vocab_size, (batch, config.context_length), generator=generator)
    targets = torch.randint(0, config.vocab_size, (batch, config.context_length), generator=generator)
    return ids, targets


def _embedding_grad_norms_one_seed(seed: int, depths: Sequence[int], residual: bool, config: ModelConfig,
                                   batch: int) -> list[float]:
    out = []
    with single_thread():
        for depth in depths:
            torch.manual_seed(seed)
            model = AndreaModel(config.replace(n_layer=int(depth), residual=residual))
            ids, targets = _random_batch(model.config, batch, torch.Generator().manual_seed(1000 + seed))
            model_loss(model, ids, targets).backward()
            out.append(model.position_embed.grad.norm().item())
    return out


def embedding_grad_norms_over_seeds(depths: Sequence[int], residual: bool,
                                    seeds: Sequence[int] = tuple(range(10)),
                                    config: ModelConfig | None = None, batch: int = 8) -> dict[str, list]:
    """Norm of the loss gradient that reaches the position embedding, for stacks of each depth.

    The position embedding is used only at the bottom of the stack, so its gradient
    has travelled back through every block (the token embedding would also collect
    a direct gradient through the tied unembedding). Random tokens and targets; each
    seed draws new weights and a new batch. Returns :func:`summarise_runs` over the
    seeds, per depth (``runs``: one list of ``len(depths)`` norms per seed).
    """
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    task = functools.partial(_embedding_grad_norms_one_seed, depths=list(depths), residual=residual,
                             config=config or tiny_config(), batch=batch)
    return summarise_runs(parallel_map(task, [int(s) for s in seeds]))


def embedding_grad_norms(depths: Sequence[int], residual: bool, seeds: Sequence[int] = (0, 1, 2),
                         config: ModelConfig | None = None, batch: int = 8) -> list[float]:
    """The median over ``seeds`` of :func:`embedding_grad_norms_over_seeds`, per depth."""
    return embedding_grad_norms_over_seeds(depths, residual, seeds, config, batch)["median"]


def per_layer_grad_norms(norm_position: str, n_layer: int = 12, init: str = "2017", seed: int = 0,
                         batch: int = 8) -> list[float]:
    """Gradient norm of each block's weight matrices (Wq, Wk, Wv, Wo, W1, W2) at initialisation.

    ``init="2017"`` uses :func:`init_like_2017`; ``init="andrea"`` keeps ANDREA's own.
    """
    cfg = tiny_config(n_layer=n_layer, norm_position=norm_position, tied_embeddings=(init != "2017"))
    with single_thread():
        model = seeded_model(cfg, init, seed)
        ids, targets = _random_batch(cfg, batch, torch.Generator().manual_seed(1000 + seed))
        model_loss(model, ids, targets).backward()
        norms = []
        for blk in model.blocks:
            sq = sum((p.grad ** 2).sum() for n, p in blk.named_parameters()
                     if n.split(".")[-1] in ("w_q", "w_k", "w_v", "w_o", "w1", "w2"))
            norms.append(float(torch.sqrt(sq)))
    return norms


def per_layer_grad_norms_over_seeds(norm_position: str, seeds: Sequence[int] = tuple(range(10)),
                                    n_layer: int = 12, init: str = "2017",
                                    batch: int = 8) -> dict[str, list[float]]:
    """:func:`per_layer_grad_norms` repeated for every seed in ``seeds``.

    Returns, per block (index 0 = the block nearest the embeddings), the ``mean``,
    ``std`` (population), ``min`` and ``max`` over the seeds, and ``runs``: one list
    of ``n_layer`` gradient norms per seed. Each seed draws both the weights and the
    random batch afresh.
    """
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    return summarise_runs([per_layer_grad_norms(norm_position, n_layer=n_layer, init=init, seed=int(s),
                                                batch=batch) for s in seeds])
