"""andrea_ref: the reference implementation of the ANDREA transformer block.

One concept per file:

========================  ==============================================
``config``                ModelConfig and the ANDREA-12M/120M/480M presets
``layernorm``             layer_norm, LayerNorm
``gelu``                  gelu (tanh form), gelu_exact, GELU
``mlp``                   mlp, MLP (x W1 + b1 -> GELU -> W2 + b2)
``attention``             causal_self_attention, CausalSelfAttention
``block``                 block, Block (pre-norm, two residuals)
``model``                 model_forward, AndreaModel
``params``                count_parameters
``kernels``               the handwritten GELU kernel and its loader
``grading``               the checks behind the graded notebooks
========================  ==============================================
"""
from .attention import CausalSelfAttention, causal_self_attention
from .block import Block, block
from .config import ANDREA_12M, ANDREA_120M, ANDREA_480M, CONFIGS, ModelConfig, get_config
from .gelu import GELU, gelu, gelu_derivative, gelu_exact, gelu_tanh_torch
from .layernorm import LayerNorm, layer_norm
from .mlp import MLP, mlp
from .model import AndreaModel, model_forward
from .params import ParameterCount, count_parameters

__all__ = [
    "ANDREA_12M", "ANDREA_120M", "ANDREA_480M", "CONFIGS", "ModelConfig", "get_config",
    "layer_norm", "LayerNorm", "gelu", "gelu_exact", "gelu_tanh_torch", "gelu_derivative", "GELU",
    "mlp", "MLP", "causal_self_attention", "CausalSelfAttention", "block", "Block",
    "model_forward", "AndreaModel", "count_parameters", "ParameterCount",
]
