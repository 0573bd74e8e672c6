"""nbgrader's markers in the instructor notebooks, read in one place.

An instructor's cell marks what learners must never see with comment lines::

    ### BEGIN SOLUTION          ### BEGIN HIDDEN TESTS
    ...                         ...
    ### END SOLUTION            ### END HIDDEN TESTS

(nbgrader's defaults, which ``nbgrader_config.py`` keeps). :func:`lines` reads a cell's
source into its lines, each with the kind of block it lies in; everything that needs
the blocks builds on it: the leak scan (:mod:`classroom.scan`), the feedback pages
(:mod:`classroom.reporting.notebook`), the independent check's plan
(:mod:`classroom.scoring.plan`), the release script's leak check and the benchmarks.
Standard library only.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple

SOLUTION = "SOLUTION"
HIDDEN_TESTS = "HIDDEN TESTS"
KINDS = (SOLUTION, HIDDEN_TESTS)


def begin(kind: str) -> str:
    return f"### BEGIN {kind}"


def end(kind: str) -> str:
    return f"### END {kind}"


class Line(NamedTuple):
    text: str  # the line as written, with its line end
    kind: str | None  # the kind of block it lies in (a marker: the block it opens or closes)
    marker: str | None  # "begin" or "end" for a marker line, else None


def lines(source: str, kinds=KINDS) -> Iterator[Line]:
    """The lines of ``source`` (a cell's source) with the blocks of ``kinds`` they lie in.

    A line whose stripped text starts with ``### BEGIN <kind>`` opens a block, one with
    ``### END <kind>`` closes whatever block is open; markers of kinds not asked for are
    ordinary lines."""
    inside = None
    for text in source.splitlines(keepends=True):
        s = text.strip()
        opened = next((k for k in kinds if s.startswith(begin(k))), None)
        closed = next((k for k in kinds if s.startswith(end(k))), None)
        if opened:
            inside = opened
            yield Line(text, opened, "begin")
        elif closed:
            yield Line(text, inside or closed, "end")
            inside = None
        else:
            yield Line(text, inside, None)


def inside_lines(source: str, kinds=KINDS) -> Iterator[tuple[str, str]]:
    """(stripped line, kind) for every non-blank line inside a block of ``kinds``."""
    for line in lines(source, kinds):
        s = line.text.strip()
        if line.marker is None and line.kind is not None and s:
            yield s, line.kind


def without_markers(source: str, kinds=KINDS) -> str:
    """``source`` with the marker lines of ``kinds`` left out (what is inside stays)."""
    return "".join(line.text for line in lines(source, kinds) if line.marker is None)


def cell_source(cell) -> str:
    """A notebook cell's source as one string (nbformat stores a string or a list of lines)."""
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)
