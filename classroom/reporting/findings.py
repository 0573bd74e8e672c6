"""What a grading record says about one notebook: its statuses and the details worth a look.

A status is one of (most serious first): ``not submitted``, ``failed``, ``timed out``,
``limit hit: <which>``, ``tampering suspected``, ``held for review`` (its code reaches
for machinery, or its answer server refused something: the evidence is listed, the points
withheld until ``--accept``; or a check broke on the grader's side, a grader fault: the
points withheld until it is fixed and graded again), ``files refused``, ``untouched``, ``graded``; :func:`notebook_findings` gives all that apply, most serious first (plus the
notes ``probe suspected`` and ``locked cells edited``), and the lines that say why.
Every report, the progress bar (:func:`record_status`) and the class view use these
words. Every piece of text that a learner's code or files could have produced passes
through :mod:`classroom.textsafe` first.
"""
from __future__ import annotations

from andrea_ref.grading.points import KERNEL_HIGHER, disagreement

from .. import textsafe

# exceptions that show a learner's code ran into the sandbox or its limits
SANDBOX_LIMITS = {"MemoryError": "memory", "BlockingIOError": "processes"}
SANDBOX_ENAMES = {"MemoryError", "PermissionError", "BlockingIOError"}
SANDBOX_TEXT = ("Network is unreachable", "Resource temporarily unavailable", "Read-only file system",
                "Permission denied", "Cannot allocate memory", "File too large", "Operation not permitted")

ORDER = ("not submitted", "failed", "timed out", "limit hit", "tampering suspected", "held for review",
         "files refused", "untouched", "probe suspected", "locked cells edited", "graded")
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
    # The independent check stopped short (its answer server died or ran out of time) with no
    # evidence against the answer: a higher score in the notebook is unconfirmed, not forged.
    incomplete = bool(check.get("problem")) and not check.get("review")
    faults = check.get("faults") or {}
    for gid, what in faults.items():
        statuses.append("held for review")
        lines.append(f"GRADER FAULT: cell {textsafe.line(gid, 80)}: its check broke on the grader's side "
                     f"({textsafe.line(what, 300)}), not in the learner's code; its points are withheld: fix the "
                     "grader, then grade again (--force regrades every submission)")
    for d in check.get("differs", []):
        gid = textsafe.line(d.get("grade_id", ""), 80)
        higher = disagreement(d.get("kernel"), d.get("independent")) == KERNEL_HIGHER
        if d.get("grade_id") in faults:
            continue  # no verdict on the answer: said above, nobody accused
        if higher and incomplete:
            if check["problem"] != "timed out":
                statuses.append("failed")
            lines.append(f"CHECK INCOMPLETE: cell {gid}: the independent check could not finish "
                         f"({textsafe.line(check['problem'], 80)}), so the notebook's result ({d.get('kernel')}) is "
                         f"not confirmed and its points are withheld: look at the notebook, then grade again "
                         f"(--force regrades every submission)")
        elif higher:
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
    for gid, hits in (check.get("shortcuts") or {}).items():
        lines += [f"SHORTCUT: cell {textsafe.line(gid, 80)} earns nothing: {textsafe.line(h, 300)}" for h in hits[:3]]
    if check.get("review"):
        if check.get("held"):
            statuses.append("held for review")
        verb = "HELD FOR REVIEW" if check.get("held") else "ACCEPTED ON REVIEW"
        lines += [f"{verb}: {textsafe.line(r, 300)}" for r in check["review"][:12]]
        if check.get("held"):
            lines.append("HELD FOR REVIEW: its points are withheld; to grant them after reading the above, run the "
                         f"grading again with --accept {textsafe.line(record.get('student', ''), 60)}/"
                         f"{textsafe.line(record.get('assignment', ''), 60)}")
    if check.get("probes"):
        statuses.append("probe suspected")
        lines.append("PROBE SUSPECTED: " + "; ".join(textsafe.line(p, 120) for p in check["probes"][:6]))
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


def record_status(record: dict) -> str:
    """The most serious status of a submission record, all its notebooks together: the
    word the reports show for it."""
    statuses = [notebook_findings(record, nb)[0][0] for nb in (record.get("notebooks") or {}) or [None]]
    return min(statuses, key=_rank)
