"""The safe call every check makes of the learner's function (:func:`call`: :func:`execute`
runs it, :func:`verdict` judges what happened), and what the machinery of all checks
does, module by module. A failure becomes one clear ``GradingError`` (an
``AssertionError`` that a notebook shows as its message, without a traceback).

==============  ====================================================================
``core``        the call: :func:`execute`, :class:`Outcome`, :func:`verdict`, :func:`call`,
                :class:`RemoteAnswer` (a function served by another process)
``watch``       what a call may not use and how it is watched: :class:`~.watch.Forbidden`,
                the op recorder, the dispatcher-level :class:`~.watch.Blocker`, the time limit
``integrity``   whether PyTorch and the builtins are still the real ones
``messages``    the learner's language, :class:`~.messages.GradingError`, the lines a failure shows
``captured``    PyTorch's and Python's functions as they were at import
``compare``     what a check accepts and the comparison with the reference
``inputs``      the checks' inputs, devices, copies and the in-place sweep
``hints``       diagnoses that hold for every function (a size written into the code)
``runner``      :func:`~.runner.graded` and :func:`~.runner.run_report`
==============  ====================================================================

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
* compares with torch functions captured when the package was imported, and refuses
  to grade in a kernel where PyTorch's functions have been reassigned (what PyTorch's
  own API rebinds, such as ``torch.Storage`` after ``torch.set_default_dtype``, is not
  a reassignment);
* compares so that nan or inf never matches a number and a nan in the reference
  excuses nothing (:func:`~.compare.mismatch`), draws every input in float64 on the
  CPU with its own generator (:func:`~.inputs.uniform`, :func:`~.inputs.normal`: the
  learner's default dtype or device changes nothing), and lets the first check of each
  notebook call the function on every input any check uses, to see an argument changed
  in place (:func:`~.inputs.inputs_left_alone`);
* renders a failure one way (:func:`~.messages.failure_lines`), which the notebook and
  the independent check's feedback page both show.

A call is split in two: :func:`execute` runs the function and describes what
happened as data (an :class:`Outcome`), :func:`verdict` judges it. In a notebook both
run in the learner's kernel: instant feedback, which code in that kernel could
defeat. For the grade, ``classroom.scoring`` runs :func:`execute` in a separate
sandboxed process that serves the learner's function, and the checks and
:func:`verdict` in the grader's own process, where no learner code runs
(:class:`RemoteAnswer`).
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
import warnings

from .captured import TORCH_DIR as _TORCH_DIR, callable_ as _callable, isinstance_ as _isinstance, type_ as _type
from .hints import size_hint
from .integrity import check_integrity as _check_integrity, integrity_problem
from .messages import GradingError, _, learner_lines, number
from .watch import (
    Blocker, LearnerTimeout as _LearnerTimeout, NOTHING_FORBIDDEN, OWN_CODE as _OWN_CODE,
    OpRecorder as _OpRecorder, importing as _importing, no_collection as _no_collection,
    one_thread as _one_thread, time_limit as _time_limit)


# The modules whose functions a call of execute runs through, this one first: the answer
# server runs calls through private copies of them (classroom.isolation.answer_guard.private);
# tests/test_classroom_private_core.py checks that the list is whole.
CALL_MODULES = ("andrea_ref.grading.core", "andrea_ref.grading.integrity", "andrea_ref.grading.messages",
                "andrea_ref.grading.watch", "andrea_ref.i18n")

# Seconds one call of the learner's function may take before it is stopped.
CALL_TIME_LIMIT = float(os.environ.get("ANDREA_GRADING_TIME_LIMIT", "10"))

# Functions whose earlier calls ran past their time limit, with that limit in seconds:
# fail fast after the first.
_TIMED_OUT = {}


def _fn_key(fn):
    return getattr(fn, "__code__", None) or id(fn)


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


def execute(fn, args, forbidden=NOTHING_FORBIDDEN, time_limit=None, blocker=None):
    """Call ``fn(*args)`` on one thread under the time limit (see
    :func:`~andrea_ref.grading.watch.one_thread`) with warnings and output captured,
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
            with _one_thread(), _time_limit(limit):
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
