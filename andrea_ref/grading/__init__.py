"""Checks behind the graded notebooks.

Each ``check_*`` function takes the learner's function, calls it on seeded random
inputs chosen to expose one classic mistake, compares the result with ``andrea_ref``
and raises :class:`GradingError` (an ``AssertionError``) -- with the likely mistake
named -- when the property it checks does not hold; a notebook shows its message
without a traceback. A locked nbgrader test cell calls one check, so the points
of a notebook are split by property. ``report_*`` runs all checks of a notebook and
prints one line per property without raising (for the learner's self-checks).
:func:`failure_lines` renders a failed check the one way both the notebook and the
independent check's feedback page show it.

The shared machinery (safe calls, forbidden-operation detection, comparisons) lives
in the modules :mod:`andrea_ref.grading.core` describes; see its docstring for what
it defends against.
"""
from .messages import ERROR_NAME, GradingError, failure_lines
from .block import (check_block_norms, check_block_residual, check_block_shape,
                    check_block_values, report_block)
from .capstone import (check_sample_distribution, check_sample_greedy, check_sample_seed,
                       check_tiny_shape, check_tiny_values, check_train_learns, check_train_loss,
                       check_train_update, report_andrea_tiny, report_sample_next, report_train)
from .gelu import check_gelu_extremes, check_gelu_shape, check_gelu_values, report_gelu
from .layernorm import (check_layer_norm_affine, check_layer_norm_eps, check_layer_norm_normalises,
                        check_layer_norm_shape, report_layer_norm)
from .mlp import check_mlp_activation, check_mlp_bias, check_mlp_layout, check_mlp_shape, report_mlp

__all__ = [
    "GradingError", "ERROR_NAME", "failure_lines",
    "check_layer_norm_shape", "check_layer_norm_normalises", "check_layer_norm_affine",
    "check_layer_norm_eps", "report_layer_norm",
    "check_gelu_shape", "check_gelu_values", "check_gelu_extremes", "report_gelu",
    "check_mlp_shape", "check_mlp_layout", "check_mlp_activation", "check_mlp_bias", "report_mlp",
    "check_block_shape", "check_block_residual", "check_block_norms", "check_block_values",
    "report_block",
    "check_tiny_shape", "check_tiny_values", "report_andrea_tiny",
    "check_train_loss", "check_train_update", "check_train_learns", "report_train",
    "check_sample_greedy", "check_sample_distribution", "check_sample_seed", "report_sample_next",
]
