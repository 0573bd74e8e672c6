"""Instructor tooling of the ANDREA Block Lab course.

The grader (``python -m classroom.grade SUBMISSIONS``, or ``python -m classroom``) is
one stage per subpackage, each with one job and a small interface the next calls:

============================  ==========================================================
``course``                    the course a run grades with: a copy taken when it starts
                              (``snapshot``: hermetic runs, the resume fingerprint) and
                              the assignments generated from it (``template``)
``intake``                    a class's submissions read from a folder or a zip, safely
                              (``collect()`` -> ``Submission``)
``isolation``                 where learner code runs: the ``Backend`` /
                              ``WorkerIsolation`` interface and its bubblewrap, cgroup
                              and seccomp implementation, the kernel launcher, the
                              zygotes and answer servers
``execution``                 ``nbgrader autograde`` of one submission in the sandbox,
                              output capped, cells scored by the course's rule
``scoring``                   the points, by the independent check in the grader's own
                              process, written over nbgrader's in the worker's gradebook
``reporting``                 feedback pages, the merge into the course gradebook,
                              ``grades.csv`` / ``report.csv`` / ``report.txt``
``orchestration``             ``run()``: the work queue in the gradebook, workers, their
                              supervision, resume state
``grade``                     the command line (thin: arguments -> ``orchestration.run``)
============================  ==========================================================

``record.SubmissionRecord`` is the one record of a submission that the stages fill in;
the rule that turns check results into points is :mod:`andrea_ref.grading.points`
(one function for the kernel side, the independent side and their comparison);
``markers`` reads nbgrader's BEGIN/END markers for everyone.

How a submission travels::

    checkout --course.snapshot--> OUT/course/<fp> --course.template--> OUT/template
    SUBMISSIONS --intake.collect--> [Submission] --> SubmissionRecord.begin (fingerprint)
       --> the gradebook's work queue (orchestration.workqueue: shared by every grader)
       --> orchestration.supervisor --claim--> orchestration.worker --> pipeline.grade_one:
           execution.autograde (kernels: isolation) --> scoring.submission (answer servers:
           isolation; checks here) --> reporting.pages
       --> OUT/state/<student>/<assignment>.json, reporting.merge --> course gradebook,
           claim done --> reporting.report

Other tools, outside the grader: :mod:`classroom.instructor_book` (the instructor
edition of the book), :mod:`classroom.scan` (the leak scan of the learner edition),
:mod:`classroom.notebook_i18n` (the notebooks in German and Georgian),
:mod:`classroom.textsafe` (learner text made safe to show). CONTRIBUTING.md says where
a new stage or backend goes.

This ``__init__`` imports nothing: sandboxed processes import single modules of the
package with interpreters that have only the standard library.
"""

import sys

# jsonschema checks the "iri" string formats with rfc3987_syntax when that is installed
# (JupyterLab's jupyter_events asks for it), and importing it builds an Earley parser:
# about 1.1 s of every grading process's start (the command, each worker), through
# nbgrader -> nbformat -> jsonschema. nbformat validates notebooks with no format
# checker at all, so nothing the grader does reads those formats; its processes do
# without the module, and jsonschema leaves the two formats unchecked, as it does where
# the module is not installed. Anything that imported it before keeps it. (The course's
# own environments do not install it at all: requirements-remove.txt; this covers the
# grader run from another environment.)
sys.modules.setdefault("rfc3987_syntax", None)
