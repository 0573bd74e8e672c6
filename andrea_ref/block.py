"""The transformer block: two sublayers, each wrapped in a residual connection.

ANDREA's block is pre-norm::

    x = x + Attention(LayerNorm_1(x))     # attention sublayer
    x = x + MLP(LayerNorm_2(x))           # MLP sublayer

Each sublayer has its own LayerNorm. ``config.norm_position = "post"`` gives the
2017 arrangement ``x = LayerNorm(x + f(x))``, ``"none"`` drops the LayerNorms,
``config.residual = False`` drops the skip connections and ``config.activation =
"relu"`` swaps the MLP's GELU for a ReLU; all exist for the book's experiments.
"""
from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

from ._validate import check_tensor
from .attention import CausalSelfAttention, causal_self_attention
from .config import ModelConfig
from .layernorm import LayerNorm, layer_norm
from .mlp import ACTIVATION_FUNCTIONS, MLP, mlp

ATTN_NAMES = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")
MLP_NAMES = ("w1", "b1", "w2", "b2")


def _param(params: Mapping, key: str, required: bool):
    if key in params:
        return params[key]
    if required:
        raise KeyError(f"params is missing {key!r}; expected the parameter names of andrea_ref.Block")
    return None


def _block_steps(x: torch.Tensor, params: Mapping, config: ModelConfig, record: dict | None) -> torch.Tensor:
    if not isinstance(config, ModelConfig):
        raise TypeError(f"config must be an andrea_ref.ModelConfig, got {type(config).__name__}")
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping of parameter names to tensors, got {type(params).__name__}")
    check_tensor(x, "x", ndim=3, last_dim=config.d_model)
    eps = config.ln_eps
    need_bias = config.bias

    def ln(name, h):
        return layer_norm(h, _param(params, f"{name}.gamma", True), _param(params, f"{name}.beta", True), eps)

    def attn(h):
        args = [_param(params, f"attn.{n}", n.startswith("w") or need_bias) for n in ATTN_NAMES]
        return causal_self_attention(h, *args, n_head=config.n_head)

    def ffn(h):
        args = [_param(params, f"mlp.{n}", n.startswith("w") or need_bias) for n in MLP_NAMES]
        return mlp(h, *args, activation=config.activation)

    def keep(name, value):
        if record is not None:
            record[name] = value

    for ln_name, sub_name, sublayer in (("ln_1", "attn", attn), ("ln_2", "mlp", ffn)):
        resid_name = "resid_1" if sub_name == "attn" else "resid_2"
        if config.norm_position == "none":
            delta = sublayer(x)
            keep(sub_name, delta)
            x = x + delta if config.residual else delta
        elif config.norm_position == "pre":
            normed = ln(ln_name, x)
            keep(ln_name, normed)
            delta = sublayer(normed)
            keep(sub_name, delta)
            x = x + delta if config.residual else delta
        else:  # post-norm: LayerNorm after the residual addition
            delta = sublayer(x)
            keep(sub_name, delta)
            summed = x + delta if config.residual else delta
            x = ln(ln_name, summed)
            keep(ln_name, x)
        keep(resid_name, x)
    return x


def block(x: torch.Tensor, params: Mapping, config: ModelConfig) -> torch.Tensor:
    """One block applied to ``x`` of shape ``[batch, seq_len, d_model]``.

    ``params`` maps the parameter names of :class:`Block` (``"ln_1.gamma"``,
    ``"attn.w_q"``, ``"mlp.w1"``, ...) to tensors, e.g. ``dict(blk.named_parameters())``.
    """
    return _block_steps(x, params, config, None)


def pre_norm_block(x: torch.Tensor, params: Mapping, n_head: int) -> torch.Tensor:
    """ANDREA's pre-norm block with the exercises' signature, ``block(x, params, n_head)``:
    the sizes are read from ``params`` (``d_model`` from ``x``, ``mlp_dim`` from
    ``mlp.w1``), LayerNorm's eps is 1e-5. The capstone notebook provides it as ``block``."""
    if not isinstance(params, Mapping) or "mlp.w1" not in params:
        raise KeyError("params must map the parameter names of andrea_ref.Block (\"ln_1.gamma\", ..., "
                       "\"mlp.b2\") to tensors")
    check_tensor(x, "x", ndim=3)
    d_model, mlp_dim = params["mlp.w1"].shape
    config = ModelConfig(name="block", n_layer=1, n_head=n_head, d_model=d_model, mlp_dim=mlp_dim)
    return _block_steps(x, params, config, None)


class Block(nn.Module):
    """A transformer block with submodules ``ln_1``, ``attn``, ``ln_2``, ``mlp``."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be an andrea_ref.ModelConfig, got {type(config).__name__}")
        self.config = config
        normed = config.norm_position != "none"
        self.ln_1 = LayerNorm(config.d_model, config.ln_eps) if normed else None
        self.attn = CausalSelfAttention(config.d_model, config.n_head, config.bias)
        self.ln_2 = LayerNorm(config.d_model, config.ln_eps) if normed else None
        self.mlp = MLP(config.d_model, config.mlp_dim, config.bias, config.activation)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weights ~ N(0, init_std); the two output projections (``attn.w_o``, ``mlp.w2``)
        shrunk by ``1/sqrt(2 n_layer)`` so each sublayer starts with a small delta and
        the block starts close to the identity."""
        std = self.config.init_std
        out_std = std / (2 * self.config.n_layer) ** 0.5
        self.attn.reset_parameters(std, out_std)
        self.mlp.reset_parameters(std, out_std)
        for ln in filter(None, (self.ln_1, self.ln_2)):
            nn.init.ones_(ln.gamma)
            nn.init.zeros_(ln.beta)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _block_steps(x, dict(self.named_parameters()), self.config, None)

    def forward_with_intermediates(self, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The output and every intermediate: ``ln_1``, ``attn``, ``resid_1``, ``ln_2``,
        ``mlp_hidden`` (x W1 + b1), ``mlp_act`` (its GELU), ``mlp``, ``resid_2``."""
        record: dict[str, torch.Tensor] = {}
        out = _block_steps(x, dict(self.named_parameters()), self.config, record)
        mlp_in = record["ln_2"] if self.config.norm_position == "pre" else record["resid_1"]
        hidden = mlp_in @ self.mlp.w1
        if self.mlp.b1 is not None:
            hidden = hidden + self.mlp.b1
        record["mlp_hidden"] = hidden
        record["mlp_act"] = ACTIVATION_FUNCTIONS[self.config.activation](hidden)
        order = ("ln_1", "attn", "resid_1", "ln_2", "mlp_hidden", "mlp_act", "mlp", "resid_2")
        return out, {k: record[k] for k in order if k in record}  # no ln_* without LayerNorms
