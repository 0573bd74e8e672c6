"""Watching what the learner's function runs: the rule of what it may not use
(:class:`Forbidden`), the recorder of ATen operations, the dispatcher-level blocker of
forbidden operations (:class:`Blocker`), the time limit and the one thread it is timed on,
and the code of this package that runs inside a watched call (:data:`OWN_CODE`)."""
from __future__ import annotations

import contextlib
import gc
import os
import re
import signal
import sys
import threading
import types
import warnings

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..model import forward_from_params as _forward_from_params
from .captured import (PACKAGE_DIR as _PACKAGE_DIR, TORCH_DIR as _TORCH_DIR,
                       get_num_threads as _get_num_threads, set_num_threads as _set_num_threads)


class OpRecorder(TorchDispatchMode):
    """Remembers the name of every ATen operation that runs inside it."""

    def __init__(self):
        super().__init__()
        self.ops = set()

    @classmethod
    def _should_skip_dynamo(cls):
        # Nothing is compiled here; saying so spares importing torch._dynamo (~1 s).
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


class LearnerTimeout(BaseException):
    """Raised inside the learner's function when it runs past the time limit."""


class Forbidden:
    """What a notebook's learner may not use.

    ``aten_words``: an executed ATen op whose name contains one of these words is a
    library shortcut (``"layer_norm"`` matches ``aten.native_layer_norm``).
    ``ref_files``: files of ``andrea_ref`` (relative to the package) whose code may not
    run inside the learner's function; a directory name ending in ``/`` covers it all.
    PyTorch's Python references and decompositions (``torch/_refs``, ``torch/_decomp``,
    ``torch/_prims``) and the grading package itself are never to run inside it either
    (:data:`ALWAYS_FORBIDDEN_DIRS`).
    """

    def __init__(self, what, aten_words=(), ref_files=()):
        self.what = what
        self.aten_words = tuple(aten_words)
        self.ref_files = tuple(os.path.join(_PACKAGE_DIR, f) for f in ref_files) + ALWAYS_FORBIDDEN_DIRS

    def relative_ref_files(self):
        """``ref_files`` of ``andrea_ref`` relative to the package (a directory ending in
        ``/``), as the constructor takes them."""
        out = []
        for f in self.ref_files:
            if f.startswith(_PACKAGE_DIR + os.sep) and f not in ALWAYS_FORBIDDEN_DIRS:
                out.append(os.path.relpath(f, _PACKAGE_DIR) + ("/" if f.endswith(os.sep) else ""))
        return out

    def ref_file_hit(self, filename):
        for f in self.ref_files:
            if filename == f or (f.endswith(os.sep) and filename.startswith(f)):
                return f
        return None


# Python code that runs no learner's function may enter: PyTorch's own Python versions
# of its operations (a library GELU or LayerNorm built from elementary ops, which no
# op-level rule sees) and the checks' package with its reference helpers.
ALWAYS_FORBIDDEN_DIRS = tuple(os.path.join(_TORCH_DIR, d) + os.sep for d in ("_refs", "_decomp", "_prims",
                                                                               "_prims_common")) \
    + (os.path.join(_PACKAGE_DIR, "grading") + os.sep,)


def governed(rule):
    """Decorator above :func:`graded`: the rule against shortcuts (a :class:`Forbidden`)
    this check enforces, where the functions of one notebook have rules of their own (the
    capstone's); a check without one enforces its module's ``FORBIDDEN``. The grader's
    plan reads it (``classroom.scoring.plan``), so the rule decided on the answer's source
    is the one the check applies in the notebook."""
    def mark(check):
        check.forbidden = rule
        return check
    return mark


def rule_of(check):
    """The :class:`Forbidden` a graded check enforces (see :func:`governed`), or None."""
    rule = getattr(check, "forbidden", None)
    if rule is None:
        module = sys.modules.get(getattr(getattr(check, "__wrapped__", check), "__module__", ""))
        rule = getattr(module, "FORBIDDEN", None)
    return rule


# Functions a check may hand to the learner's function as an argument (the reference
# model, which the capstone's ``train`` is checked with), by name. A function served by
# another process gets the name (``classroom.isolation.wire.Ref``) and that process
# passes its own copy of the function: code never travels.
PROVIDED = types.MappingProxyType({"andrea_ref.model.forward_from_params": _forward_from_params})


def provided_name(value):
    """The name under which ``value`` is in :data:`PROVIDED`, else None."""
    for name, fn in PROVIDED.items():
        if value is fn:
            return name
    return None


NOTHING_FORBIDDEN = Forbidden("")
NOTHING_FORBIDDEN.ref_files = ()  # no watch at all (the in-place sweeps, which skip it for speed)


