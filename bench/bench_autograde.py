"""Time to autograde one learner's notebooks with the course's nbgrader setup.

A temporary course is made from the repository; one learner hands in every notebook of
the course (``course.toml``), finished (the instructor's solutions in the released
notebooks); then ``nbgrader autograde "*" --student learner --force`` is timed, end to
end (nbgrader start, one kernel per notebook, every check), several times. Prints the
median. Target: < 15 s for the course's notebooks.

    .venv/bin/python bench/bench_autograde.py [--runs 3]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from andrea_ref.grading import points_table  # noqa: E402
from andrea_ref.grading.course import make_course, run_nbgrader, scores, submit  # noqa: E402
from andrea_ref.grading.manifest import load  # noqa: E402
from classroom import markers  # noqa: E402

TARGET_S = 15.0


def finished(released: dict, solution: dict) -> str:
    """The released notebook with the solution cells filled in from the instructor's copy."""
    answers = {}
    for cell in solution["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution"):
            answers[meta["grade_id"]] = markers.without_markers(markers.cell_source(cell), (markers.SOLUTION,))
    for cell in released["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell["source"] = answers[grade_id]
    return json.dumps(released, indent=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="andrea-bench-") as tmp:
        course = make_course(Path(tmp))
        assignments = load()
        full = 0.0
        for a in assignments:
            released = json.loads((course / "exercises" / a.path).read_text())
            solution = json.loads((course / "solutions" / a.path).read_text())
            full += sum(p for _, p in points_table.graded(solution["cells"]))
            submit(course, "learner", a.name, a.filename, finished(released, solution))
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            run_nbgrader(course, "autograde", "*", "--student", "learner", "--force", check=True)
            times.append(time.perf_counter() - start)
        got = scores(course)
        total = sum(sum(v.values()) for (student, _), v in got.items() if student == "learner")
    median = statistics.median(times)
    print(f"autograde, one learner, {len(assignments)} notebooks: median {median:.1f} s over {args.runs} runs "
          f"({', '.join(f'{t:.1f}' for t in times)} s); score {total:g}/{full:g}; "
          f"target < {TARGET_S:g} s: {'met' if median < TARGET_S else 'MISSED'}")
    return 0 if total == full else 1


if __name__ == "__main__":
    sys.exit(main())
