"""Diagnoses that hold for every function: a size written into the code where it should
be taken from the arguments (:func:`size_hint`)."""
from __future__ import annotations

import re

from ..config import CONFIGS
from .captured import Tensor as _Tensor, isinstance_ as _isinstance, str_ as _str
from .messages import _


# Model sizes a learner might write into the code.
_SIZE_NUMBER = re.compile(r"(?<![\w.])(\d{2,6})(?![\w.])")


def _model_sizes():
    """The widths of the course's models (d_model, mlp_dim, the vocabulary), the sizes a
    learner would write into the code."""
    out = set()
    for cfg in CONFIGS.values():
        out.update((cfg.d_model, cfg.mlp_dim, cfg.vocab_size))
    return out


def written_size(error, where, args):
    """A size written into the code (768 where d_model belongs): a number the exception's
    text names that is no size of the inputs, and that the learner's own line
    (``where``) contains or that is one of the course's model widths. ``None`` when
    the evidence is not there."""
    sizes = set()
    for a in args:
        for t in (a.values() if _isinstance(a, dict) else (a,)):
            if _isinstance(t, _Tensor):
                sizes.update(int(n) for n in t.shape)
                sizes.add(int(t.numel()))
            elif _isinstance(t, int):
                sizes.add(t)
    in_error = [n for n in _SIZE_NUMBER.findall(_str(error)) if int(n) not in sizes]
    code = " ".join(_str(ln).split(": ", 1)[-1] for ln in where or ())
    for number in _SIZE_NUMBER.findall(code):
        if number in in_error:
            return int(number)
    widths = _model_sizes()
    for number in in_error:
        if int(number) in widths:
            return int(number)
    return None


def size_hint(error, where, args):
    """The likely-mistake line for a size written into the code, or ``None``."""
    n = written_size(error, where, args)
    if n is None:
        return None
    return _("the size {size} is written into your code, but these inputs have other sizes: take "
             "every size from the arguments (x.shape[-1], w1.shape[1], ...).").format(size=n)

