"""The book's experiments, small enough to run on two CPU cores in seconds.

Every function is seeded and runs single-threaded, so the same call gives the
same numbers on every machine the course is tested on; the book glues these
numbers into its prose and a test recomputes them.

One job per module:

=============  =============================================================
``workers``    how the experiments run: one torch thread, seeds in parallel worker processes
``style``      the palette and matplotlib style of every figure of the book
``summary``    mean, median, spread, min and max of an experiment over seeds
``text``       the training text, its character ids, batches of windows, its unigram entropy
``models``     the small configuration, the 2017 initialisation, a seeded model and its loss
``gradients``  gradients at initialisation: reaching the embeddings, per block
``stream``     the residual stream at initialisation: what blocks change and add, one token's path
``training``   short character-level training runs and Adam's first step
``bigrams``    the bigram table of a text and the best loss of a model without blocks
``gelu_mlp``   the GELU and MLP chapters' numbers: approximation errors, widths, memory traffic
``norms``      LayerNorm, BatchNorm and RMSNorm side by side
=============  =============================================================

The functions, all importable from this package:

========================  ====================================================
``use_book_style``        one matplotlib style for every figure of the book
``tiny_config``           a small GPT-style configuration for experiments
``embedding_grad_norms``  gradient reaching the embeddings vs depth, +/- residuals
``per_layer_grad_norms``  gradient norm of each block's weights at initialisation
``train_tiny``            a short character-level training run (optional warm-up)
``train_char_model``      the same run, returning the trained model as well
``char_batch``            one batch of character windows, drawn as the training runs draw them
``train_runs``            several training runs at once, each with its own settings
``train_tiny_over_seeds`` training loss curves over several seeds (mean, min, max)
``block_relative_change`` how far one block moves its input at initialisation
``stream_relative_change``  the same for every block of a model at initialisation
``perturb_one_token``     which positions each sublayer lets a change reach
``token_trace``           shape and size of one token at every step of a block
``gelu_approximation_error``  the largest gap between tanh-GELU and exact GELU
``per_layer_grad_norms_over_seeds``  the per-block gradient norms over several seeds
``residual_sum_rms``      size of what the blocks add to the stream, vs depth
``embedding_grad_norms_over_seeds``  the depth experiment over several seeds
``residual_sum_rms_over_seeds``      the residual-sum experiment over several seeds
``bigram_statistics``     the character bigram table of a text and its entropies
``fit_direct_path``       the best loss a zero-block model (tied or untied) reaches on it
``fit_direct_paths``      the same for several settings at once
``norm_contrast``         LayerNorm, BatchNorm and RMSNorm on one tensor, side by side
``adam_first_step``       Adam's first step, with every gradient rescaled or not
``adam_first_steps``      the same for several settings at once
========================  ====================================================

Experiments over several seeds run the seeds in parallel worker processes (one per
CPU core, at most :data:`MAX_WORKERS`), each single-threaded: the numbers are the
same as a serial run's, only sooner.
"""
from __future__ import annotations

from .bigrams import bigram_statistics, fit_direct_path, fit_direct_paths
from .gelu_mlp import (
    PTX_TANH_APPROX_REL_ERR, fast_tanh_gelu_error_emulated, gelu_approximation_error, gelu_memory_traffic,
    llama_mlp_hidden,
)
from .gradients import (
    embedding_grad_norms, embedding_grad_norms_over_seeds, per_layer_grad_norms, per_layer_grad_norms_over_seeds,
)
from .models import init_like_2017, tiny_config
from .norms import norm_contrast
from .stream import (
    TRACE_STEPS, block_relative_change, perturb_one_token, residual_sum_rms, residual_sum_rms_over_seeds,
    stream_relative_change, token_trace,
)
from .style import PLOT_COLORS, use_book_style
from .summary import summarise_runs
from .text import TRAINING_TEXT, char_batch, unigram_entropy
from .training import adam_first_step, adam_first_steps, train_char_model, train_runs, train_tiny, train_tiny_over_seeds
from .workers import MAX_WORKERS

__all__ = [
    "TRAINING_TEXT", "use_book_style", "tiny_config", "init_like_2017", "embedding_grad_norms",
    "per_layer_grad_norms", "train_tiny", "block_relative_change", "stream_relative_change",
    "perturb_one_token", "token_trace", "gelu_approximation_error", "PLOT_COLORS",
    "per_layer_grad_norms_over_seeds", "residual_sum_rms", "train_char_model", "train_tiny_over_seeds", "train_runs",
    "embedding_grad_norms_over_seeds", "residual_sum_rms_over_seeds", "bigram_statistics", "fit_direct_path",
    "fit_direct_paths",
    "norm_contrast", "adam_first_step", "adam_first_steps", "char_batch", "summarise_runs", "MAX_WORKERS",
    # used by the book and the tests as before, now listed too (an import not in __all__ is unused here)
    "TRACE_STEPS", "unigram_entropy", "llama_mlp_hidden", "PTX_TANH_APPROX_REL_ERR", "fast_tanh_gelu_error_emulated",
    "gelu_memory_traffic",
]
