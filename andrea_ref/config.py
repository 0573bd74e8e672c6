"""Model configurations: the ANDREA family and any GPT-style model.

The three presets are the source lesson's table. ``mlp_dim`` defaults to
``4 * d_model``; the vocabulary has 8449 tokens.

``context_length`` is **our choice**: the lesson never states how many positions the
models attend over. We use 1024, the context of GPT-2, whose layout ANDREA follows.
It only changes the size of the position embedding table.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ._validate import check_positive_int

NORM_POSITIONS = ("pre", "post", "none")
ACTIVATIONS = ("gelu", "relu")


@dataclass(frozen=True)
class ModelConfig:
    """Sizes and switches of a GPT-style decoder.

    Attributes:
        name: a label used in tables.
        n_layer: number of blocks.
        n_head: attention heads per block; must divide ``d_model``.
        d_model: width of the residual stream.
        mlp_dim: hidden width of each MLP; ``None`` means ``4 * d_model``.
        vocab_size: number of token ids.
        context_length: longest sequence (number of learned positions).
        bias: whether linear layers carry a bias.
        tied_embeddings: if True the unembedding is the token embedding, transposed.
        ln_eps: epsilon inside LayerNorm's square root.
        norm_position: ``"pre"`` (ANDREA: ``x + f(LN(x))``), ``"post"`` (``LN(x + f(x))``)
            or ``"none"`` (no LayerNorm anywhere, ``ln_f`` included; for experiments only).
        residual: False drops both skip connections (for experiments only).
        activation: the MLP's activation, ``"gelu"`` (ANDREA, tanh form) or ``"relu"``
            (for experiments only).
        init_std: standard deviation of the initial weights.
    """

    name: str = "custom"
    n_layer: int = 12
    n_head: int = 12
    d_model: int = 768
    mlp_dim: int | None = None
    vocab_size: int = 8449
    context_length: int = 1024
    bias: bool = True
    tied_embeddings: bool = True
    ln_eps: float = 1e-5
    norm_position: str = "pre"
    residual: bool = True
    init_std: float = 0.02
    activation: str = "gelu"

    def __post_init__(self):
        for field in ("n_layer", "n_head", "d_model", "vocab_size", "context_length"):
            check_positive_int(getattr(self, field), field)
        if self.mlp_dim is None:
            object.__setattr__(self, "mlp_dim", 4 * self.d_model)
        check_positive_int(self.mlp_dim, "mlp_dim")
        if self.d_model % self.n_head != 0:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head}); "
                f"the remainder is {self.d_model % self.n_head}"
            )
        if self.norm_position not in NORM_POSITIONS:
            raise ValueError(f"norm_position must be one of {NORM_POSITIONS}, got {self.norm_position!r}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {ACTIVATIONS}, got {self.activation!r}")
        if not (isinstance(self.ln_eps, (int, float)) and self.ln_eps > 0):
            raise ValueError(f"ln_eps must be a positive number, got {self.ln_eps!r}")
        if not (isinstance(self.init_std, (int, float)) and self.init_std > 0):
            raise ValueError(f"init_std must be a positive number, got {self.init_std!r}")

    @property
    def head_dim(self) -> int:
        """Width of one attention head: ``d_model // n_head``."""
        return self.d_model // self.n_head

    def replace(self, **changes) -> "ModelConfig":
        """A copy with some fields changed (``mlp_dim`` follows ``d_model`` unless given)."""
        if "d_model" in changes and "mlp_dim" not in changes and self.mlp_dim == 4 * self.d_model:
            changes["mlp_dim"] = None
        return dataclasses.replace(self, **changes)


ANDREA_12M = ModelConfig(name="ANDREA-12M", n_layer=6, n_head=12, d_model=384)
ANDREA_120M = ModelConfig(name="ANDREA-120M", n_layer=12, n_head=12, d_model=768)
ANDREA_480M = ModelConfig(name="ANDREA-480M", n_layer=16, n_head=24, d_model=1536)

CONFIGS = {c.name: c for c in (ANDREA_12M, ANDREA_120M, ANDREA_480M)}


def tiny_config(vocab_size: int) -> ModelConfig:
    """ANDREA-tiny, the model the capstone notebook assembles, trains and samples: one
    block of width 32 with 4 heads, reading 32 characters at a time (not a preset: it
    is sized to train in about a second on one CPU core)."""
    return ModelConfig(name="ANDREA-tiny", n_layer=1, n_head=4, d_model=32, vocab_size=vocab_size,
                       context_length=32)


def get_config(name: str) -> ModelConfig:
    """Look up a preset by name, e.g. ``get_config("ANDREA-120M")``."""
    try:
        return CONFIGS[name]
    except KeyError:
        raise ValueError(f"name must be one of {sorted(CONFIGS)}, got {name!r}") from None
