"""The machinery every check shares: run the learner's function safely, look at what
it returned, compare numbers, and turn a failure into one clear ``GradingError`` (an
``AssertionError`` that a notebook shows as its message, without a traceback).

nbgrader awards a test cell's points when the cell raises nothing and writes nothing
to stderr. So every check here

* calls the learner's function with fresh copies of its inputs, under a time limit,
  with warnings, ``stdout`` and ``stderr`` captured (a harmless torch warning must
  not zero a correct answer);
* records the ATen operations that really ran (a ``TorchDispatchMode``) and every
  Python function entered (``sys.setprofile``), so a library LayerNorm or GELU, or a
  call into ``andrea_ref``'s own implementation, is seen whatever name it was called
  by -- an alias taken earlier included; the forbidden ATen operations are also
  refused at PyTorch's dispatcher for the duration of the call, so another thread
  or a switched-off dispatch mode does not hide them;
* accepts only a plain ``torch.Tensor``: the shape checks judge shape, dtype and
  device, the value checks any floating tensor of the right shape (an object with
  its own ``__eq__`` gets nothing), so one slip costs one property;
* compares with torch functions captured when this module was imported, and refuses
  to grade in a kernel where PyTorch's functions have been reassigned.

A call is split in two: :func:`execute` runs the function and describes what
happened as data (an :class:`Outcome`), :func:`verdict` judges it. In a notebook both
run in the learner's kernel: instant feedback, which code in that kernel could
defeat. For the grade, ``classroom.independent`` runs :func:`execute` in a separate
sandboxed process that serves the learner's function, and the checks and
:func:`verdict` in the grader's own process, where no learner code runs
(:class:`RemoteAnswer`).
"""
from __future__ import annotations

import builtins
import contextlib
import io
import math
import os
import signal
import string
import sys
import threading
import warnings

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from .. import i18n as _i18n
from ..i18n import N_

# ---------------------------------------------------------------------------
# Captured at import time. The notebooks import this module in their first, locked
# cell, before any learner code has run.
_Tensor = torch.Tensor
_TensorBase = torch._C.TensorBase
_VF = torch._C._VariableFunctions
_type = builtins.type
_isinstance = builtins.isinstance
_callable = builtins.callable
_float = builtins.float
_abs_f = _VF.abs
_sub = _VF.sub
_mul = _VF.mul
_add = _VF.add
_gt = _VF.gt
_isnan = _VF.isnan
_isfinite = _VF.isfinite
_logical_and = _VF.logical_and
_logical_not = _VF.logical_not
_any = _VF.any
_all = _VF.all
_amax = _VF.amax
_mean = _VF.mean
_equal = _VF.equal
_zeros_like = _VF.zeros_like
_argmax = _VF.argmax
_where = _VF.where
_full_like = _VF.full_like
_item = _TensorBase.item
_to = _TensorBase.to
_detach = _TensorBase.detach
_clone = _TensorBase.clone
_reshape = _TensorBase.reshape
_numel = _TensorBase.numel
_float64 = torch.float64

# ---------------------------------------------------------------------------
# The learner's language. Messages are marked _("...") where they are shown (N_ where a
# table of them is only defined) and translated at that moment, so ANDREA_LANG set
# between two checks changes the language of the second. Translating only chooses
# text: it never raises and never decides a point. Any failure -- no catalog, a
# broken one, a translation whose {placeholders} differ from the English, something
# replaced in the kernel -- gives the English message, and a warning about an unknown
# ANDREA_LANG is swallowed here (stderr output would cost a graded cell its points;
# the language check is andrea_ref.i18n's, outside the checks).
_current_language = _i18n.current_language
_language_catalog = _i18n.catalog
_parse_format = string.Formatter().parse
_str = builtins.str
_sorted = builtins.sorted
_Exception = builtins.Exception


def _fields(text):
    return _sorted(f for _lit, f, _spec, _conv in _parse_format(text) if f is not None)


def _(message):
    """``message`` in the learner's language (:func:`andrea_ref.i18n.current_language`),
    else ``message`` itself; never raises."""
    try:
        if _type(message) is not _str or not message:
            return message
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            language = _current_language()
        if language == "en":
            return message
        text = _language_catalog(language).get(message)
        if _type(text) is not _str or not text or _fields(text) != _fields(message):
            return message
        return text
    except _Exception:
        return message

