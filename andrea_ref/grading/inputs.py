"""The inputs of the checks: drawn in float64 on the CPU with the checks' own generator
(:func:`uniform`, :func:`normal`, ...), the devices they run on, fresh copies for each call,
and the checks that a function leaves its inputs and its earlier results alone."""
from __future__ import annotations

import contextlib

import torch

from .core import RemoteAnswer, call
from .captured import (
    Tensor as _Tensor, all_ as _all, clone as _clone, detach as _detach, eq as _eq, float64 as _float64,
    isinstance_ as _isinstance, isnan as _isnan, item as _item, logical_and as _logical_and,
    logical_or as _logical_or, sorted_ as _sorted, str_ as _str, type_ as _type)
from .compare import same
from .messages import GradingError, _, fail
from .watch import NOTHING_FORBIDDEN


def copy_args(args):
    """Fresh copies of a call's arguments: tensors cloned, dicts of them copied with
    cloned values, anything else (numbers) as it is."""
    out = []
    for a in args:
        if _isinstance(a, _Tensor):
            out.append(_clone(a))
        elif _isinstance(a, dict):
            out.append({k: _clone(v) if _isinstance(v, _Tensor) else v for k, v in a.items()})
        else:
            out.append(a)
    return tuple(out)


def changed_argument(before, after, labels):
    """The label of the first argument (``"x"``, or ``"params['mlp.b2']"`` for an entry of
    a dict) that differs between ``before`` and ``after`` (two :func:`copy_args` copies,
    the second one passed to the learner), else ``None``."""
    for label, b, a in zip(labels, before, after):
        if _isinstance(b, _Tensor):
            if not (_isinstance(a, _Tensor) and same(b, a)):
                return label
        elif _isinstance(b, dict):
            if not _isinstance(a, dict) or _sorted(map(_str, a)) != _sorted(map(_str, b)):
                return label
            for k in b:
                if _isinstance(b[k], _Tensor) and not (_isinstance(a.get(k), _Tensor) and same(b[k], a[k])):
                    return f"{label}[{k!r}]"
    return None


def inputs_left_alone(fn, calls, *, name, labels, advice, hint=None):
    """Call ``fn`` on every argument tuple in ``calls`` (the inputs every check of the
    notebook uses) and fail if one of its arguments changed. Only that is judged
    here: what the function returns, or an exception it raises, is for the checks of
    those inputs to judge (an in-place change made before raising still counts), and
    so are library shortcuts: each check calls with the same inputs under the
    notebook's rules, so these calls skip that watch (it is most of a call's cost)."""
    for args in calls:
        keep, passed = copy_args(args), copy_args(args)
        try:
            call(fn, passed, name=name, hint=hint)
        except GradingError:
            if _isinstance(fn, RemoteAnswer) and fn.timed_out:
                return
        label = changed_argument(keep, passed, labels)
        if label is not None:
            fail_changed(name, label, advice)


def fail_changed(name, argument, advice):
    """Fail a check because ``name`` changed its argument ``argument`` in place."""
    fail(_("`{name}` changed its argument `{argument}` in place.").format(name=name, argument=argument), advice)


# Set while the checks judge a function served by another process, which has no GPU.
_CPU_ONLY = []


@contextlib.contextmanager
def cpu_only():
    """Run the checks on the CPU only, whatever this process can see."""
    _CPU_ONLY.append(True)
    try:
        yield
    finally:
        _CPU_ONLY.pop()


def devices():
    """The devices the checks run on: always CPU, and CUDA when a GPU is visible."""
    out = [torch.device("cpu")]
    if not _CPU_ONLY and torch.cuda.is_available():
        out.append(torch.device("cuda"))
    return out


def check_new_result(fn, first_args, second_args, *, name, forbidden=NOTHING_FORBIDDEN, hint=None):
    """A call must return a new tensor: calling ``fn`` again, on inputs of the same
    shapes, must leave what the first call returned as it was (an output buffer kept
    between calls, or a view of one, fails this)."""
    first = call(fn, first_args, name=name, forbidden=forbidden, hint=hint)
    if _type(first) is not _Tensor:
        return
    kept = _clone(_detach(first))
    call(fn, second_args, name=name, forbidden=forbidden, hint=hint)
    unchanged = tuple(first.shape) == tuple(kept.shape) and first.dtype == kept.dtype and _item(_all(
        _logical_or(_eq(_detach(first), kept), _logical_and(_isnan(_detach(first)), _isnan(kept)))))
    if not unchanged:
        fail(
            _("Calling `{name}` a second time changed the tensor its first call returned.").format(name=name),
            _("Each call must return a new tensor: an output kept between calls (a buffer "
              "filled with out=... or in place, or a view of one) is overwritten by the next "
              "call, so whoever kept the first result finds it changed."),
        )


def generator(seed):
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    return g


# Inputs are drawn in float64 on the CPU with the checks' own generator, with dtype and
# device always given: torch.set_default_dtype or set_default_device in the learner's
# notebook changes nothing a check draws (the kernel and the independent check, which
# runs with PyTorch's defaults, see the same numbers).
_CPU = "cpu"


def uniform(g, shape, low=0.0, high=1.0):
    """Uniform in [low, high), float64, CPU."""
    return torch.rand(tuple(shape), generator=g, dtype=_float64, device=_CPU) * (high - low) + low


def normal(g, shape, std=1.0, mean=0.0):
    """Normal(mean, std), float64, CPU."""
    return torch.randn(tuple(shape), generator=g, dtype=_float64, device=_CPU) * std + mean


def permutation(g, n):
    return torch.randperm(n, generator=g, device=_CPU)


def const(value, shape):
    """A float64 CPU tensor of ``shape`` filled with ``value``."""
    return torch.full(tuple(shape), float(value), dtype=_float64, device=_CPU)


def eye(n):
    return torch.eye(n, dtype=_float64, device=_CPU)


