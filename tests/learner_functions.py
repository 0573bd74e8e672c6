"""The checks of andrea_ref.grading by notebook and graded cell, and a submission's
function made the way its notebook makes it: shared by the tests that call the checks
directly (test_grading_checks.py, test_grading_i18n.py)."""
from __future__ import annotations

import json
import math

import torch

import grading_submissions as S
from andrea_ref import grading
from andrea_ref.attention import causal_self_attention
from andrea_ref.gelu import gelu as provided_gelu
from andrea_ref.grading.course import REPO as S_ROOT
from andrea_ref.layernorm import layer_norm as provided_layer_norm
from andrea_ref.mlp import mlp as provided_mlp

CHECKS = {
    "02_layernorm": {"ln_shape": grading.check_layer_norm_shape,
                     "ln_normalise": grading.check_layer_norm_normalises,
                     "ln_affine": grading.check_layer_norm_affine,
                     "ln_eps": grading.check_layer_norm_eps},
    "03_gelu": {"gelu_shape": grading.check_gelu_shape,
                "gelu_values": grading.check_gelu_values,
                "gelu_extremes": grading.check_gelu_extremes},
    "04_mlp": {"mlp_shape": grading.check_mlp_shape,
               "mlp_layout": grading.check_mlp_layout,
               "mlp_activation": grading.check_mlp_activation,
               "mlp_bias": grading.check_mlp_bias},
    "01_block": {"block_shape": grading.check_block_shape,
                 "block_residual": grading.check_block_residual,
                 "block_norms": grading.check_block_norms,
                 "block_values": grading.check_block_values},
}


def namespace(assignment):
    """What the notebook's locked setup cell defines."""
    ns = {"torch": torch, "math": math, "grading": grading}
    if assignment == "04_mlp":
        ns["gelu"] = provided_gelu
    if assignment == "01_block":
        ns.update(layer_norm=provided_layer_norm, causal_self_attention=causal_self_attention,
                  mlp=provided_mlp)
    return ns


def learner_function(case):
    """The function a case's source defines, run in what the notebook's locked setup cell defines."""
    nb_name, fn_name, cell_id, _ = S.ASSIGNMENTS[case.assignment]
    source = case.source
    if source is None:
        nb = json.loads((S_ROOT / "solutions" / case.assignment / nb_name).read_text())
        source = S.solution_source(nb, cell_id)
    ns = namespace(case.assignment)
    exec(compile(source, f"<{case.student}>", "exec"), ns)
    return ns[fn_name]
