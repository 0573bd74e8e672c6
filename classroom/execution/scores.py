"""nbgrader's scores of the notebook the learner's kernel ran, by the course's one rule.

nbgrader's ``SaveAutoGrades`` scores a graded code cell by its own rule (no error and
nothing on stderr: full marks; a number as the cell's value: that many points). The
grader scores it by :mod:`andrea_ref.grading.points` instead, the rule the independent
check uses too, so that the comparison of the two (``classroom.scoring.gradebook``)
compares like with like. Written answers (solution cells that are graded) keep
nbgrader's rule: they are graded by hand.
"""
from __future__ import annotations

from nbgrader import utils
from nbgrader.preprocessors import SaveAutoGrades

from andrea_ref.grading.points import cell_points, outputs_pass


class SaveScores(SaveAutoGrades):
    """``SaveAutoGrades`` with the graded code cells scored by the course's rule."""

    def _add_score(self, cell, resources) -> None:
        if utils.is_solution(cell) or cell.cell_type != "code":
            return super()._add_score(cell, resources)
        grade = self.gradebook.find_grade(cell.metadata["nbgrader"]["grade_id"], self.notebook_id,
                                          self.assignment_id, self.student_id)
        grade.auto_score = cell_points(float(cell.metadata["nbgrader"]["points"]), outputs_pass(cell.outputs))
        # a manual grade given earlier stays, and asks for review (as nbgrader does)
        grade.needs_manual_grade = grade.manual_score is not None
        self.gradebook.db.commit()
