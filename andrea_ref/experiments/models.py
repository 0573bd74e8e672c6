"""The small models of the experiments: their configuration, the 2017 initialisation, a
freshly seeded model and its next-token loss."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..config import ModelConfig
from ..model import AndreaModel


def tiny_config(**changes) -> ModelConfig:
    """A small configuration (4 blocks, 4 heads, d_model 64, 64 tokens, context 32)."""
    base = ModelConfig(name="tiny", n_layer=4, n_head=4, d_model=64, vocab_size=64, context_length=32)
    return base.replace(**changes)


def init_like_2017(model: AndreaModel) -> AndreaModel:
    """Re-initialise ``model`` the way the 2017 transformer starts training.

    Every block weight ~ N(0, 1/d_model) with no down-scaling of the output
    projections, and embeddings at unit scale (the 2017 model multiplies its
    embeddings by sqrt(d_model)), so the residual stream starts at unit size and
    each sublayer's output is as large as its input. The model must be untied.
    """
    cfg = model.config
    if cfg.tied_embeddings:
        raise ValueError("model.config.tied_embeddings must be False for init_like_2017 (unit-scale "
                         "embeddings would make the tied output logits huge)")
    std = cfg.d_model ** -0.5
    with torch.no_grad():
        for blk in model.blocks:
            blk.attn.reset_parameters(std, std)
            blk.mlp.reset_parameters(std, std)
        torch.nn.init.normal_(model.token_embed, std=1.0)
        torch.nn.init.normal_(model.position_embed, std=1.0)
        torch.nn.init.normal_(model.unembed, std=std)
    return model


def seeded_model(cfg: ModelConfig, init: str, seed: int) -> AndreaModel:
    """A freshly seeded model with ANDREA's initialisation (``"andrea"``) or the 2017 one (``"2017"``)."""
    if init not in ("2017", "andrea"):
        raise ValueError(f"init must be '2017' or 'andrea', got {init!r}")
    torch.manual_seed(seed)
    model = AndreaModel(cfg)
    return init_like_2017(model) if init == "2017" else model


def model_loss(model: AndreaModel, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model(ids)
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())
