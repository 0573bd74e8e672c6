"""Book build times, all three editions (English, German, Georgian): a cold build (no
_build at all), a no-change rebuild, and the rebuild after a translator edits one German
catalog (that edition is read again in full; English and Georgian are left as they are).

Each is run a few times and the median is reported against its target:
cold build < 240 s, no-change rebuild < 10 s, catalog-edit rebuild < 60 s (2 CPU cores). The cold runs move the
existing _build aside and put it back afterwards; the kernel's own build cache
(~/.cache/andrea_ref) is kept, as on any machine that has built it once.

Usage: python bench/bench_book.py [--runs N]      (exit 1 if a target is missed)
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
TARGETS = {"cold build": 240.0, "no-change rebuild": 10.0, "catalog-edit rebuild": 60.0}
# the catalog the catalog-edit run changes (a translator's comment added, then removed)
CATALOG = ROOT / "book" / "locales" / "de" / "LC_MESSAGES" / "book" / "01_welcome.po"


def edited_catalog_build() -> float:
    original = CATALOG.read_bytes()
    try:
        CATALOG.write_bytes(original + b"\n# bench: a translator's note\n")
        return build()
    finally:
        CATALOG.write_bytes(original)


def build() -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_book.py")], cwd=ROOT,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
        sys.exit(f"book build failed (exit {proc.returncode})")
    return elapsed


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
        for _ in range(args.runs):
            shutil.rmtree(BUILD, ignore_errors=True)
            times["cold build"].append(build())
            times["no-change rebuild"].append(build())
            times["catalog-edit rebuild"].append(edited_catalog_build())
    finally:
        if saved is not None:
            shutil.rmtree(BUILD, ignore_errors=True)
            saved.rename(BUILD)
    ok = True
    for name, values in times.items():
        median = statistics.median(values)
        target = TARGETS[name]
        verdict = "ok" if median < target else "MISSED"
        ok &= median < target
        runs = ", ".join(f"{v:.1f}" for v in values)
        print(f"book {name:18s} median {median:6.1f} s  (runs: {runs})  target < {target:.0f} s  {verdict}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
