"""The one SQLAlchemy warning nbgrader's gradebook gives on every new submission.

nbgrader 0.9's ``Gradebook.add_submission`` (reached through
``update_or_create_submission``: by autograde in each grading worker, and by
:mod:`classroom.reporting.merge` in the grading command itself) builds the submission's objects
with their relationships already set, then walks ``assignment.notebooks`` before adding
them to the session. SQLAlchemy 2 autoflushes on that walk and warns, once per object
kind: ``Object of type <SubmittedAssignment> not in session, add operation along
'Student.submissions' will not proceed``. nbgrader adds the objects itself right after,
so nothing is lost (the parallel-grading tests compare every score with plain
nbgrader's). To an instructor the lines read like lost data, so exactly this message is
silenced, for nbgrader's own objects; any other SQLAlchemy warning still shows.
"""
from __future__ import annotations

import warnings

from sqlalchemy.exc import SAWarning

NOT_IN_SESSION = (r"Object of type <(Submitted\w*|Grade|Comment|Student)> not in session, "
                  r"add operation along '\w+\.\w+' will not proceed")


def ignore_add_submission_autoflush() -> None:
    """Silence nbgrader's add_submission autoflush warning (and nothing else) in the
    current warnings filter; use inside ``warnings.catch_warnings()`` to keep it local."""
    warnings.filterwarnings("ignore", message=NOT_IN_SESSION, category=SAWarning)
