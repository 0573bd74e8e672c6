"""Whether PyTorch and the builtins the checks use are still the real ones
(:func:`integrity_problem`): every callable they expose is recorded by identity when the
package is imported; what PyTorch's own API rebinds is told apart from a replacement."""
from __future__ import annotations

import builtins
import os

import torch
import torch.nn.functional as F

from .captured import (
    LegacyStorage as _LegacyStorage, TORCH_DIR as _TORCH_DIR, callable_ as _callable,
    get_default_dtype as _get_default_dtype, getattr_ as _getattr, isinstance_ as _isinstance,
    issubclass_ as _issubclass, str_ as _str, type_ as _type)
from .messages import GradingError, _


def _snapshot():
    """Every callable PyTorch and builtins expose, by identity."""
    spaces = {
        "torch": torch,
        "torch.nn.functional": F,
        "torch.Tensor": torch.Tensor,
        "torch.linalg": torch.linalg,
    }
    snap = []
    for label, space in spaces.items():
        names = vars(space)
        for name, value in list(names.items()):
            if name.startswith("__") and label != "torch.Tensor":
                continue
            if _callable(value) and not _isinstance(value, _type(torch)):
                snap.append((label, space, name, value))
    # ipykernel swaps builtins.input per request, so only these builtins are watched
    for name in ("isinstance", "type", "abs", "float", "int", "len", "range", "getattr",
                 "hasattr", "callable", "max", "min", "sum", "tuple", "list", "dict",
                 "any", "all", "repr", "str", "zip", "enumerate", "id"):
        snap.append(("builtins", builtins, name, getattr(builtins, name)))
    return snap


SNAPSHOT = _snapshot()
# torch.Tensor inherits most methods from the C base class: a method set on
# torch.Tensor afterwards (torch.Tensor.__eq__ = ...) shows up as a new name.
TENSOR_NAMES = frozenset(vars(torch.Tensor))


# Names PyTorch itself rebinds, and what they must then be bound to. torch's C++ core
# sets ``torch.Storage`` to the legacy storage class of the default dtype whenever that
# changes (``torch.set_default_dtype``, ``torch.set_default_tensor_type``): any other
# value is still a replacement. (Measured with torch 2.13: set_default_device,
# manual_seed, set_printoptions, use_deterministic_algorithms, set_num_threads,
# set_float32_matmul_precision, anomaly detection, torch.compile and importing
# torch._dynamo, torch.fx, torch.func, torch.export rebind nothing else, apart from
# the wrappers torch._dynamo puts around its own functions, accepted below.)


def _default_storage(value):
    return (_isinstance(value, _type) and _issubclass(value, _LegacyStorage)
            and _str(_getattr(value, "__module__", "")).startswith("torch")
            and value.dtype == _get_default_dtype())


_STATE_BOUND = {("torch", "Storage"): _default_storage}


def _torch_wrapper_of(value, original):
    """True when ``value`` is a chain of wrappers defined in PyTorch's own files (as
    torch._dynamo puts around ``manual_seed`` and others) that ends at ``original``; a
    wrapper written elsewhere (``functools.wraps(torch.tanh)(my_tanh)``) is not."""
    for _depth in range(8):
        code = _getattr(value, "__code__", None)
        filename = _getattr(code, "co_filename", "")
        if _type(filename) is not _str or not os.path.abspath(filename).startswith(_TORCH_DIR):
            return False
        value = _getattr(value, "__wrapped__", None)
        if value is original:
            return True
        if value is None:
            return False
    return False


def _replaced(label, name, value, now):
    if now is value:
        return False
    legitimate = _STATE_BOUND.get((label, name))
    if legitimate is not None:
        return not legitimate(now)
    return not _torch_wrapper_of(now, value)


def integrity_problem():
    """``None`` while PyTorch and the watched builtins are the real ones, else a message
    naming the first replaced function. What PyTorch's own API rebinds (the default
    storage class, its dynamo wrappers) is not a replacement."""
    for label, space, name, value in SNAPSHOT:
        now = vars(space).get(name, value)
        if _replaced(label, name, value, now):
            return _(
                "{function} has been replaced in this notebook (something like "
                "`{function} = ...`). The checks need the real PyTorch: remove that line, "
                "restart the kernel and run all cells again."
            ).format(function=f"{label}.{name}")
    added = [n for n, v in vars(torch.Tensor).items() if n not in TENSOR_NAMES and _callable(v)]
    if added:
        return _(
            "{function} has been replaced in this notebook (something like "
            "`{function} = ...`). The checks need the real PyTorch: remove that line, "
            "restart the kernel and run all cells again."
        ).format(function=f"torch.Tensor.{added[0]}")
    return None


def check_integrity():
    problem = integrity_problem()
    if problem is not None:
        raise GradingError(problem)

