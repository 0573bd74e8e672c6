"""Whose file is it: a class's files placed by learner and assignment (see
:mod:`classroom.intake` for the layouts and the rules), and the learners' ids."""
from __future__ import annotations

import hashlib
from collections import defaultdict
from dataclasses import dataclass

from .source import NBGRADER_DIR, Entry, listing, quote
from .submission import safe_student_id


def is_hidden(name: str) -> bool:
    return name.startswith(".") or name == "__MACOSX"


def _notebook_named(stem: str, assignments: dict[str, list[str]]) -> tuple[str, str] | str | None:
    """(assignment, notebook) for ``<notebook>`` or a one-notebook ``<assignment>``; a
    reason when that name cannot be placed; None when it names neither."""
    owners = sorted(a for a, nbs in assignments.items() if stem in nbs)
    if len(owners) > 1:
        return f"ambiguous: notebook {stem!r} is part of {listing(owners)}"
    if owners:
        return owners[0], stem
    if stem in assignments:
        if len(assignments[stem]) != 1:
            return f"{stem!r} has several notebooks; name the file <notebook>.ipynb"
        return stem, assignments[stem][0]
    return None


def flat_readings(stem: str, assignments: dict[str, list[str]]) -> tuple[set[tuple[str, str, str]], str | None]:
    """Every (student, assignment, notebook) that ``<student>_<notebook|assignment>``
    can be read as, and why a split names no notebook (an assignment of several)."""
    readings, incomplete = set(), None
    for assignment, notebooks in assignments.items():
        for known, nb in [(assignment, None)] + [(n, n) for n in notebooks]:
            if len(stem) > len(known) + 1 and stem.endswith("_" + known):
                if nb is None and len(notebooks) != 1:
                    incomplete = f"{assignment!r} has several notebooks; name the file <student>_<notebook>.ipynb"
                    continue
                readings.add((stem[: -len(known) - 1], assignment, nb or notebooks[0]))
    return readings, incomplete


def _split_flat(stem: str, assignments: dict[str, list[str]],
                students: frozenset[str] | None = None) -> tuple[str, str, str] | str | None:
    """(student, assignment, notebook) read from ``<student>_<notebook|assignment>``; a
    reason when the name is ambiguous or incomplete; None when no known name ends it.

    Every split before a known assignment or notebook name is a reading. Readings that
    name different learners or notebooks (``dave_03_gelu``: dave's ``03_gelu``, or
    ``dave_03``'s ``gelu``) are told apart only by ``students``, the gradebook's
    list: when exactly one of them names a listed learner, that one counts; otherwise
    the file is refused with every reading named (a guess could grade one learner's
    file as another's)."""
    readings, incomplete = flat_readings(stem, assignments)
    if not readings:
        return incomplete
    if len(readings) > 1 and students is not None:
        listed = {r for r in readings if r[0] in students}
        if len(listed) == 1:
            return listed.pop()
    if len(readings) > 1:
        how = " or as ".join(f"{nb!r} of {a!r} of student {s!r}" for s, a, nb in sorted(readings))
        return (f"ambiguous: it reads as {how}; rename it, hand it in as <student>/<notebook>.ipynb, or "
                f"add the learner to the gradebook's student list")
    return readings.pop()


def _is_student_folder(name: str, inside: list[tuple[str, ...]], assignments: dict[str, list[str]]) -> bool:
    """Whether the folder ``name`` holding these paths is a learner's: it holds an
    ``<assignment>/`` folder, a released ``<notebook>.ipynb`` or ``<name>_<notebook>.ipynb``."""
    for p in inside:
        if len(p) >= 2 and p[0] in assignments:
            return True
        if len(p) == 1 and p[0].endswith(".ipynb"):
            if isinstance(_notebook_named(p[0][:-6], assignments), tuple):
                return True
            if any(r[0] == name for r in flat_readings(p[0][:-6], assignments)[0]):
                return True
    return False


def _strip_submitted(parts: tuple[str, ...]) -> tuple[str, ...]:
    return parts[1:] if len(parts) > 1 and parts[0] == NBGRADER_DIR else parts


def _wrapping_folder(paths: list[tuple[str, ...]], assignments: dict[str, list[str]]) -> str | None:
    """The one folder that wraps the whole class, if there is one (see the module doc)."""
    tops = {p[0] for p in paths if not is_hidden(p[0])}
    if len(tops) != 1:
        return None
    (top,) = tops
    inside = [p[1:] for p in paths if p[0] == top]
    if any(not p for p in inside) or _is_student_folder(top, inside, assignments):
        return None
    return top


@dataclass
class Claim:
    student: str  # the raw id, as the source names it
    assignment: str | None  # None: a loose file in the learner's folder
    rel: str  # its path inside the submission
    entry: Entry


