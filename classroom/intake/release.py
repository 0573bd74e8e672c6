"""Whether a handed-in notebook is one of this course's: its cells against the release's.

A file is placed by its name (:mod:`classroom.intake.layout`), and a notebook of another
course can bear the name of one of ours (``gelu.ipynb``). Graded anyway, it would be
"failed; untouched; locked cells edited", and its author a student of the course.
:func:`refuse_foreign` keeps such a notebook away from the grader, with the reason, and
adds nobody to the gradebook.

What matches: nbgrader gives every cell it grades or locks an id (``grade_id``) and
records it, with the cell's source, in the gradebook when the assignment is generated.
A notebook is this course's when it still holds at least half of its released
notebook's cell ids, *or* at least half of the sources of its locked cells, word for
word (either is enough: editors that drop cell metadata keep the text, and the German
and Georgian notebooks keep the ids while their locked text is translated). An honest
learner who deleted a cell, edited a locked one or added cells of their own keeps far
more than half of both and is graded as before (nbgrader restores what was changed);
a notebook of another course holds none of either. A file that is not readable as a
notebook at all is left to the grader, which reports it as failed.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook

from .source import quote
from .submission import Submission

SHARE = 0.5  # of the release's ids, or of its locked cells, that a notebook of ours still holds


@dataclass(frozen=True)
class ReleasedNotebook:
    ids: frozenset[str]  # the nbgrader id of every graded, answer and locked cell
    locked: frozenset[str]  # the sources of the locked cells, normalised (:func:`normalised`)


def normalised(source) -> str:
    """A cell's source compared line by line, trailing blanks and blank ends ignored."""
    text = "".join(source) if isinstance(source, list) else str(source or "")
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def released_notebooks(gradebook: Path) -> dict[tuple[str, str], ReleasedNotebook]:
    """{(assignment, notebook): its cells} as ``nbgrader generate_assignment`` recorded
    them in ``gradebook`` (the run's template gradebook)."""
    found = {}
    with warnings.catch_warnings(), Gradebook(f"sqlite:///{gradebook}") as gb:
        warnings.simplefilter("ignore")
        for a in gb.assignments:
            for nb in a.notebooks:
                cells = nb.source_cells
                found[a.name, nb.name] = ReleasedNotebook(
                    ids=frozenset(c.name for c in cells),
                    locked=frozenset(s for c in cells if c.locked for s in [normalised(c.source)] if s))
    return found


def likeness(data: bytes, released: ReleasedNotebook) -> tuple[int, int] | None:
    """(release ids found, locked sources found) in the notebook ``data``; None when it
    cannot be read as a notebook."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.reads(data.decode("utf-8"), as_version=4)
        cells = list(nb.cells)
    except Exception:  # noqa: BLE001 - not a notebook: the grader says so
        return None
    ids, sources = set(), set()
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell, dict) else {}
        if isinstance(meta, dict) and isinstance(meta.get("grade_id"), str):
            ids.add(meta["grade_id"])
        if isinstance(cell, dict):
            sources.add(normalised(cell.get("source", "")))
    return len(released.ids & ids), len(released.locked & sources)


def matches(found: tuple[int, int], released: ReleasedNotebook) -> bool:
    ids, locked = found
    return (not released.ids or ids >= SHARE * len(released.ids)
            or (bool(released.locked) and locked >= SHARE * len(released.locked)))


def refuse_foreign(subs: list[Submission], release: dict[tuple[str, str], ReleasedNotebook],
                   problems: list[str]) -> list[Submission]:
    """``subs`` less every notebook whose cells do not match the release (each refused
    with its reason in ``problems``), and less the submissions left without a notebook."""
    kept = []
    for sub in subs:
        for rel in sorted(sub.files):
            name = rel[:-len(".ipynb")] if rel.endswith(".ipynb") else None
            released = release.get((sub.assignment, name)) if name is not None else None
            if released is None:
                continue
            found = likeness(sub.files[rel], released)
            if found is None or matches(found, released):
                continue
            del sub.files[rel]
            where = next((o for o in sub.origin if o.endswith(rel)), f"{sub.student}/{rel}")
            problems.append(
                f"refused {quote(where)}: its cells do not match the released notebook {sub.assignment}/{rel} "
                f"({found[0]} of {len(released.ids)} cell ids and {found[1]} of {len(released.locked)} locked "
                "cells found): a notebook of another course? It is not graded, and nobody is added to the "
                "gradebook for it")
        if any(rel.endswith(".ipynb") for rel in sub.files):
            kept.append(sub)
    return kept
