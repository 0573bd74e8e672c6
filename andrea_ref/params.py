"""Counting parameters from a configuration alone, component by component.

Every count is derived from the shapes the modules create, and a test checks that
the total equals ``sum(p.numel() for p in AndreaModel(config).parameters())``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

from .config import ModelConfig


@dataclass(frozen=True)
class ParameterCount:
    """Parameter counts of one configuration (all ints)."""

    attention_weights_per_block: int  # the four [d, d] matrices Wq, Wk, Wv, Wo
    attention_per_block: int  # ... plus their biases
    mlp_weights_per_block: int  # W1 [d, 4d] + W2 [4d, d]
    mlp_per_block: int  # ... plus b1 and b2
    layernorm_per_block: int  # two LayerNorms, gamma and beta each
    per_block: int
    blocks: int  # n_layer * per_block
    token_embedding: int
    position_embedding: int
    final_layernorm: int
    unembedding: int  # 0 when tied to the token embedding
    total: int
    n_layernorms: int  # 2 per block + the final one

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def count_parameters(config: ModelConfig) -> ParameterCount:
    """Exact parameter counts of :class:`andrea_ref.AndreaModel` built from ``config``."""
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be an andrea_ref.ModelConfig, got {type(config).__name__}")
    d, m, L = config.d_model, config.mlp_dim, config.n_layer
    bias = 1 if config.bias else 0
    attention_weights = 4 * d * d
    attention = attention_weights + bias * 4 * d
    mlp_weights = d * m + m * d
    mlp = mlp_weights + bias * (m + d)
    n_ln = 0 if config.norm_position == "none" else 2  # LayerNorms per block
    layernorms = n_ln * (2 * d)
    per_block = attention + mlp + layernorms
    token = config.vocab_size * d
    position = config.context_length * d
    final_ln = 2 * d if n_ln else 0
    unembed = 0 if config.tied_embeddings else d * config.vocab_size
    blocks = L * per_block
    return ParameterCount(
        attention_weights_per_block=attention_weights,
        attention_per_block=attention,
        mlp_weights_per_block=mlp_weights,
        mlp_per_block=mlp,
        layernorm_per_block=layernorms,
        per_block=per_block,
        blocks=blocks,
        token_embedding=token,
        position_embedding=position,
        final_layernorm=final_ln,
        unembedding=unembed,
        total=blocks + token + position + final_ln + unembed,
        n_layernorms=n_ln * L + (1 if n_ln else 0),
    )
