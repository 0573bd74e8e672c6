"""What the reading keeps: the learner's definitions (:class:`Def`), the scopes names are
looked up in (:class:`Scope`), and the errors that stop a reading."""
from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from .text import same_line

if TYPE_CHECKING:
    from .program import Program


class TooComplex(Exception):
    """The answer's code is beyond what the analysis reads (nesting, size)."""


class OverBudget(TooComplex):
    """Reading the answer's code took more than the analysis's budget (:data:`MAX_SECONDS`,
    :data:`MAX_WORK`): the grader stops rather than run on."""


@dataclass
class Def:
    node: ast.AST  # FunctionDef, AsyncFunctionDef, Lambda or ClassDef
    scope: "Scope"  # where its free names are looked up
    cell: int
    name: str
    extra: frozenset = frozenset()  # defaults and decorators, evaluated where it was defined
    members: dict = field(default_factory=dict)  # a class: its namespace
    lines: Callable[[int], int] = same_line  # the cell's own line of each line of its code
    owner: int | None = None  # a method: its class's index (its first parameter is the instance)
    defaults: dict = field(default_factory=dict)  # parameter name -> what its default value holds


@dataclass
class Scope:
    """A function's (or class body's) names; module names come from ``program.env``."""
    names: dict
    parent: "Scope | None"
    globals_: set = field(default_factory=set)
    module: dict | None = None  # the module bindings this evaluation reads (a boundary's)

    def lookup(self, name: str, program: Program):
        s = self
        while s is not None:
            if name in s.names and name not in s.globals_:
                return s.names[name]
            if s.module is not None:
                break
            s = s.parent
        env = self._module()
        if name in env:
            return env[name] | program.global_writes.get(name, frozenset())
        if name in program.global_writes:
            return program.global_writes[name]
        if hasattr(builtins, name) or name in ("display", "get_ipython"):
            return frozenset({("b", name)})
        return frozenset()

    def _module(self):
        s = self
        while s.module is None:
            s = s.parent
        return s.module
