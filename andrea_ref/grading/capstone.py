"""Checks for the capstone notebook: ANDREA-tiny assembled, trained and sampled.

The learner writes three functions, each checked on its own:

``andrea_tiny(token_ids, params, n_head)``
    the whole model from its parameters (the names of ``andrea_ref.AndreaModel``):
    token and position embeddings, the blocks in order, the final LayerNorm, the tied
    unembedding; logits ``[batch, seq_len, vocab]``.
``train(forward, params, batches, lr, n_head)``
    one step of plain gradient descent per batch on the model ``forward`` (a function
    like ``andrea_tiny``): ``params`` updated in place, the losses returned. The checks
    hand it the reference model (``andrea_ref.model.forward_from_params``), so a slip in
    ``andrea_tiny`` costs only ``andrea_tiny``'s points.
``sample_next(logits, temperature, seed)``
    one token id per row of ``logits``: the argmax at temperature 0, else a draw from
    softmax(logits / temperature), reproducible from ``seed``.

============================  ====================================================
``check_tiny_shape``          a new plain ``[batch, seq_len, vocab]`` tensor in the
                              parameters' dtype; token ids and parameters unchanged
``check_tiny_values``         equal to the reference model with the same weights
                              (rtol = atol = 1e-5 against float64), for 1, 2 and 3
                              blocks, in float32 and float64
``check_train_loss``          one loss per batch, the first equal to the reference
                              cross-entropy of the initial parameters
``check_train_update``        the parameters after one and three steps equal the
                              reference's p <- p - lr * dloss/dp (float64)
``check_train_learns``        150 steps on Tiny Shakespeare bring ANDREA-tiny's
                              validation loss below the unigram baseline minus 0.25
``check_sample_greedy``       an int64 tensor, one id per row; at temperature 0 the
                              argmax (the first of equal maxima)
``check_sample_distribution`` 20,000 draws per temperature (1, 0.5, 2) follow
                              softmax(logits / T) within 0.026 per token; a token of
                              logit -inf is never drawn
``check_sample_seed``         the same seed gives the same tokens, another seed others
============================  ====================================================

An honest sampler exceeds the distribution check's bound with probability below 1e-9
(Hoeffding's inequality, 2 exp(-2 n 0.026^2) for n = 20,000, over every token, temperature
and call of the visible and hidden checks). A "likely mistake" is named only when the
output matches that mistake's own computation.

The checks live in one module per function: :mod:`.capstone_model` (``andrea_tiny``),
:mod:`.capstone_train` (``train``) and :mod:`.capstone_sample` (``sample_next``), under the
names and rules of :mod:`.capstone_rules`. This module gathers them for the notebook: the
self-check reports, the graded properties, and every name the grader and the tests read
from it (``__all__``).
"""
from __future__ import annotations

from ..i18n import N_
from . import runner
from .capstone_model import check_tiny_shape, check_tiny_values, model_params
from .capstone_rules import FORBIDDEN, FORBIDDEN_SAMPLE, FORBIDDEN_TRAIN, SAMPLE, TINY, TRAIN
from .capstone_sample import (SAMPLE_BOUND, SAMPLE_ROWS, TEMPERATURES, check_sample_distribution,
                              check_sample_greedy, check_sample_seed)
from .capstone_train import (FORWARD, LEARN_BATCH, LEARN_LR, LEARN_MARGIN, LEARN_STEPS, STEPS_PER_CALL,
                             check_train_learns, check_train_loss, check_train_update, cross_entropy,
                             learning_task, reference_steps, validation_loss)
from .messages import _

__all__ = [
    "TINY", "TRAIN", "SAMPLE", "FORBIDDEN", "FORBIDDEN_TRAIN", "FORBIDDEN_SAMPLE", "FORWARD",
    "model_params", "check_tiny_shape", "check_tiny_values", "cross_entropy", "reference_steps",
    "STEPS_PER_CALL", "LEARN_STEPS", "LEARN_BATCH", "LEARN_LR", "LEARN_MARGIN", "learning_task",
    "validation_loss", "check_train_loss", "check_train_update", "check_train_learns",
    "SAMPLE_ROWS", "SAMPLE_BOUND", "TEMPERATURES", "check_sample_greedy",
    "check_sample_distribution", "check_sample_seed", "CHECKS_TINY", "CHECKS_TRAIN",
    "CHECKS_SAMPLE", "CHECKS", "RULES", "PROPERTIES", "report_andrea_tiny", "report_train",
    "report_sample_next",
]


# (property, check) for the self-checks; the names are translated when shown.
CHECKS_TINY = ((N_("shape, dtype, inputs unchanged"), check_tiny_shape),
               (N_("the reference model's logits"), check_tiny_values))
CHECKS_TRAIN = ((N_("one loss per batch, the first right"), check_train_loss),
                (N_("gradient descent steps"), check_train_update),
                (N_("ANDREA-tiny learns"), check_train_learns))
CHECKS_SAMPLE = ((N_("greedy at temperature 0"), check_sample_greedy),
                 (N_("draws follow softmax(logits / T)"), check_sample_distribution),
                 (N_("the seed makes draws reproducible"), check_sample_seed))
CHECKS = CHECKS_TINY + CHECKS_TRAIN + CHECKS_SAMPLE
RULES = (FORBIDDEN, FORBIDDEN_TRAIN, FORBIDDEN_SAMPLE)

# What each graded check states (its docstring's first line, printed beside its tick or
# cross): marked here to be translated when shown.
PROPERTIES = (
    N_("andrea_tiny returns a new [batch, seq_len, vocab] tensor in the parameters' dtype, inputs unchanged."),
    N_("andrea_tiny gives the reference model's logits with the same weights: embeddings, every block in "
       "order, ln_f, tied unembedding."),
    N_("train returns one loss per batch, the first the mean cross-entropy of the next token under the "
       "initial parameters."),
    N_("train changes every parameter by one step of gradient descent per batch, p <- p - lr * dloss/dp."),
    N_("train teaches ANDREA-tiny: 150 steps on Tiny Shakespeare bring its validation loss below the unigram "
       "baseline minus 0.25 nats."),
    N_("sample_next returns one int64 id per row, logits unchanged; at temperature 0 the argmax (the first of "
       "equal maxima)."),
    N_("sample_next draws from softmax(logits / temperature): token frequencies within 0.026 over 20,000 "
       "rows, never a token of logit -inf."),
    N_("sample_next is reproducible: the same seed gives the same tokens, another seed other tokens."),
)


def report_andrea_tiny(fn):
    """Print which properties of ``andrea_tiny`` hold (never raises): for self-checks."""
    return runner.run_report(_("Checking `{name}`:").format(name=TINY), CHECKS_TINY, fn)


def report_train(fn):
    """Print which properties of ``train`` hold (never raises): for self-checks."""
    return runner.run_report(_("Checking `{name}`:").format(name=TRAIN), CHECKS_TRAIN, fn)


def report_sample_next(fn):
    """Print which properties of ``sample_next`` hold (never raises): for self-checks."""
    return runner.run_report(_("Checking `{name}`:").format(name=SAMPLE), CHECKS_SAMPLE, fn)
