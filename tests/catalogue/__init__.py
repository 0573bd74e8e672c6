"""A catalogue of learner answers that the grading checks must judge exactly: for every
notebook, mistakes (each with the graded cells it must lose and the likely-mistake
phrase its feedback must give, or ``None`` where no diagnosis is owed and a neutral
message is right) and correct answers written other ways (each must get every point).

The entries are the source of the answer cell, as a learner would write it, run in the
namespace the notebook's locked set-up cell makes. ``tests/test_grading_catalogue.py``
runs them all through the checks, in this process, with the notebooks' visible and
hidden seeds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from andrea_ref.grading.course import graded_cells
from andrea_ref.grading.manifest import load

# grade ids in notebook order (the first lost one carries the diagnosis unless ``primary``)
CELLS = {a.name: tuple(a.points()) for a in load()}  # the course manifest and nbgrader's metadata
FUNCTION = {a.name: a.function()[0] for a in load()}  # the function of a notebook's first answer cell
# {notebook: {graded cell: the function it checks}} (the capstone checks three)
CHECKED = {a.name: {c["grade_id"]: c["function"] for c in graded_cells(a.solution)} for a in load()}
ALL = "all"


@dataclass
class Entry:
    notebook: str
    name: str
    source: str
    lost: frozenset | str = frozenset()
    # what the feedback must name: a phrase the first lost cell's message must contain, or
    # {grade id: phrase} per lost cell; a "Likely mistake" line of a lost cell that lacks
    # its cell's phrase is a wrong diagnosis (None: no such line may appear at all)
    likely: str | dict | None = None
    primary: str | None = None  # the lost cell whose message must name it (default: the first lost)
    note: str = field(default="", repr=False)  # why these cells, where it is not obvious
    cell: str | None = None  # the answer cell ``source`` replaces (default: the notebook's first)

    @property
    def lost_cells(self) -> frozenset:
        return frozenset(CELLS[self.notebook]) if self.lost == ALL else frozenset(self.lost)

    @property
    def correct(self) -> bool:
        return not self.lost_cells

    @property
    def primary_cell(self) -> str | None:
        if self.primary:
            return self.primary
        return next((c for c in CELLS[self.notebook] if c in self.lost_cells), None)

    def phrase(self, cell: str) -> str | None:
        """The phrase the message of ``cell`` must contain (or its likely line may)."""
        if isinstance(self.likely, dict):
            return self.likely.get(cell)
        return self.likely if cell == self.primary_cell else None

    def allowed(self, cell: str) -> str | None:
        """The phrase a "Likely mistake" line of ``cell`` must contain, if it has one."""
        if isinstance(self.likely, dict):
            return self.likely.get(cell)
        return self.likely


def entries():
    from . import block, capstone, gelu, layernorm, mlp
    out = []
    for module in (layernorm, gelu, mlp, block, capstone):
        out += module.MISTAKES + module.CORRECT
    names = [e.name for e in out]
    assert len(names) == len(set(names)), "catalogue names must be unique"
    return out
