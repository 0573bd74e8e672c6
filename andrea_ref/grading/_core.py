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
  to grade in a kernel where PyTorch's functions have been reassigned (what PyTorch's
  own API rebinds, such as ``torch.Storage`` after ``torch.set_default_dtype``, is not
  a reassignment);
* compares so that nan or inf never matches a number and a nan in the reference
  excuses nothing (:func:`mismatch`), draws every input in float64 on the CPU with
  its own generator (:func:`uniform`, :func:`normal`: the learner's default dtype or
  device changes nothing), and lets the first check of each notebook call the
  function on every input any check uses, to see an argument changed in place
  (:func:`inputs_left_alone`);
* renders a failure one way (:func:`failure_lines`), which the notebook and the
  independent check's feedback page both show.

A call is split in two: :func:`execute` runs the function and describes what
happened as data (an :class:`Outcome`), :func:`verdict` judges it. In a notebook both
run in the learner's kernel: instant feedback, which code in that kernel could
defeat. For the grade, ``classroom.scoring`` runs :func:`execute` in a separate
sandboxed process that serves the learner's function, and the checks and
:func:`verdict` in the grader's own process, where no learner code runs
(:class:`RemoteAnswer`).
"""
from __future__ import annotations

import builtins
import contextlib
import gc
import io
import math
import os
import signal
import string
import sys
import threading
import types
import warnings

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from .. import i18n as _i18n
from ..i18n import N_
from ..model import forward_from_params as _forward_from_params

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
_le = _VF.le
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

_format = builtins.format
_localise_number = _i18n.localise_number


def number(value, spec="g"):
    """``value`` formatted with ``spec`` and written the learner's way (a decimal comma
    in German and Georgian: andrea_ref.i18n.localise_number); never raises."""
    text = _format(value, spec)
    try:
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            language = _current_language()
        return _localise_number(text, language)
    except _Exception:
        return text


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


# Names PyTorch itself rebinds, and what they must then be bound to. torch's C++ core
# sets ``torch.Storage`` to the legacy storage class of the default dtype whenever that
# changes (``torch.set_default_dtype``, ``torch.set_default_tensor_type``): any other
# value is still a replacement. (Measured with torch 2.13: set_default_device,
# manual_seed, set_printoptions, use_deterministic_algorithms, set_num_threads,
# set_float32_matmul_precision, anomaly detection, torch.compile and importing
# torch._dynamo, torch.fx, torch.func, torch.export rebind nothing else, apart from
# the wrappers torch._dynamo puts around its own functions, accepted below.)
_LegacyStorage = torch.storage._LegacyStorage
_get_default_dtype = torch.get_default_dtype
_issubclass = builtins.issubclass
_getattr = builtins.getattr
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


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
    for label, space, name, value in _SNAPSHOT:
        now = vars(space).get(name, value)
        if _replaced(label, name, value, now):
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

# Functions whose earlier calls ran past their time limit, with that limit in seconds:
# fail fast after the first.
_TIMED_OUT = {}


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
    _OWN_CODE.add(on_alarm.__code__)

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
    IPython (a notebook, nbgrader's Validate) it renders as :func:`failure_lines`: its
    message, where in the learner's own code an exception came from (``where``) and
    the property not met, without the traceback, which would only lead through this
    package, where the mistake is not. The feedback page of the independent check
    shows the same lines. Plain Python prints the usual traceback.
    """

    #: the property a graded check judges, set by :func:`graded` when the check fails
    checked_property = None

    def __init__(self, message="", original=None, where=()):
        super().__init__(message)
        #: the exception the learner's function raised, if that is what failed
        self.original = original
        #: the learner's own lines that raised it ("  fn, line 3 of its cell: ...")
        self.where = list(where)

    def _render_traceback_(self):
        return failure_lines(self)


#: the error name both the notebook and the feedback page show for a failed check
ERROR_NAME = "GradingError"


def failure_lines(error):
    """The lines a failed check shows, in the notebook and on the feedback page alike:
    ``GradingError: <first line of the message>``, then ``In your code:`` and the
    learner's lines when their function raised, the rest of the message, and
    ``\u2717 not met: <property>`` when a graded check failed. ``error``: a
    :class:`GradingError` (or any ``AssertionError``)."""
    first, *rest = _str(error).splitlines() or [""]
    lines = [f"{ERROR_NAME}: {first}"]
    where = _getattr(error, "where", None) or []
    if where:
        lines += [_("In your code:"), *where]
    lines += rest
    prop = _getattr(error, "checked_property", None)
    if prop:
        lines.append(_("\u2717 not met: {property}").format(property=_(prop)))
    return lines