# (rtol, atol): a value passes when |got - expected| <= atol + rtol * |expected|. The
# notebooks state these numbers; float64 gets float32's tolerance so that a rounded
# constant or a float32 intermediate costs nothing the notebook did not announce.
FLOAT64_TOL = (1e-5, 1e-5)
FLOAT32_TOL = (1e-5, 1e-5)

# Seconds one call of the learner's function may take before it is stopped.
CALL_TIME_LIMIT = float(os.environ.get("ANDREA_GRADING_TIME_LIMIT", "10"))

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


_SNAPSHOT = _snapshot()
# torch.Tensor inherits most methods from the C base class: a method set on
# torch.Tensor afterwards (torch.Tensor.__eq__ = ...) shows up as a new name.
_TENSOR_NAMES = frozenset(vars(torch.Tensor))


def integrity_problem():
    """``None`` while PyTorch and the watched builtins are the real ones, else a message
    naming the first replaced function."""
    for label, space, name, value in _SNAPSHOT:
        now = vars(space).get(name, value)
        # torch._dynamo, once imported, rebinds a few functions to wrappers of themselves
        if now is not value and getattr(now, "__wrapped__", None) is not value:
            return _(
                "{function} has been replaced in this notebook (something like "
                "`{function} = ...`). The checks need the real PyTorch: remove that line, "
                "restart the kernel and run all cells again."
            ).format(function=f"{label}.{name}")
    added = [n for n, v in vars(torch.Tensor).items() if n not in _TENSOR_NAMES and _callable(v)]
    if added:
        return _(
            "{function} has been replaced in this notebook (something like "
            "`{function} = ...`). The checks need the real PyTorch: remove that line, "
            "restart the kernel and run all cells again."
        ).format(function=f"torch.Tensor.{added[0]}")
    return None


def _check_integrity():
    problem = integrity_problem()
    if problem is not None:
        raise GradingError(problem)


# ---------------------------------------------------------------------------
# Watching what the learner's function does.

class _OpRecorder(TorchDispatchMode):
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


class _LearnerTimeout(BaseException):
    """Raised inside the learner's function when it runs past the time limit."""


class Forbidden:
    """What a notebook's learner may not use.

    ``aten_words``: an executed ATen op whose name contains one of these words is a
    library shortcut (``"layer_norm"`` matches ``aten.native_layer_norm``).
    ``ref_files``: files of ``andrea_ref`` (relative to the package) whose code may not
    run inside the learner's function; a directory name ending in ``/`` covers it all.
    """

    def __init__(self, what, aten_words=(), ref_files=()):
        self.what = what
        self.aten_words = tuple(aten_words)
        self.ref_files = tuple(os.path.join(_PACKAGE_DIR, f) for f in ref_files)

    def ref_file_hit(self, filename):
        for f in self.ref_files:
            if filename == f or (f.endswith(os.sep) and filename.startswith(f)):
                return f
        return None


NOTHING_FORBIDDEN = Forbidden("")

# Functions whose earlier calls ran past the time limit: fail fast after the first.
_TIMED_OUT = set()


def _fn_key(fn):
    return getattr(fn, "__code__", None) or id(fn)


@contextlib.contextmanager
def _time_limit(seconds):
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
        raise _LearnerTimeout()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class GradingError(AssertionError):
    """A checked property does not hold; the message says why, the likely mistake and
    the fix.

    An ``AssertionError``, as nbgrader and ``classroom`` expect of a failed check. In
    IPython (a notebook, nbgrader's Validate) it renders as its message alone
    (:meth:`_render_traceback_`): the traceback would only lead through this package,
    where the mistake is not. Plain Python prints the usual traceback.
    """

    #: the property a graded check judges, set by :func:`graded` when the check fails
    checked_property = None

    def _render_traceback_(self):
        first, *rest = str(self).splitlines() or [""]
        lines = [f"{_type(self).__name__}: {first}", *rest]
        if self.checked_property:
            lines.append(_("\u2717 not met: {property}").format(property=_(self.checked_property)))
        return lines


class LearnerError(GradingError):
    """The learner's function raised; ``original`` is what it raised."""

    def __init__(self, message, original):
        super().__init__(message)
        self.original = original

    def _render_traceback_(self):
        lines = super()._render_traceback_()
        where = _learner_lines(self.original)
        if where:
            lines[1:1] = [_("In your code:"), *where]
        return lines


