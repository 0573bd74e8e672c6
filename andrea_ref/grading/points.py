"""The one rule that turns check results into points.

A graded cell of a notebook calls one or more ``grading.check_*`` functions on the
learner's function. The cell is worth its points when every one of them passes, and
nothing otherwise: there is no partial credit inside a cell (a notebook's points are
split by property instead, one graded cell per property).

Every place that needs this rule calls the functions here, so that changing it (partial
credit, say) means changing this file alone:

- the kernel side: the scores nbgrader records from the notebook the learner's kernel
  ran (``classroom.execution``: a cell passed when it raised nothing and wrote nothing to
  stderr, :func:`outputs_pass`);
- the independent side: the verdicts of the checks run where no learner code runs
  (``classroom.scoring``: a cell passed when none of its checks failed);
- the comparison of the two behind "tampering suspected" (:func:`disagreement`), and the
  totals of the reports (:func:`total`);
- the rules the grader decides on the answer's source (``classroom.scoring.shortcuts``):
  a cell governed by the notebook's rule against library shortcuts earns nothing when a
  forbidden implementation is reached from the graded function (:data:`SHORTCUT`), and
  nothing while the submission is held for review (:data:`HELD`: it reaches for
  machinery no answer needs, or its answer server saw such a thing) until the instructor
  grants the points (:data:`ACCEPTED`).

The module itself uses nothing but the standard library.
"""
from __future__ import annotations

from typing import Iterable, Mapping

# what :func:`disagreement` says when the kernel's and the independent scores differ
KERNEL_HIGHER = "kernel higher"  # the notebook claims more than the checks grant: tampering suspected
KERNEL_LOWER = "kernel lower"  # the notebook shows less (e.g. a warning on stderr): the checks count


# what a rule of the grader made of a cell whose checks passed (see the module docstring)
SHORTCUT = "shortcut"  # a forbidden implementation is reached from the graded function: no points
HELD = "held for review"  # no points until the instructor has looked
ACCEPTED = "accepted on review"  # held, then granted by the instructor: the checks' points
WITHHOLDING = (SHORTCUT, HELD)


def cell_points(points: float, passed: bool, rule: str | None = None) -> float:
    """The points a graded cell worth ``points`` earns: all of them when it passed and
    no rule withholds them (``rule``: None, :data:`SHORTCUT`, :data:`HELD` or
    :data:`ACCEPTED`)."""
    return float(points) if passed and rule not in WITHHOLDING else 0.0


def outputs_pass(outputs: Iterable[Mapping]) -> bool:
    """Whether a graded cell passed, judged from the outputs its kernel produced: it
    raised nothing and wrote nothing to stderr (as nbgrader judges a test cell)."""
    for out in outputs:
        if out.get("output_type") == "error":
            return False
        if out.get("output_type") == "stream" and out.get("name") == "stderr":
            return False
    return True


def total(scores: Iterable[float | None]) -> float:
    """The points of several cells together (a cell without a score counts 0)."""
    return float(sum(s or 0.0 for s in scores))


def disagreement(kernel: float | None, independent: float | None) -> str | None:
    """How the score of a cell in the learner's kernel compares with its independent
    score: None when they agree, else :data:`KERNEL_HIGHER` or :data:`KERNEL_LOWER`
    (a cell without a score counts 0)."""
    k, i = float(kernel or 0.0), float(independent or 0.0)
    if k == i:
        return None
    return KERNEL_HIGHER if k > i else KERNEL_LOWER
