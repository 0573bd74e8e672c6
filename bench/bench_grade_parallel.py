"""Grading a class: plain sequential nbgrader against the sandboxed parallel grader.

20 learners x 4 notebooks (80 notebooks; a mix of correct answers, classic mistakes
and untouched exercises) are graded twice, in the same run:

1. ``nbgrader autograde "*"`` in a throw-away course (one kernel per notebook, one
   notebook after the other, no sandbox);
2. ``python -m classroom.grade SUBMISSIONS --workers N`` (N = the machine's cores
   unless --workers is given): every kernel sandboxed, N at a time.

It prints both wall-clock times and their ratio, checks that both gave the same
grades, and exits 1 if they differ. Then it times ``classroom.grade`` on one
learner's four notebooks alone (the assignments' template and the course gradebook
reused, as on any run after the first): the time an instructor waits for one late submission, sandbox,
independent check and feedback included.

    .venv/bin/python bench/bench_grade_parallel.py [--learners 20] [--workers N]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from grading_submissions import ASSIGNMENTS, CASES, make_submission  # noqa: E402

from andrea_ref.grading.course import make_course, run_nbgrader  # noqa: E402
from andrea_ref.grading.course import scores as course_scores  # noqa: E402
from classroom import merge  # noqa: E402


def class_of(n_learners: int, dest: Path) -> None:
    """Learner k hands in, for each notebook, the k-th answer of that notebook's list
    (cycling), skipping the deliberately endless or damaged ones."""
    per_assignment = {a: [c for c in CASES if c.assignment == a and c.damage is None
                          and "while True" not in (c.source or "")] for a in ASSIGNMENTS}
    for k in range(n_learners):
        student = f"learner{k:02d}"
        for a, cases in per_assignment.items():
            case = cases[k % len(cases)]
            nb_file = ASSIGNMENTS[a][0]
            released = json.loads((ROOT / "exercises" / a / nb_file).read_text())
            solution = json.loads((ROOT / "solutions" / a / nb_file).read_text())
            path = dest / student / a / nb_file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(make_submission(case, released, solution))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", type=int, default=20)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="andrea-bench-grade-") as tmp:
        tmp = Path(tmp)
        subs = tmp / "submitted"
        class_of(args.learners, subs)
        n_nb = sum(1 for _ in subs.rglob("*.ipynb"))

        course = make_course(tmp / "course")
        shutil.copytree(subs, course / "submitted")
        t0 = time.perf_counter()
        run_nbgrader(course, "autograde", "*")
        t_seq = time.perf_counter() - t0
        reference = {k: {c: s for c, s in v.items()} for k, v in course_scores(course).items()}

        out, db = tmp / "out", tmp / "class.db"
        cmd = [sys.executable, "-m", "classroom.grade", str(subs), "--workers", str(args.workers),
               "--out", str(out), "--db", f"sqlite:///{db}", "--no-progress"]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        t_par = time.perf_counter() - t0
        if proc.returncode != 0:
            print(proc.stdout + proc.stderr)
            return 1
        parallel = {k: {c.split("/")[-1]: s for c, s in v.items()}
                    for k, v in merge.scores(f"sqlite:///{db}").items()}

        one = tmp / "one" / "learner00"
        shutil.copytree(subs / "learner00", one)
        out1 = tmp / "out1"
        shutil.copytree(out / "template", out1 / "template")
        shutil.copy(db, tmp / "one.db")  # the course gradebook exists after the first run too
        cmd1 = [sys.executable, "-m", "classroom.grade", str(one.parent), "--workers", str(args.workers),
                "--out", str(out1), "--db", f"sqlite:///{tmp / 'one.db'}", "--no-progress", "--force"]
        t0 = time.perf_counter()
        proc1 = subprocess.run(cmd1, cwd=ROOT, capture_output=True, text=True)
        t_one = time.perf_counter() - t0
        per_worker, phases = {}, {}
        for f in (out1 / "state").rglob("*.json"):
            rec = json.loads(f.read_text())
            per_worker[rec.get("worker")] = per_worker.get(rec.get("worker"), 0.0) + rec.get("seconds", 0.0)
            for k, v in (rec.get("timing") or {}).items():
                phases[k] = phases.get(k, 0.0) + v
        busiest = max(per_worker.values(), default=0.0)
        if proc1.returncode != 0:
            print(proc1.stdout + proc1.stderr)
            return 1

    same = parallel == reference
    print(f"grading {args.learners} learners x {len(ASSIGNMENTS)} notebooks ({n_nb} notebooks) "
          f"on {os.cpu_count()} cores")
    print(f"  sequential nbgrader autograde (no sandbox): {t_seq:7.1f} s  ({t_seq / n_nb:.2f} s per notebook)")
    print(f"  classroom.grade, {args.workers} workers, sandboxed: {t_par:7.1f} s  ({t_par / n_nb:.2f} s per notebook,"
          f" including the template and sandbox check)")
    print(f"  speed-up: {t_seq / t_par:.2f}x (target 1.7x)")
    print(f"  one learner's {len(ASSIGNMENTS)} notebooks alone, classroom.grade: {t_one:.1f} s (target 15 s)")
    print(f"    of which grading the notebooks (busiest worker): {busiest:.1f} s; the rest is start-up "
          "(sandbox check, workers, zygotes)")
    for name, secs in sorted(phases.items()):
        print(f"    {name:>12}: {secs:5.1f} s summed over the notebooks")
    print(f"  same grades: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