def _learner_lines(error, limit=3):
    """Where in the learner's own code ``error`` was raised: the last ``limit`` frames
    of its traceback that are neither this package nor an installed library."""
    import linecache
    import sysconfig

    skip = [_PACKAGE_DIR] + [os.path.realpath(p) for p in {
        sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}]
    frames = []
    tb = getattr(error, "__traceback__", None)
    while tb is not None:
        code = tb.tb_frame.f_code
        path = os.path.realpath(code.co_filename) if os.path.isabs(code.co_filename) else code.co_filename
        if not any(path == d or path.startswith(d + os.sep) for d in skip):
            text = linecache.getline(code.co_filename, tb.tb_lineno).strip()
            # a notebook cell is compiled as a file of its own in ipykernel's folder
            if "ipykernel_" in code.co_filename or code.co_filename.startswith("<"):
                place = _("{function}, line {line} of its cell")
            else:
                place = _("{function}, line {line} of {file}")
            place = place.format(function=code.co_name, line=tb.tb_lineno,
                                 file=os.path.basename(code.co_filename))
            frames.append(f"  {place}" + (f": {text}" if text else ""))
        tb = tb.tb_next
    return frames[-limit:]


class Outcome:
    """What one call of the learner's function did, as data: made by :func:`execute` in
    the process that ran the function, judged by :func:`verdict` (possibly in another
    process: see ``classroom.independent``).

    ``result``: what it returned; ``error``: the exception it raised (``None`` if none);
    ``timed_out``: stopped at the time limit; ``ops``: names of the ATen operations that
    ran; ``ref_hits``: names of forbidden ``andrea_ref`` functions entered;
    ``integrity``: a message if PyTorch's functions were found replaced.
    """

    __slots__ = ("result", "error", "timed_out", "ops", "ref_hits", "integrity")

    def __init__(self, result=None, error=None, timed_out=False, ops=(), ref_hits=(), integrity=None):
        self.result = result
        self.error = error
        self.timed_out = timed_out
        self.ops = frozenset(ops)
        self.ref_hits = tuple(ref_hits)
        self.integrity = integrity


class RemoteAnswer:
    """Base class of a learner's function that runs in another process.

    :func:`call` hands such a function the arguments and the forbidden operations and
    gets an :class:`Outcome` back (``remote_call``); the arguments are updated in place
    with their values after the call, so an in-place change shows as it would locally.
    ``timed_out`` is set once a call has run past the time limit.
    """

    timed_out = False

    def remote_call(self, args, forbidden):  # pragma: no cover - implemented by subclasses
        raise NotImplementedError

    def __call__(self, *args):
        return verdict(self.remote_call(args, NOTHING_FORBIDDEN), name="function", key=self)


# ATen operations that contain a forbidden word, found once per word set.
_FORBIDDEN_OPS = {}
_BLOCK_KEYS = ("CPU", "CUDA", "CompositeExplicitAutograd", "CompositeImplicitAutograd")


def _blocking_library(words):
    """Register, at PyTorch's dispatcher, a kernel that refuses to run for every ATen
    operation whose name contains one of ``words``: unlike the dispatch-mode recorder,
    this also holds for calls from another thread or with the Python modes switched
    off. Returns the ``torch.library.Library`` (``_destroy()`` restores the real
    kernels) and the list the blocked calls are recorded in."""
    names = _FORBIDDEN_OPS.get(words)
    if names is None:
        names = [(n, n.split("::", 1)[1]) for n in torch._C._dispatch_get_all_op_names()
                 if n.startswith("aten::") and any(w in n for w in words)]
        _FORBIDDEN_OPS[words] = names
    seen = []

    def refuse(full):
        def kernel(*args, **kwargs):
            seen.append(full.split("::", 1)[1].split(".")[0])
            raise RuntimeError(f"{full} is not allowed in this exercise")
        return kernel

    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "overriding a previously registered kernel"
        for full, op in names:
            for key in _BLOCK_KEYS:
                if torch._C._dispatch_has_kernel_for_dispatch_key(full, key):
                    lib.impl(op, refuse(full), key)
    return lib, seen


