"""Running checks in a notebook: :func:`graded` (the locked test cells: a tick or one
:class:`GradingError` naming the property) and :func:`run_report` (the self-checks: one
line per property, never raising)."""
from __future__ import annotations

import contextlib
import io
import warnings

from .messages import GradingError, _


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
