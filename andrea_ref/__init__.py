"""andrea_ref: the reference implementation of the ANDREA transformer block.

One concept per file:

========================  ==============================================
``config``                ModelConfig and the ANDREA-12M/120M/480M presets
``layernorm``             layer_norm, LayerNorm
``gelu``                  gelu (tanh form), gelu_exact, GELU
``mlp``                   mlp, MLP (x W1 + b1 -> GELU -> W2 + b2)
``attention``             causal_self_attention, CausalSelfAttention
``block``                 block, Block (pre-norm, two residuals)
``model``                 model_forward, AndreaModel; forward_from_params, init_params (the capstone's)
``params``                count_parameters
``corpus``                Tiny Shakespeare as character ids, its split, batches, unigram entropy
``train``                 train_model, TrainConfig: a seeded, single-threaded training run
``sampling``              generate, sample_next: greedy decoding and temperature sampling
``ladder``                the loss ladder: one change of the baseline per rung, several seeds
``kernels``               the handwritten GELU kernel and its loader
``experiments``           the measurements behind the book's figures and numbers
``museum``                the classic mistakes, written as a learner would
``difftrace``             where a block first differs from the reference
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
