"""The execution stage: ``nbgrader autograde`` of one submission, every kernel started by
the isolation stage.

- :mod:`.autograde`: a worker's nbgrader, one submission run under a deadline, what it
  produced (status, errors, graded notebooks, log);
- :mod:`.capped`: the learner's output bounded in bytes as it arrives;
- :mod:`.scores`: nbgrader's cell scores by the course's rule (:mod:`andrea_ref.grading.points`).

What the learner's kernel computed is a hint here, never a verdict: the points come
from :mod:`classroom.scoring`.
"""
