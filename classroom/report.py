"""Reports of a grading run: what the instructor reads first.

``write_reports`` writes, into the output folder:

- ``grades.csv``: nbgrader's own export (one row per student and assignment) of the
  course gradebook, unchanged in format;
- ``report.csv``: one row per learner *and notebook* -- every learner the course
  knows (the gradebook's students and everyone who handed something in) for every
  notebook of the course -- with the score, the maximum, a ``status`` and what to
  look at;
- ``report.txt``: the summary per assignment, every learner and notebook with its
  status, and the details of everything that needs a look.

A status is one of (most serious first): ``not submitted``, ``failed``, ``timed out``,
``limit hit: <which>``, ``tampering suspected``, ``files refused``, ``untouched``,
``graded``. ``status`` holds the most serious one, ``all_statuses`` all that apply
(plus the notes ``probe suspected`` and ``locked cells edited``). Every piece of text
that a learner's code or files could have produced passes through
:mod:`classroom.textsafe` first.
"""
from __future__ import annotations

import csv
import statistics
from pathlib import Path

from . import textsafe

# exceptions that show a learner's code ran into the sandbox or its limits
SANDBOX_LIMITS = {"MemoryError": "memory", "BlockingIOError": "processes"}
SANDBOX_ENAMES = {"MemoryError", "PermissionError", "BlockingIOError"}
SANDBOX_TEXT = ("Network is unreachable", "Resource temporarily unavailable", "Read-only file system",
                "Permission denied", "Cannot allocate memory", "File too large", "Operation not permitted")

ORDER = ("not submitted", "failed", "timed out", "limit hit", "tampering suspected", "files refused",
         "untouched", "probe suspected", "locked cells edited", "graded")
DIFFERS = "the notebook's result differs from the independent check"
NOTES = ("probe suspected", "locked cells edited")  # worth a look, never a status of their own


def _rank(status: str) -> int:
    for i, s in enumerate(ORDER):
        if status == s or status.startswith(s + ":"):
            return i
    return len(ORDER)


def notebook_findings(record: dict, notebook: str) -> tuple[list[str], list[str]]:
    """(statuses, detail lines) of one notebook of a submission record."""
    statuses, lines = [], []
    status = record.get("status")
    if status == "failed":
        statuses.append("failed")
        lines.append(f"FAILED: {textsafe.line(record.get('reason') or '')}")
    elif status == "timed out":
        statuses.append("timed out")
        lines.append(f"TIMED OUT: {textsafe.line(record.get('reason') or '')}")
    for limit in record.get("limits", []):
        statuses.append(f"limit hit: {limit}")
        lines.append(f"LIMIT HIT: {textsafe.line(limit)}")
    for e in record.get("errors", []):
        if e.get("notebook") not in (None, notebook) or e.get("ename") in ("KeyboardInterrupt", "CellTimeoutError"):
            continue
        text = textsafe.line(f"{e.get('ename', '')}: {e.get('evalue', '')}".strip())
        cell = textsafe.line(e.get("cell", ""), 80)
        if e.get("ename") in SANDBOX_ENAMES or any(t in text for t in SANDBOX_TEXT):
            which = SANDBOX_LIMITS.get(e.get("ename"), "sandbox")
            statuses.append(f"limit hit: {which}")
            lines.append(f"SANDBOX LIMIT: {cell} raised {text}")
        elif not e.get("graded"):
            lines.append(f"ERROR: {cell} raised {text}")
    check = record.get("checks", {}).get(notebook, {})
    if check.get("problem"):
        lines.append(f"INDEPENDENT CHECK: {textsafe.line(check['problem'])}")
        if check["problem"] == "timed out" and status != "timed out":
            statuses.append("timed out")
    for d in check.get("differs", []):
        gid = textsafe.line(d.get("grade_id", ""), 80)
        if (d.get("kernel") or 0) > (d.get("independent") or 0):
            statuses.append("tampering suspected")
            lines.append(f"TAMPERING SUSPECTED: cell {gid}: {DIFFERS}: possible tampering "
                         f"(notebook {d.get('kernel')}, independent check {d.get('independent')})")
        else:
            lines.append(f"DIFFERS: cell {gid}: {DIFFERS} (notebook {d.get('kernel')}, independent check "
                         f"{d.get('independent')}; the independent check counts)")
    if record.get("refused"):
        statuses.append("files refused")
        names = ", ".join(textsafe.line(n, 80) for n in record["refused"][:20])
        more = f" and {len(record['refused']) - 20} more" if len(record["refused"]) > 20 else ""
        lines.append(f"FILES REFUSED (never given to the kernel): {names}{more}")
    if check.get("untouched"):
        statuses.append("untouched")
        lines.append("UNTOUCHED: the answer cells are as released")
    if check.get("probes"):
        statuses.append("probe suspected")
        lines.append("PROBE SUSPECTED: the answer uses " + ", ".join(textsafe.line(p, 60) for p in check["probes"][:12])
                     + " (nothing these exercises need)")
    if check.get("locked_changes"):
        statuses.append("locked cells edited")
        lines += [f"LOCKED CELL: {textsafe.line(c)}" for c in check["locked_changes"]]
    for n in record.get("notes", []):
        lines.append(f"NOTE: {textsafe.line(n)}")
    if record.get("needs_manual_grade") and status == "ok":
        lines.append("NEEDS MANUAL GRADING")
    if not any(s not in NOTES for s in statuses):
        statuses.append("graded")
    statuses = sorted(dict.fromkeys(statuses), key=lambda s: (s in NOTES, _rank(s)))
    return statuses, lines


