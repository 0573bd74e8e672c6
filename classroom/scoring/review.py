"""Submissions held for review, and the instructor's decision on them.

A submission whose code reaches for machinery no answer needs, or whose answer server
refused something, is held: the cells the notebook's rule against shortcuts governs
earn nothing, the report lists the evidence (cell, line and code, or what the server's
guards refused), the notebook is flagged in the gradebook. The instructor reads the
evidence and, where it is harmless, grants the points on a rerun::

    python -m classroom.grade SUBMISSIONS --accept alice/03_gelu

which records the decision in ``OUT/review/accepted.txt`` (one ``student/assignment
digest`` per line, the digest of the files that were reviewed; lines may be added by
hand too, ``#`` starts a comment). A decision holds for those very files only: a new
hand-in is held again until it is reviewed. The next run regrades exactly the
submissions whose decision changed; the gradebook then has the checks' points, the
flag cleared and the answer cell's comment saying they were granted on review.
"""
from __future__ import annotations

import json
from pathlib import Path

FILE = Path("review") / "accepted.txt"


def _path(out: Path) -> Path:
    return Path(out) / FILE


def load(out: Path) -> dict[tuple[str, str], str]:
    """{(student, assignment): digest of the files accepted} from ``OUT/review/accepted.txt``."""
    path = _path(out)
    if not path.is_file():
        return {}
    found = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) == 2 and words[0].count("/") == 1:
            student, assignment = words[0].split("/")
            found[(student, assignment)] = words[1]
    return found


def accepted(decisions: dict, student: str, assignment: str, digest: str) -> bool:
    """Whether the instructor accepted this submission with exactly these files."""
    want = decisions.get((student, assignment))
    return bool(want) and bool(digest) and digest.startswith(want)


def held(record) -> bool:
    """Whether a record (a :class:`~classroom.record.SubmissionRecord` or its dict) has a
    notebook held for review or accepted on review."""
    checks = record.get("checks") if isinstance(record, dict) else record.checks
    return any(isinstance(c, dict) and (c.get("held") or c.get("accepted")) for c in (checks or {}).values())


def stale(record, decisions: dict) -> bool:
    """Whether a graded record is graded again: it no longer matches the instructor's
    decision about it (it was held and is now accepted, or was accepted and no longer
    is), or a check broke on the grader's side when it was graded (a grader fault is
    never kept as a result)."""
    get = record.get if isinstance(record, dict) else (lambda k: getattr(record, k))
    checks = get("checks") or {}
    if any(isinstance(c, dict) and c.get("faults") for c in checks.values()):
        return True
    was_accepted = any(isinstance(c, dict) and c.get("accepted") for c in checks.values())
    was_held = any(isinstance(c, dict) and c.get("held") for c in checks.values())
    now = accepted(decisions, get("student"), get("assignment"), get("digest"))
    return (was_held and now) or (was_accepted and not now)


def accept(out: Path, keys: list[str]) -> list[str]:
    """Record the instructor's acceptance of ``keys`` (``student/assignment``), each for
    the files its last grading reviewed (``OUT/state``). Returns one line per key saying
    what was done; raises ValueError naming a key that is not a held submission."""
    out = Path(out)
    lines, add = [], []
    for key in keys:
        if key.count("/") != 1 or not all(key.split("/")):
            raise ValueError(f"--accept: expected STUDENT/ASSIGNMENT, got {key!r}")
        student, assignment = key.split("/")
        state = out / "state" / student / f"{assignment}.json"
        try:
            record = json.loads(state.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise ValueError(f"--accept: {key!r} has not been graded in {out} (no {state})") from None
        if not held(record):
            raise ValueError(f"--accept: {key!r} is not held for review in {out}")
        add.append(f"{key} {record.get('digest', '')[:16]}")
        lines.append(f"accepted on review: {key} (its points are granted when this run grades it again)")
    if add:
        path = _path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write("".join(a + "\n" for a in add))
    return lines
