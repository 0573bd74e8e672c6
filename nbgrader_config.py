"""nbgrader configuration of the ANDREA Block Lab course.

Instructor notebooks (with solutions and hidden tests) live in ``solutions/``;
``nbgrader generate_assignment`` writes the learner notebooks into ``exercises/``
(run ``.venv/bin/python scripts/release.py`` to do that and normalise the files).
The gradebook is ``gradebook.db`` (SQLite) at the repository root unless
``NBGRADER_DB_URL`` names another database, in the form the grader takes too: a
``postgresql://user:password@host/db`` URL is given to nbgrader with the installed driver
named (``postgresql+psycopg2://``; SQLAlchemy 2 would load psycopg 3, which is not
installed), by the grader's own rule, ``classroom.dburl.with_driver``.
"""
import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 (provided by nbgrader)


def _with_driver():
    """The grader's rule for a gradebook URL (``classroom/dburl.py``, its one home). Imported
    where the grader is importable (this checkout's environment, the grading Job); else loaded
    from its file, which needs the standard library only: beside this file (a checkout, the
    course in the image), or in the course the image carries (``$ANDREA_COURSE_SOURCE``, by
    default ``/opt/andrea-block-lab``) for the copy of this file in an instructor's
    ``~/course``, whose server cannot import the grader. None where it is nowhere."""
    try:
        from classroom.dburl import with_driver
        return with_driver
    except ImportError:
        pass
    import importlib.util
    here = globals().get("__file__")  # set by traitlets for a configuration file
    courses = [Path(here).resolve().parent] if here else []
    courses.append(Path(os.environ.get("ANDREA_COURSE_SOURCE") or "/opt/andrea-block-lab"))
    for course in courses:
        path = course / "classroom" / "dburl.py"
        if path.is_file():
            spec = importlib.util.spec_from_file_location("andrea_course_dburl", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module.with_driver
    return None


c.CourseDirectory.course_id = "andrea-block-lab"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
if os.environ.get("NBGRADER_DB_URL"):
    _rule = _with_driver()
    if _rule is None:  # the URL is not shown: it holds the gradebook's password
        print("nbgrader_config.py: classroom/dburl.py not found; $NBGRADER_DB_URL is used as it is "
              "(name the driver: postgresql+psycopg2://...)", file=sys.stderr)
    c.CourseDirectory.db_url = _rule(os.environ["NBGRADER_DB_URL"]) if _rule else os.environ["NBGRADER_DB_URL"]

# Execution when validating and autograding. `Execute.timeout` is the key nbgrader
# 0.9 honours (seconds per cell; a cell that runs longer is interrupted and the
# rest of the notebook still runs). Every check also stops the learner's function
# after 10 s on its own. The kernel name is fixed so a submission whose metadata
# names a kernel this machine lacks still runs.
c.Execute.timeout = 60
c.Execute.interrupt_on_timeout = True
c.Execute.kernel_name = "python3"
c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:"]

# A learner who deletes a graded cell gets it back; edited locked cells are
# restored from the gradebook as well.
c.OverwriteCells.add_missing_cells = True

# What replaces the solution code in the learner's copy.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Where learners read the course book: feedback pages link to its chapters there. A course
# that publishes its book replaces the whole value with the book's http(s) address, e.g.
# c.CourseBook.url = "https://courses.example.org/andrea-block-lab/"
# and that address wins everywhere. Until then it is $ANDREA_BOOK_URL, which the course's
# JupyterHub sets for its grading run (scripts/hub.py return) to the book it serves every
# user, "/hub/user-redirect/andrea-book/" (a path on the server a page is read from: the
# links work in a page fetched and opened on the hub). Empty (`make grade`): each page
# ships a self-contained copy of the chapters it links beside it, made from the book built
# on the grading machine (_build/html). The grader says once per run which.
c.CourseBook.url = os.environ.get("ANDREA_BOOK_URL", "")
