"""The whole model: embeddings, a stack of blocks, a final LayerNorm, the unembedding.

    x = token_embed[token_ids] + position_embed[0..T-1]
    for each of the n_layer blocks:  x = block(x)
    x = LayerNorm_f(x)                 # (none with norm_position="none", for experiments)
    logits = x @ token_embed.T         # tied: the input table, transposed

With ``tied_embeddings=False`` a separate ``unembed`` matrix ``[d_model, vocab]`` is used.
"""
from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from ._validate import check_tensor
from .block import Block, block
from .config import ModelConfig
from .layernorm import LayerNorm, layer_norm


def _check_token_ids(token_ids, config: ModelConfig) -> None:
    if not isinstance(token_ids, torch.Tensor):
        raise TypeError(f"token_ids must be a torch.Tensor, got {type(token_ids).__name__}")
    if token_ids.dtype not in (torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8):
        raise TypeError(f"token_ids must be an integer tensor, got dtype {token_ids.dtype}")
    check_tensor(token_ids, "token_ids", ndim=2, floating=False)
    T = token_ids.shape[1]
    if T > config.context_length:
        raise ValueError(
            f"token_ids has sequence length {T}, longer than the context_length {config.context_length}"
        )
    if token_ids.numel() and (int(token_ids.min()) < 0 or int(token_ids.max()) >= config.vocab_size):
        raise ValueError(
            f"token_ids must lie in [0, {config.vocab_size - 1}] (vocab_size {config.vocab_size}), "
            f"got values from {int(token_ids.min())} to {int(token_ids.max())}"
        )


def model_forward(token_ids: torch.Tensor, params: Mapping, config: ModelConfig) -> torch.Tensor:
    """Logits ``[batch, seq_len, vocab_size]`` for ``token_ids`` ``[batch, seq_len]``.

    ``params`` maps :class:`AndreaModel`'s parameter names to tensors.
    """
    _check_token_ids(token_ids, config)
    T = token_ids.shape[1]
    x = params["token_embed"][token_ids] + params["position_embed"][:T]
    for i in range(config.n_layer):
        prefix = f"blocks.{i}."
        block_params = {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}
        x = block(x, block_params, config)
    if config.norm_position != "none":
        x = layer_norm(x, params["ln_f.gamma"], params["ln_f.beta"], config.ln_eps)
    unembed = params["token_embed"].T if config.tied_embeddings else params["unembed"]
    return x @ unembed


class AndreaModel(nn.Module):
    """A GPT-style decoder described by a :class:`ModelConfig` (ANDREA-12M/120M/480M or any other)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be an andrea_ref.ModelConfig, got {type(config).__name__}")
        self.config = config
        d = config.d_model
        self.token_embed = nn.Parameter(torch.empty(config.vocab_size, d))
        self.position_embed = nn.Parameter(torch.empty(config.context_length, d))
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = LayerNorm(d, config.ln_eps) if config.norm_position != "none" else None
        self.unembed = None if config.tied_embeddings else nn.Parameter(torch.empty(d, config.vocab_size))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Embeddings ~ N(0, init_std); each block initialised by :meth:`Block.reset_parameters`."""
        std = self.config.init_std
        nn.init.normal_(self.token_embed, std=std)
        nn.init.normal_(self.position_embed, std=std)
        if self.unembed is not None:
            nn.init.normal_(self.unembed, std=std)
        for blk in self.blocks:
            blk.reset_parameters()

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return model_forward(token_ids, dict(self.named_parameters()), self.config)
