"""Running checks in a notebook: :func:`graded` (the locked test cells: a tick or one
:class:`GradingError` naming the property) and :func:`run_report` (the self-checks: one
line per property, never raising).

A check marked :func:`left_to_grader` (one that trains a model, say) does not run in a
notebook the course's grader executes (:data:`GRADER_ENV` set in its sandbox): the grader
decides that property's points with its independent check, outside the learner's
process, so running it in the kernel as well would only double its cost. Everywhere
else (a learner's own notebook, plain ``nbgrader autograde``) it runs as any other."""
from __future__ import annotations

import contextlib
import contextvars
import io
import os
import warnings

from ..i18n import N_
from .messages import GradingError, _


@contextlib.contextmanager
def quiet():
    """Silence warnings raised by the checker itself (nbgrader fails on stderr)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# Set to "1" by the course's grader (classroom) in the sandboxes of the notebooks it
# grades: the points come from its independent check, never from the kernel's verdicts.
GRADER_ENV = "ANDREA_INDEPENDENT_CHECK"
# what a check left to the grader prints there instead of its verdict, after this mark
LEFT_MARK = "\u00b7"
NOT_RUN_HERE = N_("(not run here: the grader checks this property outside the notebook)")


def left_to_grader(check):
    """Decorator above :func:`graded`: a check too costly to run twice, left to the
    grader's independent check in a notebook the grader executes (see the module
    docstring). The grader's plan reads the mark (``classroom.scoring.plan``): such a
    cell's verdict in the kernel is not compared with the independent one."""
    check.left_to_grader = True
    return check


_EVERY_CHECK_RUNS = contextvars.ContextVar("every_check_runs", default=False)


@contextlib.contextmanager
def every_check_runs():
    """Within it no check is left to anyone, whatever :data:`GRADER_ENV` says: the
    grader's independent check, which decides the points, runs inside it."""
    token = _EVERY_CHECK_RUNS.set(True)
    try:
        yield
    finally:
        _EVERY_CHECK_RUNS.reset(token)


def skipped_here(check) -> bool:
    """Whether ``check`` is left to the grader in this process (see :func:`left_to_grader`)."""
    return (bool(getattr(check, "left_to_grader", False)) and os.environ.get(GRADER_ENV) == "1"
            and not _EVERY_CHECK_RUNS.get())


def graded(check):
    """Decorator: run a check with the checker's own warnings silenced; print a tick and
    the property on success, raise :class:`GradingError` naming the property on failure."""

    def wrapper(fn, *args, **kwargs):
        prop = wrapper.__doc__.strip().splitlines()[0]
        if skipped_here(wrapper):
            print(f"{LEFT_MARK} {_(prop)} " + _(NOT_RUN_HERE))
            return
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
    passed = counted = 0
    for label, check in checks:
        label = _(label)
        if skipped_here(check):
            print(_report_line(f"  {LEFT_MARK} {label} " + _(NOT_RUN_HERE), indent="    "))
            continue
        counted += 1
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
    print(_("{passed} of {total} properties hold.").format(passed=passed, total=counted))
    return passed == counted