@contextlib.contextmanager
def time_limit(seconds):
    """Stop the code running inside after ``seconds`` (:class:`LearnerTimeout`, raised by
    SIGALRM's handler; in the main thread only, where signals arrive)."""
    use_alarm = (
        seconds
        and seconds > 0
        and hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
    )
    if not use_alarm:
        yield
        return

    def on_alarm(signum, frame):
        raise LearnerTimeout()
    OWN_CODE.add(on_alarm.__code__)

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextlib.contextmanager
def one_thread():
    """Run the code inside on one CPU thread, as the grader's sandboxes do
    (``OMP_NUM_THREADS=1``), and give the process its thread count back after.

    The time limit is wall-clock time. With PyTorch's default pool (a thread per core),
    a call's threads wait on each other whenever the cores are busy with other work: the
    capstone's training check takes 0.9 s on an idle two-core machine and over ten times
    that beside three busy processes, but 0.9 s on one thread there too. The checks'
    tensors are small, so one thread costs nothing on an idle machine, and the self-check
    in the learner's notebook then times what the grader times."""
    before = _get_num_threads()
    if before != 1:
        _set_num_threads(1)
    try:
        yield
    finally:
        if _get_num_threads() != before:  # the learner's function may have set its own
            _set_num_threads(before)


# ATen operations that contain a forbidden word, with every dispatch key the dispatcher
# has a kernel for (CPU, NestedTensorCPU, QuantizedCPU, MkldnnCPU, Meta, Autograd,
# Functionalize, Tracer, FuncTorchBatched, the composite keys ...), found once per word set.
_FORBIDDEN_OPS = {}
_KEY_LINE = re.compile(r"^([A-Za-z0-9]+)(\[alias\])?( \(inactive\))?: registered at")


def _dispatch_keys(full_name):
    """The dispatch keys ``full_name`` (``aten::gelu``) has a kernel registered at."""
    keys = []
    for line in torch._C._dispatch_dump(full_name).splitlines():
        m = _KEY_LINE.match(line)
        if m and not m.group(3) and m.group(1) != "debug":
            keys.append(m.group(1))
    return keys


def forbidden_kernels(words):
    """[(``aten::op``, op name, [dispatch keys])] of every ATen operation whose name
    contains one of ``words``."""
    names = _FORBIDDEN_OPS.get(words)
    if names is None:
        names = [(n, n.split("::", 1)[1], _dispatch_keys(n)) for n in torch._C._dispatch_get_all_op_names()
                 if n.startswith("aten::") and any(w in n for w in words)]
        _FORBIDDEN_OPS[words] = names
    return names


class Blocker:
    """A kernel that refuses to run, registered at PyTorch's dispatcher for every ATen
    operation whose name contains one of ``words`` and at every dispatch key it has a
    kernel for: unlike the dispatch-mode recorder, this holds for calls from any thread,
    with the Python modes switched off, through nested, quantized, sparse or MKL-DNN
    tensors, ``torch.ops`` and redispatching alike. ``install()`` / ``remove()``
    (``remove`` restores the real kernels); ``seen``: the operations refused."""

    def __init__(self, words):
        self.words = tuple(words)
        self.seen = []
        self._lib = None

    def install(self):
        if self._lib is not None or not self.words:
            return self
        seen = self.seen

        def refuse(full):
            def kernel(*args, **kwargs):
                seen.append(full.split("::", 1)[1].split(".")[0])
                raise RuntimeError(f"{full} is not allowed in this exercise")
            OWN_CODE.add(kernel.__code__)
            return kernel

        lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
            for full, op, keys in forbidden_kernels(self.words):
                kernel = refuse(full)
                for key in keys:
                    try:
                        lib.impl(op, kernel, key)
                    except RuntimeError:  # pragma: no cover - a key this build cannot take
                        pass
        self._lib = lib
        return self

    def remove(self):
        if self._lib is not None:
            self._lib._destroy()
            self._lib = None


# Code of this module that runs while a learner's function is watched (the recorder's
# dispatch hook, the time limit's handler, the refusing kernels): not a call of the
# grading package by the learner.
OWN_CODE = {OpRecorder.__torch_dispatch__.__code__}


@contextlib.contextmanager
def no_collection():
    """The cyclic garbage collector paused: a collection inside the learner's call would
    finalise what earlier checks left behind (a generator of a check that stopped early
    is closed, its frame resumed), and the profiler would take that for the learner's
    function entering the checks' code."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def importing(frame):
    """True when ``frame`` runs as part of an import: a module's own code, or what it
    calls while it loads. PyTorch imports modules lazily (the first optimizer built
    imports ``torch._dynamo``, which registers ``torch._decomp``'s decompositions): that
    registers an implementation, it runs none for the learner. Walked only on a hit."""
    for _depth in range(400):
        if frame is None:
            return False
        name = frame.f_code.co_filename
        if name.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False