def execute(fn, args, forbidden=NOTHING_FORBIDDEN, time_limit=None):
    """Call ``fn(*args)`` under the time limit with warnings and output captured,
    recording the operations that run; never raises for what the function does."""
    problem = integrity_problem()
    if problem is not None:
        return Outcome(integrity=problem)
    limit = CALL_TIME_LIMIT if time_limit is None else time_limit
    recorder = _OpRecorder()
    ref_hits = []

    def profiler(frame, event, arg):
        if event == "call":
            hit = forbidden.ref_file_hit(frame.f_code.co_filename)
            if hit is not None:
                ref_hits.append(frame.f_code.co_name)

    sink = io.StringIO()
    old_profile = sys.getprofile()
    outcome = Outcome()
    blocker, blocked = (None, [])
    try:
        with warnings.catch_warnings(record=True), contextlib.redirect_stdout(sink), \
                contextlib.redirect_stderr(sink):
            warnings.simplefilter("always")
            if forbidden.aten_words:
                blocker, blocked = _blocking_library(forbidden.aten_words)
            with _time_limit(limit):
                try:
                    with recorder:
                        if forbidden.ref_files:
                            sys.setprofile(profiler)
                        try:
                            outcome.result = fn(*args)
                        finally:
                            if forbidden.ref_files:
                                sys.setprofile(old_profile)
                except _LearnerTimeout:
                    outcome.timed_out = True
                except Exception as exc:  # the learner's bug, judged by verdict()
                    outcome.error = exc
    finally:
        sys.setprofile(old_profile)
        if blocker is not None:
            blocker._destroy()
    outcome.ops = frozenset(recorder.ops) | frozenset(blocked)
    outcome.ref_hits = tuple(ref_hits)
    outcome.integrity = integrity_problem()
    return outcome


def verdict(outcome, *, name, forbidden=NOTHING_FORBIDDEN, hint=None, key=None):
    """What the checks make of an :class:`Outcome`: its result, or an
    ``AssertionError`` that says what went wrong."""
    if outcome.integrity is not None:
        raise GradingError(outcome.integrity)
    if outcome.ref_hits:
        raise GradingError(
            _("`{name}` calls andrea_ref's own implementation ({function}); {rule}").format(
                name=name, function=outcome.ref_hits[0], rule=_(forbidden.what))
        )
    used = sorted(op for op in outcome.ops if any(w in op for w in forbidden.aten_words))
    if used:
        raise GradingError(
            _("`{name}` runs the library operation aten.{op}; {rule}").format(
                name=name, op=used[0], rule=_(forbidden.what))
        )
    if outcome.timed_out:
        if key is not None:
            _TIMED_OUT.add(key)
        raise GradingError(_("`{name}` did not finish within {seconds} s (an endless loop?).").format(
            name=name, seconds=f"{CALL_TIME_LIMIT:g}"))
    error = outcome.error
    if error is not None:
        if _isinstance(error, NotImplementedError):
            msg = _("`{name}` is not written yet: it raises NotImplementedError.").format(name=name)
        else:
            kind = getattr(error, "remote_type", None) or _type(error).__name__
            msg = _("`{name}` raised {kind}: {error}").format(name=name, kind=kind, error=error)
            extra = hint(error) if hint is not None else None
            if extra:
                msg += "\n" + _("Likely mistake: {likely}").format(likely=extra)
        raise LearnerError(msg, error)
    return outcome.result


def call(fn, args, *, name, forbidden=NOTHING_FORBIDDEN, hint=None):
    """Call ``fn(*args)`` the safe way and return what it returned.

    Raises ``AssertionError`` if ``fn`` raises, runs too long, or uses something
    ``forbidden`` names. ``hint(exc)`` may return a diagnosis of an exception. ``fn``
    may be a :class:`RemoteAnswer`: the call then runs in the process that serves it.
    """
    if not _callable(fn):
        raise GradingError(_("`{name}` should be a function, got {type}.").format(
            name=name, type=_type(fn).__name__))
    remote = _isinstance(fn, RemoteAnswer)
    key = fn if remote else _fn_key(fn)
    if (remote and fn.timed_out) or (not remote and key in _TIMED_OUT):
        raise GradingError(
            _("`{name}` did not finish within {seconds} s in an earlier check "
              "(an endless loop?), so it is not called again.").format(name=name, seconds=f"{CALL_TIME_LIMIT:g}")
        )
    if remote:
        outcome = fn.remote_call(args, forbidden)
        key = None  # the proxy remembers its own time-outs
    else:
        _check_integrity()
        outcome = execute(fn, args, forbidden)
    return verdict(outcome, name=name, forbidden=forbidden, hint=hint, key=key)


