"""A notebook's points, written where a learner reads them, from nbgrader's metadata.

A graded cell's points have one home: its nbgrader metadata (``"points"``) in the solution
notebook. A learner reads them in two other places, both generated from it here:

* the notebook's table of graded properties, a markdown table whose header is
  :data:`HEADER`, one row per graded cell in the notebook's order (the property is
  the row's text, written by hand and translated; the points column is generated);
* the first line of each graded cell, ``# [locked] Graded check, N points``.

``scripts/release.py`` calls :func:`sync` on every solution notebook of the course
before it releases, so the released notebooks and their translations show what nbgrader
grades; :func:`disagreements` is what ``release.py --check`` and the tests report.
"""
from __future__ import annotations

import copy
import json
import re
from pathlib import Path

HEADER = "| graded property | points |"
_FIRST_LINE = re.compile(r"^# \[locked\] Graded check, [0-9.]+ points?$")


class TableError(ValueError):
    """The notebook's table cannot be matched with its graded cells (one line)."""


def _text(points) -> str:
    return str(int(points)) if float(points).is_integer() else str(points)


def first_line(points) -> str:
    return f"# [locked] Graded check, {_text(points)} point{'' if float(points) == 1 else 's'}"


def graded(cells: list[dict]) -> list[tuple[str, float]]:
    """(grade_id, points) of every graded cell, in order."""
    return [(c["metadata"]["nbgrader"]["grade_id"], c["metadata"]["nbgrader"].get("points", 0))
            for c in cells if c.get("cell_type") == "code" and c.get("metadata", {}).get("nbgrader", {}).get("grade")]


def table_rows(markdown: str, header: str = HEADER) -> list[str] | None:
    """The rows (below the separator) of the table headed ``header`` in ``markdown``;
    None when it has none."""
    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        if line.strip() == header:
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(row)
            return rows
    return None


def row_points(row: str) -> str:
    return row.rstrip().rstrip("|").rsplit("|", 1)[-1].strip()


def _with_points(row: str, points) -> str:
    head = row.rstrip().rstrip("|").rsplit("|", 1)[0]
    return f"{head}| {_text(points)} |"


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _set_source(cell: dict, text: str) -> None:
    cell["source"] = text.splitlines(keepends=True) if isinstance(cell["source"], list) else text


def sync_cells(cells: list[dict], where: str) -> bool:
    """Write the points of ``cells`` (a notebook's) into its table and its graded cells'
    first lines; whether anything changed. TableError when the table is missing or has
    another number of rows than the notebook has graded cells."""
    points = graded(cells)
    tables = [c for c in cells if c.get("cell_type") == "markdown" and table_rows(_source(c)) is not None]
    if len(tables) != 1:
        raise TableError(f"{where}: expected one markdown table headed {HEADER!r} (one row per graded cell), "
                         f"found {len(tables)}")
    changed = False
    text = _source(tables[0])
    rows = table_rows(text)
    if len(rows) != len(points):
        raise TableError(f"{where}: its table of graded properties has {len(rows)} rows, the notebook "
                         f"{len(points)} graded cells ({', '.join(g for g, _ in points)}): expected one row per "
                         "graded cell, in order")
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.strip() == HEADER) + 2
    lines[start:start + len(rows)] = [_with_points(row, p) for row, (_, p) in zip(rows, points)]
    new = "\n".join(lines)
    if new != text:
        _set_source(tables[0], new)
        changed = True
    by_id = dict(points)
    for c in cells:
        gid = c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in by_id and c.get("cell_type") == "code":
            src = _source(c)
            head, sep, rest = src.partition("\n")
            if _FIRST_LINE.match(head) and head != first_line(by_id[gid]):
                _set_source(c, first_line(by_id[gid]) + sep + rest)
                changed = True
            elif not _FIRST_LINE.match(head):
                raise TableError(f"{where}: graded cell {gid!r}: expected its first line to be "
                                 f"{first_line(by_id[gid])!r}, got {head!r}")
    return changed


def disagreements(cells: list[dict], where: str) -> list[str]:
    """Where the table or a first line does not show the metadata's points (empty: agree)."""
    fixed = copy.deepcopy(cells)
    try:
        if not sync_cells(fixed, where):
            return []
    except TableError as exc:
        return [str(exc)]
    out = []
    for before, after in zip(cells, fixed):
        if _source(before) != _source(after):
            label = before.get("metadata", {}).get("nbgrader", {}).get("grade_id") or "markdown"
            out.append(f"{where}: cell {label!r} does not show the points of nbgrader's metadata")
    return out


def sync(path: Path) -> bool:
    """:func:`sync_cells` on the notebook file ``path``, rewritten only when it changes."""
    text = Path(path).read_text(encoding="utf-8")
    nb = json.loads(text)
    if not sync_cells(nb["cells"], str(path)):
        return False
    Path(path).write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return True