_CONTROL = {c: None for c in range(32)}
_CONTROL[127] = None


def learner_lines(error, limit=3):
    """Where in the learner's own code ``error`` was raised: the last ``limit`` frames
    of its traceback that are neither this package nor an installed library, as
    ``  function, line N of its cell: source``. An exception that came from another
    process carries its lines along (``learner_where``, set by who rebuilt it); those
    are text from the learner's process, shown as plain printable text only."""
    given = _getattr(error, "learner_where", None)
    if _isinstance(given, (list, tuple)):
        return [_str(ln).translate(_CONTROL)[:300] for ln in given if _isinstance(ln, _str)][-limit:]
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
            frames.append((f"  {place}" + (f": {text}" if text else "")).translate(_CONTROL)[:300])
        tb = tb.tb_next
    return frames[-limit:]


class Outcome:
    """What one call of the learner's function did, as data: made by :func:`execute` in
    the process that ran the function, judged by :func:`verdict` (possibly in another
    process: see ``classroom.scoring``).

    ``result``: what it returned; ``error``: the exception it raised (``None`` if none);
    ``timed_out``: stopped at the time limit; ``ops``: names of the ATen operations that
    ran; ``ref_hits``: names of forbidden ``andrea_ref`` functions entered;
    ``integrity``: a message if PyTorch's functions were found replaced; ``where``: the
    learner's own lines the error was raised from (:func:`learner_lines`), found where
    the traceback is, in the process that ran the function.
    """

    __slots__ = ("result", "error", "timed_out", "ops", "ref_hits", "integrity", "where")

    def __init__(self, result=None, error=None, timed_out=False, ops=(), ref_hits=(), integrity=None,
                 where=()):
        self.result = result
        self.error = error
        self.timed_out = timed_out
        self.ops = frozenset(ops)
        self.ref_hits = tuple(ref_hits)
        self.integrity = integrity
        self.where = tuple(where)


class RemoteAnswer:
    """Base class of a learner's function that runs in another process.

    :func:`call` hands such a function the arguments and the forbidden operations and
    gets an :class:`Outcome` back (``remote_call``); the arguments are updated in place
    with their values after the call, so an in-place change shows as it would locally.
    ``timed_out`` is set once a call has run past the time limit, and ``timed_out_after``
    to that limit in seconds.
    """

    timed_out = False
    timed_out_after = 0.0

    def remote_call(self, args, forbidden, work=1.0):  # pragma: no cover - implemented by subclasses
        raise NotImplementedError

    def __call__(self, *args):
        return verdict(self.remote_call(args, NOTHING_FORBIDDEN), name="function", key=self)


# ATen operations that contain a forbidden word, with every dispatch key the dispatcher
# has a kernel for (CPU, NestedTensorCPU, QuantizedCPU, MkldnnCPU, Meta, Autograd,
# Functionalize, Tracer, FuncTorchBatched, the composite keys ...), found once per word set.
_FORBIDDEN_OPS = {}
_KEY_LINE = __import__("re").compile(r"^([A-Za-z0-9]+)(\[alias\])?( \(inactive\))?: registered at")


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
            _OWN_CODE.add(kernel.__code__)
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
_OWN_CODE = {_OpRecorder.__torch_dispatch__.__code__}


@contextlib.contextmanager
def _no_collection():
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


def _importing(frame):
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


