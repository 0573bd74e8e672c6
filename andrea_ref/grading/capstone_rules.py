"""The capstone's three functions by name, the rule against shortcuts that each one's
checks enforce (``@watch.governed``: the grader decides the rule of each graded cell on
the answer's source), and the advice shown when a check finds an input changed. Shared by
:mod:`.capstone_model`, :mod:`.capstone_train` and :mod:`.capstone_sample`;
:mod:`.capstone` describes the checks."""
from __future__ import annotations

from ..i18n import N_
from . import watch

TINY, TRAIN, SAMPLE = "andrea_tiny", "train", "sample_next"

FORBIDDEN = watch.Forbidden(
    N_("in this notebook the model is assembled from the embeddings, the blocks and the final "
       "LayerNorm; andrea_ref's model (model_forward, forward_from_params, AndreaModel) is not allowed."),
    ref_files=("model.py", "trace.py", "experiments/", "ladder.py", "museum.py", "train.py"),
)
FORBIDDEN_TRAIN = watch.Forbidden(
    N_("in this notebook the training loop is written by hand; andrea_ref's training code "
       "(andrea_ref.train, the book's experiments) is not allowed."),
    ref_files=("train.py", "experiments/", "ladder.py", "museum.py"),
)
FORBIDDEN_SAMPLE = watch.Forbidden(
    N_("in this notebook sampling is written by hand; andrea_ref.sampling is not allowed."),
    ref_files=("sampling.py",),
)

ADVICE = N_("A function must leave its inputs as they were; in-place ops are fine on tensors you "
            "created yourself.")
