"""The reading of a notebook's answer cells, in order: :class:`Program` (see the package's
docstring), its budget, and what it records where a graded cell runs."""
from __future__ import annotations

import ast
import time
from typing import Callable

from .bindings import Def, OverBudget, Scope, TooComplex
from .calls import Calls
from .expressions import Expressions
from .statements import Statements
from .strings import CodeStrings
from .text import same_line

MAX_CONTEXTS = 2000  # calls of the learner's functions read with the arguments they were given
# The analysis's hard budget: an honest notebook (the course's catalogues, habits and
# capstone) is read in well under a second and a few hundred thousand units of work (an
# expression read, an atom it may hold, an attribute looked up on one); code built to
# stall the grader is stopped here and held for review instead.
MAX_SECONDS = 10.0
MAX_WORK = 2_000_000
CLOCK_EVERY = 4096  # work units between looks at the clock


class Program(Statements, Expressions, Calls, CodeStrings):
    """The answer cells, read in order (see the module docstring)."""

    def __init__(self, seconds: float | None = None, work: int | None = None):
        self.env: dict[str, frozenset] = {}  # module bindings now (flow-sensitive)
        self.ever: dict[str, frozenset] = {}  # every binding a module name ever had
        self.defs: list[Def] = []
        self.attr_store: dict[str, frozenset] = {}  # attribute name -> what was stored under it
        self.global_writes: dict[str, frozenset] = {}  # bound from inside functions (`global`)
        self.uses: dict[tuple[tuple, int, int], None] = {}  # (atom, cell, line), each once, in order
        self.first_use: dict[tuple, tuple[int, int]] = {}  # atom -> the (cell, line) it is first met on
        self.events: list[tuple[str, str, int, int]] = []  # (kind, detail, cell, line)
        self._events: set = set()
        self.magics: list[tuple[str, int, int]] = []
        self.boundaries: list[dict] = []
        self._cell = 0
        self._recording = True
        self._reach: dict = {}
        self._contexts: set = set()  # (index, given): calls of the learner's functions read so far
        self.calls: dict = {}  # every ("p", index, given) a call made, in order
        self._copies: dict = {}  # (nested def's node, scope it is read in) -> its index (see _define)
        self._loops = 0
        self._module_scope = Scope({}, None, module=self.env)
        self._lines: Callable[[int], int] = same_line  # the cell's own line of a line of the code read
        self._nesting = 0
        self._calling = None  # the callee expression being read (``getattr`` called, not passed on)
        self.seconds = MAX_SECONDS if seconds is None else seconds  # the budget (see _tick)
        self.max_work = MAX_WORK if work is None else work
        self.work = 0  # units of work done (see _tick)
        self._started = time.monotonic()
        self._clock_at = CLOCK_EVERY

    def _tick(self, units: int = 1) -> None:
        """Count ``units`` of work (an expression read, an atom it may hold, an attribute
        looked up on one); past the budget the reading stops (:class:`OverBudget`)."""
        self.work += units
        if self.work >= self._clock_at:
            self._clock_at = self.work + CLOCK_EVERY
            spent = time.monotonic() - self._started
            if self.work > self.max_work or spent > self.seconds:
                raise OverBudget(f"the answer's code could not be read within {self.seconds:g} s "
                                 f"({self.work} units of work in {spent:.1f} s)")

    # ----------------------------------------------------------------- module level
    def run(self, tree: ast.Module, cell: int, record: bool = True, lines: Callable[[int], int] | None = None) -> None:
        """Read one cell's module-level statements; ``record``: note what it uses
        (False for the instructor's set-up cells); ``lines``: the cell's own line of each
        line of ``tree`` (:func:`read`)."""
        self._cell, self._recording = cell, record
        self._lines = lines or same_line
        self._module_scope.module = self.env
        self._block(tree.body, self._module_scope)
        self._recording = True
        self._lines = same_line

    def boundary(self) -> int:
        """Keep the bindings of this moment (where a graded cell runs); returns its index."""
        self.boundaries.append(dict(self.env))
        return len(self.boundaries) - 1

    def finish(self) -> None:
        """Read every function body once, with every binding any name ever had, and once
        more for each call of it with what that call gave it (``patch(torch)``), so that
        what any code could reach is recorded wherever it is."""
        i, read = 0, set()
        while True:
            while i < len(self.defs):
                self._body(i, self.ever)
                i += 1
            pending = [c for c in self.calls if c not in read]
            if not pending:
                return
            for call in pending:
                read.add(call)
                index, given = call[1], call[2]
                d = self.defs[index]
                if isinstance(d.node, ast.ClassDef):  # a new instance: its __init__ is given the arguments
                    for x in d.members.get("__init__", frozenset()):
                        if x[0] == "f":
                            self.calls.setdefault(("p", x[1], given))
                    continue
                self._context(index, given)
                self._body(index, self.ever, given)

    def _context(self, index: int, given) -> None:
        self._contexts.add((index, given))
        if len(self._contexts) > MAX_CONTEXTS:
            raise TooComplex(f"more than {MAX_CONTEXTS} calls of the learner's functions to follow")

    def reach(self, atoms: frozenset, boundary: int) -> frozenset:
        """Everything ``atoms`` can touch when called where ``boundary`` was kept. A
        function's result made by a call (``("p", index, given)``: ``pick(F)``) is read with
        its parameters bound to what that call gave it, so ``def pick(m): return m.gelu``
        kept as ``g = pick(F)`` reaches ``F.gelu``; the function itself is read with
        parameters that hold nothing known (what the checks will pass) but their defaults."""
        env = self.boundaries[boundary]
        seen, todo, out = set(), list(atoms), set()
        while todo:
            a = todo.pop()
            out.add(a)
            self._tick()
            if a[0] == "p":
                index, given = a[1], a[2]
                d = self.defs[index]
                if isinstance(d.node, ast.ClassDef):  # a new instance: its __init__ is given the arguments
                    todo.extend(("p", x[1], given) for x in d.members.get("__init__", frozenset())
                                if x[0] == "f" and ("p", x[1], given) not in out)
                    continue
                key = (index, boundary, given) if given is not None else (index, boundary)
            elif a[0] == "f":
                index, given, key = a[1], None, (a[1], boundary)
            else:
                continue
            if key in seen:
                continue
            seen.add(key)
            if key not in self._reach:
                if given is not None:
                    self._context(index, given)
                self._reach[key] = frozenset()  # recursion: what is known so far
                self._reach[key] = self._body(index, env, given)
            todo.extend(x for x in self._reach[key] if x not in out)
        return frozenset(out)

    # ----------------------------------------------------------------- bodies
    def _body(self, index: int, env: dict, given: tuple | None = None) -> frozenset:
        d = self.defs[index]
        saved = (self._recording, self._cell, self._lines)
        self._recording, self._cell, self._lines = True, d.cell, d.lines
        produced: set = set(d.extra)
        module_scope = Scope({}, None, module=env)
        outer = d.scope if d.scope.module is None else module_scope
        if d.scope.module is None:  # a closure: rebase its chain on these module bindings
            s = outer
            while s.parent is not None and s.parent.module is None:
                s = s.parent
            s.parent = module_scope
        if isinstance(d.node, ast.ClassDef):
            produced |= {x for v in d.members.values() for x in v}
        else:
            scope = Scope({}, outer)
            scope.names.update(self._parameters(d, given))
            for node in ast.walk(d.node):
                if isinstance(node, ast.Global):
                    scope.globals_.update(node.names)
            body = [ast.Return(d.node.body)] if isinstance(d.node, ast.Lambda) else d.node.body
            collect: set = set()
            for _ in range(2):  # names bound later in the body are seen by loops
                self._block(body, scope, collect)
            produced |= collect
        self._recording, self._cell, self._lines = saved
        return frozenset(produced)

    @staticmethod
    def _parameters(d: Def, given: tuple | None) -> dict:
        """What each parameter of ``d`` holds when a call gives it ``given`` (see
        :meth:`_given`; None: what the checks pass, nothing known): its default, and the
        arguments that can land on it. A method's arguments follow its instance; one
        decorated (a static or class method) or a lambda kept in a class may also be called
        on its class, with the instance first."""
        args = d.node.args
        positional = [a.arg for a in args.posonlyargs + args.args]
        names = positional + [a.arg for a in args.kwonlyargs]
        var = args.vararg.arg if args.vararg is not None else None
        kw = args.kwarg.arg if args.kwarg is not None else None
        bound = {n: set(d.defaults.get(n, ())) for n in names + [n for n in (var, kw) if n]}
        plain = d.owner is not None and positional and not isinstance(d.node, ast.Lambda) \
            and not d.node.decorator_list
        if d.owner is not None and positional and not isinstance(d.node, ast.Lambda):
            bound[positional[0]].add(("f", d.owner))  # self: the instance
        if given is not None:
            pos, unplaced, keywords = given
            for i, atoms in enumerate(pos):
                slots = ([i + 1] + ([i] if i else [])) if plain else [i, i + 1] if d.owner is not None else [i]
                for j in slots:
                    if j < len(positional):
                        bound[positional[j]] |= atoms
                    elif var is not None:
                        bound[var] |= atoms
            for name, atoms in keywords:
                if name in bound and name not in (var, kw):
                    bound[name] |= atoms
                elif kw is not None:
                    bound[kw] |= atoms
            if unplaced:
                for n in bound:
                    if not (plain and n == positional[0]):
                        bound[n] |= unplaced
        return {n: frozenset(v) for n, v in bound.items()}
