"""The scoring stage: the points, decided where no learner code ever ran.

- :mod:`.plan`: what to run and check, read once per assignment from the instructor's
  notebooks and their release (``OUT/template/plans.json``), and a submission's code
  graded cell by graded cell;
- :mod:`.remote`: the learner's function as the checks see it, served by an answer server;
- :mod:`.verdicts`: one notebook checked (:func:`~.verdicts.check_notebook`), cell by
  cell, with the checks of ``andrea_ref.grading`` and the rule of
  :mod:`andrea_ref.grading.points`;
- :mod:`.shortcuts` (on :mod:`.source`, the alias tracking): the rules against shortcuts,
  decided on the answer's source: forbidden implementations reached from the graded
  function, machinery reached anywhere, file access noted;
- :mod:`.forbidden`: a notebook's rule against shortcuts, which :mod:`.shortcuts` applies:
  which forbidden implementation a path denotes, directly or by a computed name;
- :mod:`.review`: submissions held for review, and the instructor's acceptances;
- :mod:`.submission`: a whole submission checked, and the verdicts written over
  nbgrader's scores in the worker's gradebook (with where the notebook's own graded
  cells said otherwise).

Another check of the answers' source belongs beside :mod:`.shortcuts`, called from
:func:`~.verdicts.check_notebook`.
"""
