"""Book build times, all three editions (English, German, Georgian): a cold build (no
_build at all, so every chapter executes, the training chapter's loss ladder included), a
no-change rebuild (warm: nothing executes), the rebuild after a translator edits one
German catalog (that edition is read again in full; English and Georgian are left as they
are), and the rebuild after the prose of the training chapter is edited (its code cells
are unchanged, so the execution cache keeps the ladder and nothing is trained again).

Each is run a few times and the median is reported against its target (2 CPU cores):
cold build <= 360 s, no-change rebuild < 10 s, catalog-edit rebuild < 60 s, prose-edit
rebuild < 60 s. For each cold build the chapters' execution times are printed as the build
reports them, and the processor time the machine gave the build is shown next to its wall
time (a machine shared with other work shows a wall time far above that). The cold runs
move the existing _build aside and put it back afterwards; the kernel's own build cache
(~/.cache/andrea_ref) is kept, as on any machine that has built it once.

Usage: python bench/bench_book.py [--runs N]      (exit 1 if a target is missed)
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
TARGETS = {"cold build": 360.0, "no-change rebuild": 10.0, "catalog-edit rebuild": 60.0,
           "prose-edit rebuild": 60.0}
# the catalog the catalog-edit run changes (a translator's comment added, then removed)
CATALOG = ROOT / "book" / "locales" / "de" / "LC_MESSAGES" / "book" / "01_welcome.po"
# the chapter whose prose the prose-edit run changes (a sentence added, then removed)
CHAPTER = ROOT / "book" / "09_andrea_at_work.md"
EXECUTED = re.compile(r"book/(\w+)\.md: Executed notebook in ([\d.]+) seconds")


def edited_build(path: Path, addition: bytes) -> float:
    original = path.read_bytes()
    try:
        path.write_bytes(original + addition)
        return build()[0]
    finally:
        path.write_bytes(original)


def build() -> tuple[float, float, dict[str, float]]:
    """Wall time, processor time of the build and its children, and each executed chapter's time."""
    start, cpu_start = time.perf_counter(), os.times()
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_book.py")], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    elapsed, cpu_end = time.perf_counter() - start, os.times()
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
        sys.exit(f"book build failed (exit {proc.returncode})")
    cpu = (cpu_end.children_user - cpu_start.children_user) + (cpu_end.children_system - cpu_start.children_system)
    return elapsed, cpu, {m.group(1): float(m.group(2)) for m in EXECUTED.finditer(proc.stdout)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2, help="runs of each kind (default 2)")
    args = parser.parse_args()
    saved = None
    if BUILD.exists():
        saved = BUILD.with_name("_build.bench-saved")
        shutil.rmtree(saved, ignore_errors=True)
        BUILD.rename(saved)
    times: dict[str, list[float]] = {name: [] for name in TARGETS}
    try:
        for run in range(args.runs):
            shutil.rmtree(BUILD, ignore_errors=True)
            wall, cpu, chapters = build()
            times["cold build"].append(wall)
            print(f"cold build {run + 1}: {wall:.1f} s wall, {cpu:.1f} s processor time (build and children); "
                  "chapters executed in: " + ", ".join(f"{k} {v:.1f} s" for k, v in chapters.items()), flush=True)
            times["no-change rebuild"].append(build()[0])
            times["catalog-edit rebuild"].append(edited_build(CATALOG, b"\n# bench: a translator's note\n"))
            times["prose-edit rebuild"].append(edited_build(CHAPTER, b"\nA sentence added by the benchmark.\n"))
    finally:
        if saved is not None:
            shutil.rmtree(BUILD, ignore_errors=True)
            saved.rename(BUILD)
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{v:.1f}" for v in os.getloadavg())
          + f" on {os.cpu_count()} cores (above the core count: the machine was shared)")
    ok = True
    for name, values in times.items():
        median = statistics.median(values)
        target = TARGETS[name]
        verdict = "ok" if median <= target else "MISSED"
        ok &= median <= target
        runs = ", ".join(f"{v:.1f}" for v in values)
        print(f"book {name:18s} median {median:6.1f} s  (runs: {runs})  target <= {target:.0f} s  {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