def _claim_in_student_folder(student: str, rest: tuple[str, ...], entry: Entry,
                             assignments: dict[str, list[str]]) -> Claim | str:
    """Whose and which file ``<student>/<rest>`` is: always ``student``'s."""
    if len(rest) >= 2 and rest[0] in assignments:  # nbgrader: <student>/<assignment>/...
        return Claim(student, rest[0], "/".join(rest[1:]), entry)
    if len(rest) == 1 and rest[0].endswith(".ipynb"):  # <student>/<notebook>.ipynb
        stem = rest[0][:-6]
        found = _notebook_named(stem, assignments)
        if found is None:  # <student>/<student>_<notebook>.ipynb: the folder decides the reading
            readings, incomplete = flat_readings(stem, assignments)
            mine = [r for r in readings if r[0] == student]
            if len(mine) == 1:
                found = mine[0][1:]
            elif readings:
                return (f"it is in the folder of student {student!r} but named for student "
                        f"{' or '.join(map(repr, sorted({r[0] for r in readings})))}")
            else:
                found = incomplete
        if isinstance(found, str):
            return found
        if found is not None:
            return Claim(student, found[0], f"{found[1]}.ipynb", entry)
    return Claim(student, None, "/".join(rest), entry)


def _claim_flat(name: str, entry: Entry, assignments: dict[str, list[str]],
                students: frozenset[str] | None) -> Claim | str:
    """Whose and which file ``<student>_<notebook|assignment>.ipynb`` at the class root is."""
    if not name.endswith(".ipynb"):
        return "not a notebook, and not in a learner's folder"
    found = _split_flat(name[:-6], assignments, students)
    if found is None:
        return "cannot tell which student and assignment it belongs to"
    if isinstance(found, str):
        return found
    student, assignment, nb = found
    return Claim(student, assignment, f"{nb}.ipynb", entry)


def claims(entries: list[Entry], assignments: dict[str, list[str]], problems: list[str],
           students: frozenset[str] | None = None) -> list[Claim]:
    """Whose and which file each entry is (``students``: the gradebook's list, which
    decides a flat name that reads two ways)."""
    paths = [_strip_submitted(e.parts) for e in entries]
    wrapper = _wrapping_folder(paths, assignments)
    claims = []
    for entry, parts in zip(entries, paths):
        if wrapper is not None and parts[0] == wrapper:
            parts = _strip_submitted(parts[1:])
        if is_hidden(parts[0]):
            claim = "hidden file or folder (system metadata)"
        elif len(parts) == 1:
            claim = _claim_flat(parts[0], entry, assignments, students)
        else:
            claim = _claim_in_student_folder(parts[0], parts[1:], entry, assignments)
        if isinstance(claim, str):
            problems.append(f"skipped {quote(entry.name)}: {claim}")
        else:
            claims.append(claim)
    return claims


def place_loose_files(claims: list[Claim], problems: list[str]) -> list[Claim]:
    """A loose file in a learner's folder belongs to the learner's one assignment there."""
    assignments_of: dict[str, set[str]] = defaultdict(set)
    for c in claims:
        if c.assignment is not None:
            assignments_of[c.student].add(c.assignment)
    placed = []
    for c in claims:
        if c.assignment is None:
            mine = assignments_of[c.student]
            if len(mine) != 1:
                how_many = "no assignment" if not mine else "several assignments"
                problems.append(f"skipped {quote(c.entry.name)}: not a released notebook, and student "
                                f"{c.student!r} hands in {how_many} beside it")
                continue
            c.assignment = next(iter(mine))
        placed.append(c)
    return placed


def refuse_double_claims(claims: list[Claim], problems: list[str]) -> list[Claim]:
    """Files claiming the same path of the same learner's assignment are all refused."""
    groups: dict[tuple[str, str, str], list[Claim]] = defaultdict(list)
    for c in claims:
        groups[c.student, c.assignment, c.rel].append(c)
    kept = []
    for (student, assignment, rel), group in groups.items():
        if len(group) == 1:
            kept.append(group[0])
            continue
        problems.append(f"refused {listing(sorted(c.entry.name for c in group))}: each hands in {rel!r} of "
                        f"{assignment!r} for student {student!r}; which one counts cannot be told")
    return kept


# ----------------------------------------------------------------------------- ids
def unique_ids(raw_ids: set[str], problems: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """{raw id: graded id} with raw ids that clean to the same id told apart, and
    {raw id: why its id is not the clean one}. Raw ids without a usable id are left out."""
    by_clean: dict[str, list[str]] = defaultdict(list)
    for raw in sorted(raw_ids):
        sid = safe_student_id(raw)
        if sid is not None:
            by_clean[sid].append(raw)
    ids: dict[str, str] = {}
    notes: dict[str, str] = {}
    taken = set(by_clean)
    for sid, group in sorted(by_clean.items()):
        for raw in group:
            if len(group) == 1 or raw == sid:
                ids[raw] = sid
                continue
            digest = hashlib.sha256(raw.encode("utf-8", "backslashreplace")).hexdigest()
            new = next(c for c in (f"{sid}-{digest[:n]}" for n in (6, 10, 16, 64)) if c not in taken)
            taken.add(new)
            ids[raw] = new
            notes[raw] = (f"student ids {listing(group)} are the same after cleaning: "
                          f"{raw!r} is graded as {new!r}")
            problems.append(notes[raw])
    return ids, notes
