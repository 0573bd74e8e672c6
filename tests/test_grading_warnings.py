"""`make grade` stays quiet about nbgrader's one harmless SQLAlchemy warning and only
that one (the grading command's whole output is checked in test_feedback_browser.py)."""
from __future__ import annotations

import warnings

import pytest
from sqlalchemy.exc import SAWarning

from classroom.sawarnings import ignore_add_submission_autoflush


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def test_only_the_add_submission_autoflush_warning_is_silenced():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ignore_add_submission_autoflush()
        for kind, along in (("SubmittedAssignment", "Student.submissions"),
                            ("SubmittedAssignment", "Assignment.submissions"),
                            ("SubmittedNotebook", "Notebook.submissions")):
            warnings.warn(f"Object of type <{kind}> not in session, add operation along '{along}' "
                          "will not proceed", SAWarning)
        warnings.warn("Object of type <Assignment> not in session, add operation along "
                      "'Course.assignments' will not proceed", SAWarning)
        warnings.warn("Identity map already had an identity for (...), replacing it", SAWarning)
        warnings.warn("Object of type <SubmittedNotebook> not in session ...", UserWarning)
    assert [str(w.message)[:40] for w in seen] == [
        "Object of type <Assignment> not in sessi", "Identity map already had an identity for",
        "Object of type <SubmittedNotebook> not i"]
