"""What a check says: messages in the learner's language (:func:`_`, :func:`number`), the
error of a failed property (:class:`GradingError`) and the lines it shows (:func:`failure_lines`,
:func:`learner_lines`), the same in a notebook and on a feedback page."""
from __future__ import annotations

import os
import warnings

from .. import i18n as _i18n
from .captured import (
    Exception_ as _Exception, PACKAGE_DIR as _PACKAGE_DIR, format_ as _format, getattr_ as _getattr,
    isinstance_ as _isinstance, parse_format as _parse_format, sorted_ as _sorted, str_ as _str, type_ as _type)


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
_localise_number = _i18n.localise_number


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

    #: the property a graded check judges, set by :func:`~.runner.graded` when the check fails
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


def fail(title, detail, likely=None):
    """Raise the :class:`GradingError` of a failed property: ``title`` (what should
    hold), ``detail`` (where it does not) and ``likely`` (the likely mistake and its
    fix), each already in the learner's language (``_("...")``)."""
    msg = f"{title}\n{detail}"
    if likely:
        msg += "\n" + _("Likely mistake: {likely}").format(likely=likely)
    raise GradingError(msg)

