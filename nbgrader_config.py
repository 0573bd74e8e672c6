"""nbgrader configuration of the ANDREA Block Lab course.

Instructor notebooks (with solutions and hidden tests) live in ``solutions/``;
``nbgrader generate_assignment`` writes the learner notebooks into ``exercises/``
(run ``.venv/bin/python scripts/release.py`` to do that and normalise the files).
The gradebook is ``gradebook.db`` (SQLite) at the repository root unless
``NBGRADER_DB_URL`` names another database.
"""
import os

c = get_config()  # noqa: F821 (provided by nbgrader)

c.CourseDirectory.course_id = "andrea-block-lab"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
if os.environ.get("NBGRADER_DB_URL"):
    c.CourseDirectory.db_url = os.environ["NBGRADER_DB_URL"]

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

# Where learners read the course book (an http(s) address): feedback pages link to its
# chapters there. Empty: each page ships a self-contained copy of the chapters it links,
# made from the book built on the grading machine (_build/html); the grader says so once
# per run. A course that publishes its book sets its address here, e.g.
# "https://courses.example.org/andrea-block-lab/".
c.CourseBook.url = ""