def execute(fn, args, forbidden=NOTHING_FORBIDDEN, time_limit=None, blocker=None):
    """Call ``fn(*args)`` under the time limit with warnings and output captured,
    recording the operations that run; never raises for what the function does.

    ``blocker``: a :class:`Blocker` the caller installed for ``forbidden.aten_words``
    and keeps installed (the answer server keeps it from the first call to the next
    learner cell, so that its reply is built while the operations are still refused);
    without one, the forbidden operations are refused for the duration of this call."""
    problem = integrity_problem()
    if problem is not None:
        return Outcome(integrity=problem)
    limit = CALL_TIME_LIMIT if time_limit is None else time_limit
    # the operations that ran matter only where some are forbidden; recording them costs
    # a Python call per ATen operation
    recorder = _OpRecorder() if forbidden.aten_words else contextlib.nullcontext()
    ref_hits = []
    own = _OWN_CODE

    def profiler(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code not in own and forbidden.ref_file_hit(code.co_filename) is not None \
                    and not _importing(frame):
                hit = code.co_name
                if code.co_filename.startswith(_TORCH_DIR):  # PyTorch's own Python implementation
                    where = os.path.splitext(code.co_filename[len(_TORCH_DIR):])[0].replace(os.sep, ".")
                    hit = f"torch.{where}.{hit}"
                ref_hits.append(hit)

    sink = io.StringIO()
    old_profile = sys.getprofile()
    outcome = Outcome()
    own_blocker = blocker is None and bool(forbidden.aten_words)
    if own_blocker:
        blocker = Blocker(forbidden.aten_words)
    seen_before = len(blocker.seen) if blocker is not None else 0
    try:
        with warnings.catch_warnings(record=True), contextlib.redirect_stdout(sink), \
                contextlib.redirect_stderr(sink):
            warnings.simplefilter("always")
            if own_blocker:
                blocker.install()
            with _time_limit(limit):
                try:
                    with recorder, _no_collection():
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
                    outcome.where = tuple(learner_lines(exc))
    finally:
        sys.setprofile(old_profile)
        if own_blocker:
            blocker.remove()
    blocked = blocker.seen[seen_before:] if blocker is not None else []
    outcome.ops = frozenset(getattr(recorder, "ops", ())) | frozenset(blocked)
    outcome.ref_hits = tuple(ref_hits)
    outcome.integrity = integrity_problem()
    return outcome


def verdict(outcome, *, name, forbidden=NOTHING_FORBIDDEN, hint=None, key=None, seconds=None):
    """What the checks make of an :class:`Outcome`: its result, or an
    ``AssertionError`` that says what went wrong (``seconds``: the call's time limit)."""
    seconds = CALL_TIME_LIMIT if seconds is None else seconds
    if outcome.integrity is not None:
        raise GradingError(outcome.integrity)
    if outcome.ref_hits:
        # the most telling hit: PyTorch's wrappers (torch._prims_common) say least
        hit = next((h for h in outcome.ref_hits if not h.startswith("torch._prims_common")), outcome.ref_hits[0])
        if hit.startswith("torch."):
            raise GradingError(
                _("`{name}` runs PyTorch's own Python version of an operation ({function}); {rule}").format(
                    name=name, function=hit[len("torch."):], rule=_(forbidden.what)))
        raise GradingError(
            _("`{name}` calls andrea_ref's own implementation ({function}); {rule}").format(
                name=name, function=hit, rule=_(forbidden.what))
        )
    used = sorted(op for op in outcome.ops if any(w in op for w in forbidden.aten_words))
    if used:
        raise GradingError(
            _("`{name}` runs the library operation aten.{op}; {rule}").format(
                name=name, op=used[0], rule=_(forbidden.what))
        )
    if outcome.timed_out:
        if key is not None:
            _TIMED_OUT[key] = seconds
        raise GradingError(_("`{name}` did not finish within {seconds} s (an endless loop?).").format(
            name=name, seconds=number(seconds)))
    error = outcome.error
    if error is not None:
        where = list(outcome.where) or learner_lines(error)
        if _isinstance(error, NotImplementedError):
            msg = _("`{name}` is not written yet: it raises NotImplementedError.").format(name=name)
            raise GradingError(msg, error, where)
        kind = getattr(error, "remote_type", None) or _type(error).__name__
        msg = _("`{name}` raised {kind}: {error}").format(name=name, kind=kind, error=error)
        extra = hint(error, where) if hint is not None else None
        if extra:
            msg += "\n" + _("Likely mistake: {likely}").format(likely=extra)
        raise GradingError(msg, error, where)
    return outcome.result


def call(fn, args, *, name, forbidden=NOTHING_FORBIDDEN, hint=None, work=1.0):
    """Call ``fn(*args)`` the safe way and return what it returned.

    Raises ``AssertionError`` if ``fn`` raises, runs too long, or uses something
    ``forbidden`` names. ``hint(exc, where, args)`` may return a diagnosis of an
    exception, from its text, the learner's lines that raised it and the arguments
    (a size written into the code is recognised for every function). ``fn``
    may be a :class:`RemoteAnswer`: the call then runs in the process that serves it.
    ``work``: how many ordinary calls' worth of computing the check asks of ``fn`` (a
    training loop of many steps): its time limit is ``work`` times the per-call limit,
    here and in the process that serves a remote function alike.
    """
    if not _callable(fn):
        raise GradingError(_("`{name}` should be a function, got {type}.").format(
            name=name, type=_type(fn).__name__))
    remote = _isinstance(fn, RemoteAnswer)
    key = fn if remote else _fn_key(fn)
    if (remote and fn.timed_out) or (not remote and key in _TIMED_OUT):
        earlier = fn.timed_out_after if remote else _TIMED_OUT[key]
        raise GradingError(
            _("`{name}` did not finish within {seconds} s in an earlier check "
              "(an endless loop?), so it is not called again.").format(name=name, seconds=number(earlier))
        )
    seconds = CALL_TIME_LIMIT * work
    if remote:
        outcome = fn.remote_call(args, forbidden, work)
        key = None  # the proxy remembers its own time-outs
    else:
        _check_integrity()
        outcome = execute(fn, args, forbidden, time_limit=seconds)

    def diagnosis(error, where):
        return (hint(error, where, args) if hint is not None else None) or size_hint(error, where, args)

    return verdict(outcome, name=name, forbidden=forbidden, hint=diagnosis, key=key, seconds=seconds)


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
    enough digits to see the difference), and the tolerance applied.

    Where ``ref`` is finite, ``out`` must be finite and within the tolerance: nan or inf
    never matches a number. Where ``ref`` itself is nan or inf, ``out`` must be the same
    (nan matching nan): nothing in the reference excuses an element."""
    rtol, atol = tol
    a, b = f64(out), f64(ref)
    if tuple(a.shape) != tuple(b.shape):
        return _("shape {got}, expected {shape}").format(got=tuple(a.shape), shape=tuple(b.shape))
    diff = _abs_f(_sub(a, b))
    bound = _add(_mul(_abs_f(b), rtol), atol)
    ref_finite = _isfinite(b)
    near = _logical_and(_le(diff, bound), _isfinite(a))
    identical = _logical_or(_eq(a, b), _logical_and(_isnan(a), _isnan(b)))
    bad = _logical_not(_where(ref_finite, near, identical))
    if not _item(_any(bad)):
        return None
    flat_bad = _reshape(bad, (-1,))
    # worst element: the one furthest outside its allowance (a non-finite one counts as worst)
    ratio = _reshape(_div(diff, bound), (-1,))
    scored = _where(_isfinite(ratio), ratio, _full_like(ratio, math.inf))
    scored = _where(flat_bad, scored, _full_like(ratio, -1.0))
    i = _item(_argmax(scored))
    got = _item(_reshape(a, (-1,))[i])
    want = _item(_reshape(b, (-1,))[i])
    where = _index_text(i, tuple(a.shape))
    g, w = _two_numbers(got, want)
    if not math.isfinite(want):
        return _("at {index} got {got}, expected {expected} exactly").format(index=where, got=g, expected=w)
    allowed = atol + rtol * abs(want)
    return _("at {index} got {got}, expected {expected}: difference {difference}, "
             "allowed {allowed} (rtol = {rtol}, atol = {atol})").format(
        index=where, got=g, expected=w, difference=number(abs(got - want), ".3g"),
        allowed=number(allowed, ".3g"), rtol=number(rtol), atol=number(atol))


def close(out, ref, tol):
    return mismatch(out, ref, tol) is None


def same(a, b):
    """Exactly equal, dtype, shape and device included (used to check that inputs were
    left unchanged)."""
    a, b = _detach(a), _detach(b)
    return (a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and a.device == b.device
            and _equal(a, b))


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
    return number(got, f".{digits}g"), number(want, f".{digits}g")


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


# Model sizes a learner might write into the code.
_SIZE_NUMBER = __import__("re").compile(r"(?<![\w.])(\d{2,6})(?![\w.])")


def _model_sizes():
    """The widths of the course's models (d_model, mlp_dim, the vocabulary), the sizes a
    learner would write into the code."""
    from ..config import CONFIGS
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


# The self-check's lines are wrapped here, at spaces: front ends wrap long output lines
# anywhere (JupyterLab's output area breaks words), which splits words mid-way.
REPORT_WIDTH = 78


def _report_line(text: str, indent: str = "      ") -> str:
    """One line of the self-check's report, wrapped at spaces to REPORT_WIDTH, its
    continuation lines indented under it (a word longer than a line is never split)."""
    import textwrap
    return textwrap.fill(text, width=REPORT_WIDTH, subsequent_indent=indent,
                         break_long_words=False, break_on_hyphens=False)


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
            print(_report_line(f"  \u2717 {label}: {first}"))
            for line in rest:
                print(_report_line(f"      {line}"))
        else:
            passed += 1
            print(_report_line(f"  \u2713 {label}", indent="    "))
    print(_("{passed} of {total} properties hold.").format(passed=passed, total=len(checks)))
    return passed == len(checks)
