"""Reports of a grading run: what the instructor reads first.

``write_reports`` writes, into the output folder:

- ``grades.csv``: nbgrader's own export (one row per student and assignment) of the
  course gradebook;
- ``report.csv``: one row per submission: score, maximum, status and what to look at;
- ``report.txt``: the summary per assignment and the list of every submission that
  failed, timed out, raised an error, hit a sandbox limit or needs manual grading --
  the cases nbgrader alone shows as a silent 0.0.
"""
from __future__ import annotations

import csv
import statistics
from pathlib import Path

# exceptions that show a learner's code ran into the sandbox or its limits
SANDBOX_ENAMES = {"MemoryError", "PermissionError", "BlockingIOError"}
SANDBOX_TEXT = ("Network is unreachable", "Resource temporarily unavailable", "Read-only file system",
                "Permission denied", "Cannot allocate memory", "File too large")


def classify(record: dict) -> list[str]:
    """Why a submission needs a look (empty when it does not)."""
    why = []
    status = record.get("status")
    if status == "failed":
        why.append(f"FAILED: {record.get('reason')}")
    elif status == "timed out":
        why.append(f"TIMED OUT: {record.get('reason')}")
    for e in record.get("errors", []):
        if e.get("ename") in ("KeyboardInterrupt", "CellTimeoutError"):
            continue  # reported as TIMED OUT
        text = f"{e['ename']}: {e['evalue']}".strip()
        if e.get("ename") in SANDBOX_ENAMES or any(t in text for t in SANDBOX_TEXT):
            kind = "SANDBOX LIMIT"
        elif e.get("graded"):
            continue  # a graded check that failed is an ordinary lost point
        else:
            kind = "ERROR"
        why.append(f"{kind}: {e['notebook']} cell {e['cell']} raised {text}")
    if record.get("needs_manual_grade") and status == "ok":
        why.append("NEEDS MANUAL GRADING")
    return why


def _export_csv(db_url: str, path: Path) -> None:
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    plugin = CsvExportPlugin()
    plugin.to = str(path)
    with Gradebook(db_url) as gb:
        plugin.export(gb)


def write_reports(out: Path, db_url: str, records: list[dict], skipped: list[str], *, graded_now: int,
                  expected: int) -> dict:
    out = Path(out)
    _export_csv(db_url, out / "grades.csv")
    rows, problems = [], []
    by_assignment: dict[str, list[float]] = {}
    max_by_assignment: dict[str, float] = {}
    for r in sorted(records, key=lambda r: (r["assignment"], r["student"])):
        why = classify(r)
        score = float(r.get("score") or 0.0)
        by_assignment.setdefault(r["assignment"], []).append(score)
        if r.get("max_score") is not None:
            max_by_assignment[r["assignment"]] = float(r["max_score"])
        rows.append({"student": r["student"], "assignment": r["assignment"], "score": score,
                     "max_score": r.get("max_score"), "status": r.get("status"),
                     "problems": " | ".join(why), "seconds": r.get("seconds")})
        if why:
            problems.append((r["student"], r["assignment"], score, why))
    with open(out / "report.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["student", "assignment", "score", "max_score", "status", "problems",
                                          "seconds"])
        w.writeheader()
        w.writerows(rows)

    lines = [f"Grading report: {len(records)} of {expected} submissions graded "
             f"({graded_now} in this run). Gradebook: {db_url}", ""]
    lines.append(f"{'assignment':<16}{'n':>4}{'mean':>8}{'median':>8}{'min':>7}{'max':>7}{'of':>6}")
    for a in sorted(by_assignment):
        s = by_assignment[a]
        lines.append(f"{a:<16}{len(s):>4}{statistics.mean(s):>8.2f}{statistics.median(s):>8.2f}"
                     f"{min(s):>7.1f}{max(s):>7.1f}{max_by_assignment.get(a, float('nan')):>6.0f}")
    lines.append("")
    if problems:
        lines.append(f"{len(problems)} submission(s) to look at:")
        for student, assignment, score, why in problems:
            lines.append(f"  {student}/{assignment} (score {score:g}):")
            lines += [f"      - {w}" for w in why]
    else:
        lines.append("No submission failed, timed out, raised an error or needs manual grading.")
    if skipped:
        lines.append("")
        lines.append(f"{len(skipped)} file(s) in the submissions were not graded:")
        lines += [f"  - {s}" for s in skipped]
    lines.append("")
    lines.append(f"Files: {out / 'grades.csv'}, {out / 'report.csv'}, feedback in {out / 'feedback'}")
    text = "\n".join(lines)
    (out / "report.txt").write_text(text + "\n", encoding="utf-8")
    return {"text": text, "problems": {(s, a): why for s, a, _, why in problems},
            "scores": {(r["student"], r["assignment"]): r.get("score") for r in records},
            "records": records}