def check_result(out, *, name, shape, dtype, device):
    """Accept only a plain tensor with the expected shape, dtype and device.

    This is the shape checks' property; the value checks use :func:`values_result`,
    which leaves dtype and device to them. Returns a copy, so that a later call of the
    learner's function cannot change what this one returned.
    """
    out = _plain_tensor(out, name=name, shape=shape)
    if out.dtype != dtype:
        raise GradingError(
            _("`{name}` returned dtype {got} for {dtype} input; the output must keep "
              "the input's dtype (a constant made with torch.tensor(...) can promote it: "
              "use plain Python numbers).").format(name=name, got=out.dtype, dtype=dtype)
        )
    if out.device != device:
        raise GradingError(_("`{name}` returned a tensor on {got}; the input was on {device}.").format(
            name=name, got=out.device, device=device))
    return _clone(_detach(out))


def f64(t):
    """A float64 CPU copy, made with captured functions."""
    return _to(_detach(t), device="cpu", dtype=_float64)


def mismatch(out, ref, tol):
    """``None`` if ``out`` is within ``tol = (rtol, atol)`` of ``ref`` everywhere, else a
    short description of the worst element: where it is, what it is and should be (with
    enough digits to see the difference), and the tolerance applied. NaN in ``out``
    never matches."""
    rtol, atol = tol
    a, b = f64(out), f64(ref)
    diff = _abs_f(_sub(a, b))
    bound = _add(_mul(_abs_f(b), rtol), atol)
    bad = _logical_not(_logical_and(_logical_not(_gt(diff, bound)), _logical_not(_isnan(a))))
    bad = _logical_and(bad, _logical_not(_isnan(b)))
    if not _item(_any(bad)):
        return None
    flat_bad = _reshape(bad, (-1,))
    # worst element: the one furthest outside its allowance (NaN counts as worst)
    ratio = _reshape(_div(diff, bound), (-1,))
    scored = _where(_isnan(ratio), _full_like(ratio, math.inf), ratio)
    scored = _where(flat_bad, scored, _full_like(ratio, -1.0))
    i = _item(_argmax(scored))
    got = _item(_reshape(a, (-1,))[i])
    want = _item(_reshape(b, (-1,))[i])
    allowed = atol + rtol * abs(want)
    where = _index_text(i, tuple(a.shape))
    g, w = _two_numbers(got, want)
    return _("at {index} got {got}, expected {expected}: difference {difference}, "
             "allowed {allowed} (rtol = {rtol}, atol = {atol})").format(
        index=where, got=g, expected=w, difference=f"{abs(got - want):.3g}",
        allowed=f"{allowed:.3g}", rtol=f"{rtol:g}", atol=f"{atol:g}")


def close(out, ref, tol):
    return mismatch(out, ref, tol) is None


def same(a, b):
    """Exactly equal (used to check that inputs were left unchanged)."""
    return _equal(_detach(a), _detach(b))


def all_finite(t):
    return _item(_all(_isfinite(t)))


def diagnose(out, variants, tol, default):
    """Name of the first variant ``out`` matches within ``tol``, else ``default``."""
    for label, compute in variants:
        try:
            candidate = compute()
        except Exception:
            continue
        if tuple(candidate.shape) == tuple(out.shape) and close(out, candidate, tol):
            return label
    return default


def fail(title, detail, likely=None):
    """Raise the :class:`GradingError` of a failed property: ``title`` (what should
    hold), ``detail`` (where it does not) and ``likely`` (the likely mistake and its
    fix), each already in the learner's language (``_("...")``)."""
    msg = f"{title}\n{detail}"
    if likely:
        msg += "\n" + _("Likely mistake: {likely}").format(likely=likely)
    raise GradingError(msg)


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


def tol_for(dtype, *, result=None):
    """The ``(rtol, atol)`` the notebooks state for values computed from ``dtype`` input.

    ``result``: what the learner returned. A result of a narrower dtype than the input
    (float32 for float64 input, say) costs the shape check's dtype point; its values are
    still judged, with that dtype's rounding (its machine epsilon) added to ``rtol``.
    """
    rtol, atol = FLOAT64_TOL if dtype == torch.float64 else FLOAT32_TOL
    if result is not None:
        rtol = rtol + rounding(dtype, result)
    return (rtol, atol)


# Used by the helpers below; captured here, at import, like those at the top.
_div = _VF.div
_eq = _VF.eq
_logical_or = _VF.logical_or
_finfo = torch.finfo
_is_floating = _TensorBase.is_floating_point


def _is_floating_dtype(dtype):
    return _isinstance(dtype, torch.dtype) and dtype.is_floating_point


