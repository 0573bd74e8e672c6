"""Feedback pages: what typesetting their math when they are built costs, per page.

A class (the learners of bench_grade_parallel.py's mix: correct answers, classic
mistakes, untouched exercises; 8 learners x the course's notebooks by default) is graded once with
``python -m classroom.grade``; each submission's record says, per page, how many
formulas MathJax typeset (in one Node process per grading worker, serving page after
page), its wall time and Node's CPU time for that page (the first page of a worker
also waits for Node to load MathJax). Printed: the medians over the class's pages, the whole feedback step per
submission beside them, and the pages' sizes. The chapters shipped beside the pages are
made once per run; their cost is printed apart.

    .venv/bin/python bench/bench_feedback.py [--learners 8] [--workers N]
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from bench_grade_parallel import class_of  # noqa: E402
from grading_submissions import ASSIGNMENTS  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", type=int, default=8)
    ap.add_argument("--workers", type=int, default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="andrea-bench-feedback-") as tmp:
        tmp = Path(tmp)
        class_of(a.learners, tmp / "subs")
        cmd = [sys.executable, "-m", "classroom.grade", str(tmp / "subs"), "--out", str(tmp / "out"),
               "--db", f"sqlite:///{tmp / 'gradebook.db'}", "--no-progress"]
        if a.workers:
            cmd += ["--workers", str(a.workers)]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            print(proc.stdout[-3000:] + proc.stderr[-3000:])
            return 1
        pages, steps = [], []
        for state in (tmp / "out" / "state").glob("*/*.json"):
            record = json.loads(state.read_text())
            steps.append(record.get("timing", {}).get("feedback", 0.0))
            pages += list((record.get("feedback") or {}).values())
        if not pages:
            print("no feedback page was built")
            return 1
        sizes = [p.stat().st_size for p in (tmp / "out" / "feedback").glob("*/*/*.html")]
        chapters = sorted((tmp / "out" / "chapters").glob("*/*.html"))
        print(f"{a.learners} learners x {len(ASSIGNMENTS)} notebooks graded in {wall:.1f} s; {len(pages)} feedback pages")
        print(f"math per page: median {statistics.median(p['math'] for p in pages):.0f} formulas")
        print(f"typesetting per page (MathJax in one Node per worker): median "
              f"{statistics.median(p['math_seconds'] for p in pages):.2f} s wall, "
              f"{statistics.median(p['math_cpu_seconds'] for p in pages):.2f} s CPU "
              f"(min {min(p['math_seconds'] for p in pages):.2f}, max {max(p['math_seconds'] for p in pages):.2f} s wall)")
        print(f"whole feedback step per submission (render, typeset, sanitise, write): median "
              f"{statistics.median(steps):.2f} s")
        print(f"page size: median {statistics.median(sizes) / 1024:.0f} KiB; {len(chapters)} chapter copies "
              f"made once for the run, {sum(c.stat().st_size for c in chapters) / 1024:.0f} KiB in all")
    # the chapter copies, made again here one by one (the run made each once, in a worker)
    from classroom.reporting.chapters import chapter_copy, chapter_source
    made = []
    for chapter in chapters:
        edition, name = chapter.parent.name, chapter.stem.rsplit("-", 1)[0]
        source = chapter_source(edition, name)
        t0 = time.monotonic()
        chapter_copy(source)
        made.append(time.monotonic() - t0)
    if made:
        print(f"a chapter copy (its math typeset, its figures and styles inline): median "
              f"{statistics.median(made):.2f} s ({len(made)} chapters)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
