"""The reporting stage: what learners and the instructor read.

Feedback pages (made in the worker, one submission at a time):

- :mod:`.pages`: one submission's feedback pages, through :mod:`.feedback` (render, build,
  or a page that says why not);
- :mod:`.notebook`: the graded notebook made safe to show (no hidden test, the
  independent verdicts); :mod:`.outputs`: what a page shows of outputs and markdown;
- :mod:`.sanitiser`: the one policy over every page's final body; :mod:`.page`: a page
  that reads the same anywhere (its own head, styles inline, math typeset by
  :mod:`.mathsvg`); :mod:`.chapters`: the book's chapters a page links to.

The course gradebook and the instructor's reports (once per run):

- :mod:`.merge`: the workers' gradebooks merged into the course gradebook;
- :mod:`.report`: ``grades.csv``, ``report.csv``, ``report.txt`` and ``report.html``
  of the whole class as the gradebook holds it.
"""
