"""The notebooks' graded checks in a learner's kernel, on an idle machine and beside busy
processes: the learner's function timed on one thread (as the checks run it) against the
same function on PyTorch's default thread pool, side by side.

A learner's kernel keeps PyTorch's default pool (a thread per core). The checks' time
limit is wall-clock time, and a pool's threads wait on each other whenever the cores are
busy with other work: on a laptop that also builds, browses or grades, an honest answer
could then read "did not finish within N s". The checks therefore run the learner's
function on one thread (``andrea_ref.grading.watch.one_thread``), as the grader's
sandboxes run everything (``OMP_NUM_THREADS=1``).

Each run executes one solution notebook's nbgrader cells (the set-up, the answers, the
graded cells; not the cells that only explore) in order in a fresh Python process, as a
kernel would (nbgrader's markers are comments), and times its graded cells: the checks a
learner runs and the hidden tests the grader adds. "pool" runs put the
function back on the default pool (the checks' one-thread guard replaced by a no-op in
that process only). "busy" runs start one more spinning process than there are cores.
Printed: the median of the graded cells' wall time per notebook, per load and way, and
the ratio of the two ways.

    .venv/bin/python bench/bench_selfcheck.py [--runs 3] [--assignment NAME ...]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from andrea_ref.grading.manifest import load  # noqa: E402

WAYS = ("one thread", "pool")
LOADS = ("idle", "busy")


def child(name: str, way: str) -> None:
    """Run assignment ``name``'s solution notebook's nbgrader cells as a kernel would and
    print the graded cells' wall time (JSON)."""
    import torch

    from andrea_ref.grading import core

    if way == "pool":
        core._one_thread = contextlib.nullcontext
    assignment = load()[name]
    os.chdir(assignment.solution.parent)
    space: dict = {"__name__": "__main__"}
    graded = 0.0
    for cell in assignment.cells():
        meta = cell.get("metadata", {}).get("nbgrader")
        if cell.get("cell_type") != "code" or not meta:
            continue
        t0 = time.perf_counter()
        exec(compile("".join(cell["source"]), f"<{name}: {meta.get('grade_id')}>", "exec"), space)
        if meta.get("grade"):
            graded += time.perf_counter() - t0
    print(json.dumps({"graded": graded, "threads": torch.get_num_threads()}))


def one_run(name: str, way: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    proc = subprocess.run([sys.executable, __file__, "--child", name, way], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{name} ({way}) failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def spinning(n: int):
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        time.sleep(0.5)
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each notebook, load and way (default 3)")
    ap.add_argument("--assignment", action="append", default=None,
                    help="an assignment of course.toml (repeatable; default: every one)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(*a.child)
        return 0
    course = load()
    names = a.assignment or course.names
    unknown = [n for n in names if n not in course.names]
    if unknown:
        ap.error(f"--assignment: {unknown[0]!r} is not in course.toml (expected one of {', '.join(course.names)})")
    if a.runs < 1:
        ap.error("--runs: expected a whole number of at least 1")
    cores = os.cpu_count() or 1
    times = {(n, load_, way): [] for n in names for load_ in LOADS for way in WAYS}
    threads = None
    for load_ in LOADS:
        with spinning(cores + 1) if load_ == "busy" else contextlib.nullcontext():
            for _ in range(a.runs):
                for n in names:
                    for way in WAYS:  # the two ways one after the other, side by side
                        got = one_run(n, way)
                        threads = got["threads"]
                        times[(n, load_, way)].append(got["graded"])
    print(f"graded cells' wall time, median of {a.runs} runs (s); the kernel's pool: {threads} threads, "
          f"{cores} cores; busy: {cores + 1} spinning processes beside it")
    print(f"{'notebook':<14}{'load':<6}{'one thread':>12}{'pool':>10}{'pool / one':>12}")
    for n in names:
        for load_ in LOADS:
            one = statistics.median(times[(n, load_, WAYS[0])])
            pool = statistics.median(times[(n, load_, WAYS[1])])
            print(f"{n:<14}{load_:<6}{one:>12.2f}{pool:>10.2f}{pool / one:>11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