def rounding(dtype, result):
    """The relative error rounding to ``result``'s dtype adds when it is narrower than
    ``dtype`` (its machine epsilon), else 0: what a value check allows on top of its
    tolerance, so that a dtype slip costs only the shape check's point."""
    if not (_is_floating(result) and _is_floating_dtype(dtype)):
        return 0.0
    extra = _finfo(result.dtype).eps
    return extra if extra > _finfo(dtype).eps else 0.0


def _plain_tensor(out, *, name, shape):
    """``out`` if it is a plain ``torch.Tensor`` of ``shape``, else ``AssertionError``."""
    if out is None:
        raise GradingError(_("`{name}` returned None: did you forget the `return`?").format(name=name))
    if _type(out) is not _Tensor:
        if _isinstance(out, _Tensor):
            raise GradingError(
                _("`{name}` must return a plain torch.Tensor, got the subclass {type}.").format(
                    name=name, type=_type(out).__name__)
            )
        raise GradingError(_("`{name}` must return a torch.Tensor, got {type}.").format(
            name=name, type=_type(out).__name__))
    got_shape = tuple(out.shape)
    if got_shape != tuple(shape):
        raise GradingError(
            _("`{name}` returned shape {got}; expected {shape}.").format(
                name=name, got=got_shape, shape=tuple(shape))
        )
    return out


def values_result(out, *, name, shape):
    """What a value check accepts: a plain floating-point tensor of ``shape``, of any
    floating dtype and on any device (keeping x's dtype and device is the shape check's
    property, so a slip there costs only that). Returns a copy, so that a later call of
    the learner's function cannot change it. Compare it with :func:`close` and
    ``tol_for(dtype, result=...)``."""
    out = _plain_tensor(out, name=name, shape=shape)
    if not _is_floating(out):
        raise GradingError(
            _("`{name}` returned a tensor of dtype {dtype}; its values must be floating point.").format(
                name=name, dtype=out.dtype)
        )
    return _clone(_detach(out))


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


def _index_text(i, shape):
    """The flat index ``i`` of a tensor of ``shape``, written as ``[i0, i1, ...]``."""
    idx = []
    for n in reversed(shape):
        idx.append(i % n if n else 0)
        i = i // n if n else 0
    return "[" + ", ".join(str(k) for k in reversed(idx)) + "]"


def _two_numbers(got, want):
    """``got`` and ``want`` as text, with enough significant digits to tell them apart."""
    diff = abs(got - want)
    size = max(abs(got), abs(want))
    digits = 6
    if math.isfinite(diff) and math.isfinite(size) and 0 < diff < size:
        digits = min(17, max(6, math.ceil(math.log10(size / diff)) + 2))
    return f"{got:.{digits}g}", f"{want:.{digits}g}"


def generator(seed):
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    return g


@contextlib.contextmanager
def quiet():
    """Silence warnings raised by the checker itself (nbgrader fails on stderr)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def graded(check):
    """Decorator: run a check with the checker's own warnings silenced; print a tick and
    the property on success, raise :class:`GradingError` naming the property on failure."""

    def wrapper(fn, *args, **kwargs):
        prop = wrapper.__doc__.strip().splitlines()[0]
        try:
            with quiet():
                check(fn, *args, **kwargs)
        except GradingError as exc:
            exc.checked_property = prop
            raise
        except AssertionError as exc:  # an assert in a check: still shown as a failed check
            err = GradingError(str(exc))
            err.checked_property = prop
            raise err from exc
        print(f"\u2713 {_(prop)}")

    wrapper.__name__ = check.__name__
    wrapper.__qualname__ = check.__qualname__
    wrapper.__doc__ = check.__doc__
    wrapper.__wrapped__ = check
    return wrapper


def run_report(title, checks, fn):
    """Run ``checks`` (list of (label, check)) and print one line per property.
    Never raises: this is for the learner's visible self-check cells."""
    print(title)
    passed = 0
    for label, check in checks:
        label = _(label)
        try:
            with quiet(), contextlib.redirect_stdout(io.StringIO()):
                check(fn)
        except AssertionError as exc:
            first, *rest = str(exc).splitlines()
            print(f"  \u2717 {label}: {first}")
            for line in rest:
                print(f"      {line}")
        else:
            passed += 1
            print(f"  \u2713 {label}")
    print(_("{passed} of {total} properties hold.").format(passed=passed, total=len(checks)))
    return passed == len(checks)
