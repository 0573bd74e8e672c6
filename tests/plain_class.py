"""The catalogue's submissions graded by plain nbgrader, once per test run (the
``plain_class`` fixture of conftest.py).

For each assignment with submissions in grading_submissions.CASES a temporary course is
made from the repository (nbgrader_config.py and solutions/) and released with ``nbgrader
generate_assignment``; every submission of that assignment is put in
``submitted/<student>/<assignment>/`` and the whole batch goes through one ``nbgrader
autograde`` and one ``nbgrader generate_feedback``. Two courses are graded at a time (two
cores). The only setting changed from the course's configuration is the cell timeout (15 s
instead of 60 s), so the submission with an endless loop at the top of a cell costs less
time; no other submission comes near it.

Read by test_grading_pipeline.py (points per cell, nbgrader's feedback) and by
test_classroom_parallel.py (the reference the parallel grader must equal).
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grading_submissions as S
from andrea_ref.grading.course import make_course, run_nbgrader, scores, submit

TEST_CONFIG = "c.Execute.timeout = 15"


def _grade_assignment(root: Path, assignment: str) -> dict:
    nb_name = S.ASSIGNMENTS[assignment][0]
    course = make_course(root / assignment, extra_config=TEST_CONFIG, assignments=(assignment,))
    released = json.loads((course / "exercises" / assignment / nb_name).read_text())
    solution = json.loads((course / "solutions" / assignment / nb_name).read_text())
    for case in S.CASES:
        if case.assignment == assignment:
            submit(course, case.student, assignment, nb_name, S.make_submission(case, released, solution))
    auto = run_nbgrader(course, "autograde", assignment)
    feedback = run_nbgrader(course, "generate_feedback", assignment)
    return {"course": course, "autograde": auto, "feedback": feedback, "scores": scores(course)}


def grade(root: Path) -> dict:
    """{assignment: {"course", "autograde", "feedback", "scores"}} (``scores``: nbgrader's
    gradebook, {(student, assignment): {grade_id: score}}), the courses made in ``root``."""
    # the assignments with submissions here (the capstone's answers are graded in
    # test_grading_capstone.py)
    assignments = [a for a in S.ASSIGNMENTS if any(c.assignment == a for c in S.CASES)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(assignments, pool.map(lambda a: _grade_assignment(root, a), assignments)))
