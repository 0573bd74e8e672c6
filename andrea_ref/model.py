"""The whole model: embeddings, a stack of blocks, a final LayerNorm, the unembedding.

    x = token_embed[token_ids] + position_embed[0..T-1]
    for each of the n_layer blocks:  x = block(x)
    x = LayerNorm_f(x)                 # (none with norm_position="none", for experiments)
    logits = x @ token_embed.T         # tied: the input table, transposed

With ``tied_embeddings=False`` a separate ``unembed`` matrix ``[d_model, vocab]`` is used.
:func:`forward_from_params` is the same model described by its parameters alone (the
capstone notebook's ``andrea_tiny``): every size is read from the tensors.
"""
from __future__ import annotations

from collections.abc import Mapping

import re

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


_BLOCK_KEY = re.compile(r"^blocks\.(\d+)\.")


def config_from_params(params: Mapping, n_head: int) -> ModelConfig:
    """The :class:`ModelConfig` whose :class:`AndreaModel` has the parameters ``params``
    (names and shapes of ``AndreaModel.named_parameters()``): vocabulary and width from
    ``token_embed``, context from ``position_embed``, the number of blocks from the
    ``blocks.<i>.`` names (0 .. n_layer - 1, each present), ``mlp_dim`` from the first
    block, tied unless an ``unembed`` matrix is given."""
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping of parameter names to tensors, got {type(params).__name__}")
    for key in ("token_embed", "position_embed"):
        if key not in params:
            raise KeyError(f"params is missing {key!r}; expected the parameter names of andrea_ref.AndreaModel")
    vocab_size, d_model = params["token_embed"].shape
    layers = sorted({int(m.group(1)) for k in params for m in [_BLOCK_KEY.match(k)] if m})
    if layers != list(range(len(layers))):
        raise KeyError(f"params holds blocks {layers}; expected blocks.0 ... blocks.<n_layer - 1>, each present")
    mlp_dim = params["blocks.0.mlp.w1"].shape[1] if layers else 4 * d_model
    return ModelConfig(name="from-params", n_layer=max(1, len(layers)), n_head=n_head, d_model=d_model,
                       mlp_dim=mlp_dim, vocab_size=vocab_size, context_length=params["position_embed"].shape[0],
                       tied_embeddings="unembed" not in params)


def forward_from_params(token_ids: torch.Tensor, params: Mapping, n_head: int) -> torch.Tensor:
    """:func:`model_forward` with the sizes read from ``params`` (:func:`config_from_params`):
    logits ``[batch, seq_len, vocab_size]`` for ``token_ids`` ``[batch, seq_len]``."""
    config = config_from_params(params, n_head)
    if not any(_BLOCK_KEY.match(k) for k in params):
        raise KeyError("params holds no block (blocks.0.ln_1.gamma, ...)")
    return model_forward(token_ids, params, config)


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


def init_params(config: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """The parameters of a fresh ``AndreaModel(config)`` drawn from ``seed`` alone:
    float32 on the CPU whatever the default dtype and device, the global random state
    left as it was (the same seed gives the same tensors everywhere)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    previous = torch.get_default_dtype()
    with torch.random.fork_rng(devices=[]), torch.device("cpu"):
        torch.manual_seed(seed)
        torch.set_default_dtype(torch.float32)
        try:
            model = AndreaModel(config)
        finally:
            torch.set_default_dtype(previous)
    return {name: p.detach().clone() for name, p in model.named_parameters()}