def classify(record: dict) -> list[str]:
    """Why a submission needs a look (empty when it does not), all notebooks together."""
    notebooks = list(record.get("notebooks") or {}) or [None]
    out = []
    for nb in notebooks:
        statuses, lines = notebook_findings(record, nb)
        out += [ln for ln in lines if ln not in out]
    return out


def _export_csv(db_url: str, path: Path) -> None:
    import warnings

    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin
    from .sawarnings import ignore_add_submission_autoflush

    plugin = CsvExportPlugin()
    plugin.to = str(path)
    with warnings.catch_warnings(), Gradebook(db_url) as gb:
        ignore_add_submission_autoflush()  # only nbgrader's harmless one (see sawarnings)
        plugin.export(gb)


def _roster(db_url: str) -> set[str]:
    from nbgrader.api import Gradebook
    try:
        with Gradebook(db_url) as gb:
            return {s.id for s in gb.students}
    except Exception:  # noqa: BLE001 - a roster is a convenience; the records still count
        return set()


def write_reports(out: Path, db_url: str, records: list[dict], skipped: list[str], *, graded_now: int,
                  expected: int, assignments: dict[str, list[str]] | None = None,
                  roster: set[str] | None = None, header: str | None = None) -> dict:
    """Write grades.csv, report.csv and report.txt; return the summary the caller prints.
    ``header``: a first line for the text (e.g. which shard of the class this is)."""
    out = Path(out)
    _export_csv(db_url, out / "grades.csv")
    assignments = assignments or {}
    by_key = {(r["student"], r["assignment"]): r for r in records}
    students = sorted(set(roster if roster is not None else _roster(db_url)) | {r["student"] for r in records})
    for r in records:
        assignments.setdefault(r["assignment"], sorted(r.get("notebooks") or []) or ["?"])

    rows, look, per_assignment, max_by = [], [], {}, {}
    for a in sorted(assignments):
        for student in students:
            rec = by_key.get((student, a))
            for nb in assignments[a]:
                if rec is None:
                    statuses, lines, score, maxs = ["not submitted"], [], 0.0, None
                else:
                    statuses, lines = notebook_findings(rec, nb)
                    cells = (rec.get("notebooks") or {}).get(nb, {})
                    score = float(sum(v or 0 for v in cells.values())) if cells else float(rec.get("score") or 0)
                    maxs = (rec.get("max_by_notebook") or {}).get(nb, rec.get("max_score"))
                    per_assignment.setdefault(a, []).append(score)
                    if maxs is not None:
                        max_by[a] = float(maxs)
                rows.append({"student": textsafe.cell(student, 120), "assignment": a, "notebook": nb,
                             "score": score, "max_score": maxs, "status": statuses[0],
                             "all_statuses": "; ".join(statuses), "problems": textsafe.cell(" | ".join(lines), 4000),
                             "seconds": rec.get("seconds") if rec else None})
                if rec is not None and (statuses[0] != "graded" or lines):
                    look.append((student, a, nb, score, statuses, lines))

    with open(out / "report.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["student", "assignment", "notebook", "score", "max_score", "status",
                                          "all_statuses", "problems", "seconds"])
        w.writeheader()
        w.writerows(rows)

    text_lines = [f"Grading report: {len(records)} of {expected} submissions graded "
                  f"({graded_now} in this run). Gradebook: {textsafe.line(db_url)}", ""]
    text_lines.append(f"{'assignment':<16}{'n':>4}{'mean':>8}{'median':>8}{'min':>7}{'max':>7}{'of':>6}")
    for a in sorted(per_assignment):
        s = per_assignment[a]
        text_lines.append(f"{a:<16}{len(s):>4}{statistics.mean(s):>8.2f}{statistics.median(s):>8.2f}"
                          f"{min(s):>7.1f}{max(s):>7.1f}{max_by.get(a, float('nan')):>6.0f}")
    text_lines += ["", "Every learner and notebook:"]
    for row in rows:
        text_lines.append(f"  {textsafe.line(row['student'], 60):<24} {row['assignment'] + '/' + row['notebook']:<28} "
                          f"{row['score']:>5g}  {row['all_statuses']}")
    text_lines.append("")
    if look:
        text_lines.append(f"{len(look)} notebook(s) to look at:")
        for student, a, nb, score, statuses, lines in look:
            text_lines.append(f"  {textsafe.line(student, 60)}/{a}/{nb} (score {score:g}; {statuses[0]}):")
            text_lines += [f"      - {ln}" for ln in lines]
    else:
        text_lines.append("No notebook failed, timed out, hit a limit, differs from its independent check "
                          "or needs a look.")
    missing = [(r["student"], r["assignment"]) for r in rows if r["status"] == "not submitted"]
    if missing:
        text_lines += ["", f"{len(missing)} notebook(s) not submitted (listed above with status 'not submitted')."]
    if skipped:
        text_lines += ["", f"{len(skipped)} file(s) or problem(s) in the submissions:"]
        text_lines += [f"  - {textsafe.line(s, 400)}" for s in skipped]
    text_lines += ["", f"Files: {out / 'grades.csv'}, {out / 'report.csv'}, feedback in {out / 'feedback'}"]
    text = "\n".join(([header] if header else []) + text_lines)
    (out / "report.txt").write_text(text + "\n", encoding="utf-8")
    problems = {}
    for student, a, nb, score, statuses, lines in look:
        problems.setdefault((student, a), []).extend(lines or statuses)
    return {"text": text, "problems": problems, "rows": rows,
            "scores": {(r["student"], r["assignment"]): r.get("score") for r in records},
            "records": records}
