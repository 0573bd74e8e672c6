"""Grading a class: plain sequential nbgrader against the sandboxed parallel grader.

20 learners x every notebook of the course (``course.toml``: 100 notebooks with the capstone;
a mix of correct answers, classic mistakes and untouched exercises) are graded twice, in
the same run:

1. ``nbgrader autograde "*"`` in a throw-away course (one kernel per notebook, one
   notebook after the other, no sandbox);
2. ``python -m classroom.grade SUBMISSIONS --workers N`` (N = the machine's cores
   unless --workers is given): every kernel sandboxed, N at a time.

It prints both wall-clock times and their ratio, what each cost in core-seconds per
notebook (user + system CPU time of every process the run started, start-up
included: the bench makes itself the reaper of orphaned processes, so the sandboxes'
processes are counted too), and where the grader's time and CPU went, stage by
stage; it checks that both gave the same grades, and exits 1 if they differ. Then
it times ``classroom.grade`` on one learner's notebooks alone (the assignments'
template and the course gradebook reused, as on any run after the first): the time
an instructor waits for one late submission, sandbox, independent check and
feedback included (``--no-one`` skips it).

    .venv/bin/python bench/bench_grade_parallel.py [--learners 20] [--workers N] [--no-one]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from grading_submissions import ASSIGNMENTS, CAPSTONE, CASES, make_submission  # noqa: E402

from andrea_ref.grading.course import make_course, run_nbgrader  # noqa: E402
from andrea_ref.grading.course import scores as course_scores  # noqa: E402
from classroom.reporting import merge  # noqa: E402


def class_of(n_learners: int, dest: Path) -> None:
    """Learner k hands in, for each notebook, the k-th answer of that notebook's list
    (cycling), skipping the deliberately endless or damaged ones."""
    per_assignment = {a: [c for c in CASES + CAPSTONE if c.assignment == a and c.damage is None
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


PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Orphaned descendants (a sandbox whose parent was killed) become this process's
    children, so that their CPU time is counted once they are reaped (Linux)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def reap(grace: float = 10.0) -> None:
    """Reap every child left (orphans handed to this process), waiting up to ``grace``
    seconds for those still ending."""
    end = time.monotonic() + grace
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > end:
                return
            time.sleep(0.05)


def counted(cmd=None, fn=None, **kwargs):
    """Run ``cmd`` (or call ``fn``); returns (its result, wall seconds, core-seconds of
    every process it started)."""
    reap(0)
    cpu0, t0 = children_cpu(), time.perf_counter()
    result = subprocess.run(cmd, **kwargs) if cmd is not None else fn()
    wall = time.perf_counter() - t0
    reap()
    return result, wall, children_cpu() - cpu0


def stage_table(state: Path, n_nb: int, total_cpu: float) -> list[str]:
    """Per stage of the workers' pipeline: wall seconds and the worker's CPU (its own,
    Node's), per notebook; the rest of the run's core-seconds (start-up, the sandboxes'
    kernels and answer servers, merging, the reports); then, per assignment, the wall
    seconds of its notebooks (every stage), so that one costly notebook stands out."""
    wall, cpu, per_assignment = {}, {}, {}
    for f in state.rglob("*.json"):
        rec = json.loads(f.read_text())
        for k, v in (rec.get("timing") or {}).items():
            wall[k] = wall.get(k, 0.0) + v
        for k, v in (rec.get("cpu") or {}).items():
            cpu[k] = cpu.get(k, 0.0) + v
        if rec.get("assignment"):
            seen = per_assignment.setdefault(rec["assignment"], [0, 0.0])
            seen[0] += 1
            seen[1] += sum((rec.get("timing") or {}).values())
    lines = [f"    {'stage':>12}  {'wall s/nb':>9}  {'worker CPU s/nb':>15}"]
    for k in wall:
        lines.append(f"    {k:>12}  {wall[k] / n_nb:9.2f}  {cpu.get(k, 0.0) / n_nb:15.2f}")
    rest = total_cpu - sum(cpu.values())
    lines.append(f"    {'the rest':>12}  {'':>9}  {rest / n_nb:15.2f}  (start-up, sandboxes' kernels and answer "
                 "servers, merging, reports)")
    lines.append("  per assignment, wall seconds per notebook (every stage):")
    for name, (count, secs) in sorted(per_assignment.items()):
        lines.append(f"    {name:>12}  {secs / count:9.2f}  ({count} notebooks)")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", type=int, default=20)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--no-one", action="store_true", help="skip the one-learner run")
    args = ap.parse_args()
    if args.learners < 1 or args.workers < 1:
        ap.error("--learners and --workers: expected a whole number of at least 1")
    reaper = become_subreaper()
    with tempfile.TemporaryDirectory(prefix="andrea-bench-grade-") as tmp:
        tmp = Path(tmp)
        subs = tmp / "submitted"
        class_of(args.learners, subs)
        n_nb = sum(1 for _ in subs.rglob("*.ipynb"))

        course = make_course(tmp / "course")
        shutil.copytree(subs, course / "submitted")
        _, t_seq, cpu_seq = counted(fn=lambda: run_nbgrader(course, "autograde", "*"))
        reference = {k: {c: s for c, s in v.items()} for k, v in course_scores(course).items()}

        out, db = tmp / "out", tmp / "class.db"
        cmd = [sys.executable, "-m", "classroom.grade", str(subs), "--workers", str(args.workers),
               "--out", str(out), "--db", f"sqlite:///{db}", "--no-progress"]
        proc, t_par, cpu_par = counted(cmd, cwd=ROOT, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stdout + proc.stderr)
            return 1
        parallel = {k: {c.split("/")[-1]: s for c, s in v.items()}
                    for k, v in merge.scores(f"sqlite:///{db}").items()}
        stages = stage_table(out / "state", n_nb, cpu_par)
        if args.no_one:
            t_one = None
        else:
            t_one, busiest, phases = one_learner(args, tmp, subs, out, db)
            if t_one is None:
                return 1

    same = parallel == reference
    print(f"grading {args.learners} learners x {len(ASSIGNMENTS)} notebooks ({n_nb} notebooks) "
          f"on {os.cpu_count()} cores")
    print(f"  sequential nbgrader autograde (no sandbox): {t_seq:7.1f} s  ({t_seq / n_nb:.2f} s per notebook; "
          f"{cpu_seq / n_nb:.2f} core-seconds per notebook)")
    print(f"  classroom.grade, {args.workers} workers, sandboxed: {t_par:7.1f} s  ({t_par / n_nb:.2f} s per notebook,"
          f" including the template and sandbox check)")
    print(f"  speed-up: {t_seq / t_par:.2f}x (target 3x)")
    print(f"  cost: {cpu_par / n_nb:.2f} core-seconds per notebook, start-up included (goal 0.5; {cpu_par:.1f} in all"
          + ("" if reaper else "; orphaned sandbox processes not counted: no subreaper on this system") + ")")
    print("  where classroom.grade's time went, per notebook:")
    for line in stages:
        print(line)
    if t_one is not None:
        print(f"  one learner's {len(ASSIGNMENTS)} notebooks alone, classroom.grade: {t_one:.1f} s (target 15 s)")
        print(f"    of which grading the notebooks (busiest worker): {busiest:.1f} s; the rest is start-up "
              "(sandbox check, workers, zygotes)")
        for name, secs in sorted(phases.items()):
            print(f"    {name:>12}: {secs:5.1f} s summed over the notebooks")
    print(f"  same grades: {'yes' if same else 'NO'}")
    return 0 if same else 1


def one_learner(args, tmp: Path, subs: Path, out: Path, db: Path):
    """(seconds, the busiest worker's seconds, {stage: seconds}) of grading learner00 alone
    again; (None, ..) if it failed."""
    one = tmp / "one" / "learner00"
    shutil.copytree(subs / "learner00", one)
    out1 = tmp / "out1"
    shutil.copytree(out / "template", out1 / "template")
    shutil.copy(db, tmp / "one.db")  # the course gradebook exists after the first run too
    cmd1 = [sys.executable, "-m", "classroom.grade", str(one.parent), "--workers", str(args.workers),
            "--out", str(out1), "--db", f"sqlite:///{tmp / 'one.db'}", "--no-progress", "--force"]
    proc1, t_one, _ = counted(cmd1, cwd=ROOT, capture_output=True, text=True)
    if proc1.returncode != 0:
        print(proc1.stdout + proc1.stderr)
        return None, 0.0, {}
    per_worker, phases = {}, {}
    for f in (out1 / "state").rglob("*.json"):
        rec = json.loads(f.read_text())
        per_worker[rec.get("worker")] = per_worker.get(rec.get("worker"), 0.0) + rec.get("seconds", 0.0)
        for k, v in (rec.get("timing") or {}).items():
            phases[k] = phases.get(k, 0.0) + v
    return t_one, max(per_worker.values(), default=0.0), phases


if __name__ == "__main__":
    sys.exit(main())
