"""What the names in a learner's code can denote, read from its source in the grader.

:class:`Program` reads the answer cells (Python's ``ast``, after IPython's own input
transformation, :func:`read`) the way they run: top to bottom, module-level bindings in
order (:meth:`Program.boundary` keeps what every name is bound to where a graded cell
runs), and tracks what every name, attribute, container and call result can hold:

- objects the grader itself knows, by the dotted path they were reached by
  (``("k", "torch.nn.functional.gelu")``), and instances of its classes (``("i",
  "torch.nn.GELU")``: setting their attributes replaces nothing of the library's),
  followed through ``import ... as``, ``from
  ... import``, assignment, containers, default arguments, ``getattr`` with a literal
  name (exactly an attribute access), ``operator.attrgetter``, ``vars(m)[...]`` /
  ``m.__dict__[...]``, ``sys.modules[...]``, ``importlib.import_module`` and
  ``__import__``; a module reached through another module's attribute is named by its
  own name (``logging.threading`` is ``threading``); what a call is given may be stored
  in its object or its other arguments (``box.append(f)``, ``heapq.heappush(box, f)``,
  ``functools.partial(box.append)(f)``), so it flows into them (not through the builtins
  and PyTorch's compiled functions, which store nothing: ``torch.rand(n, generator=g)``);
  what a library class's method gives back is taken for an instance of that class
  (``x.flatten()``, ``torch.Generator().manual_seed(0)``), not for the method; an
  attribute the grader cannot resolve is named by a longer path below a module (a few
  names deep: ``torch.ops.aten.gelu``) and once below any other object it resolves
  (``box.pop`` where ``box`` may hold ``F.gelu``), never further, so that chains of
  methods do not make ever longer paths;
- the learner's own functions, lambdas and classes (``("f", index)``), whose bodies are
  read with the bindings of the moment they would run (:meth:`Program.reach`: what a
  function can touch, transitively through the learner's functions, classes, default
  arguments, annotations, attributes set on objects and top-level aliases), and what a
  call of one of them makes (``("p", index, given)``), read with each parameter bound to
  what that call gave it (:meth:`Program._given`: positional arguments in order, named
  ones by name, ``*xs`` and ``**kw`` to any, a default otherwise; ``def pick(m): return
  m.gelu`` kept as ``pick(F)``); a function handed to code not the learner's
  (``map(pick, [F])``, ``functools.partial(pick, F)``) may be called with anything else
  that code was given; every such call is also read once on its own
  (:meth:`Program.finish`), so what it does is recorded where no graded function reaches
  it (``patch(torch)``);
- constant strings (for computed names) and what a computed name may give: ``("w",
  path)`` is any member of ``path`` (``getattr(m, <computed>)``, the values of
  ``vars(m)`` or ``m.__dict__``), ``("w*", path)`` anything reached from such a member
  by further attributes.

Code that IPython or Python runs from a string is read as code of the cell it is in:
the code of the magics that run Python (``%time``, ``%timeit``, ``%prun``,
``%%capture``, ``%debug``: their line as IPython's own option parser splits it, and
their body), the ``{expression}`` and ``$name`` fields IPython evaluates in every other
magic's line, the value of ``%config``, literal ``exec``/``eval`` strings, literal
``timeit`` statements and string annotations.

Every object path and construct met anywhere is recorded with the cell and the line of
the cell it is on (:attr:`Program.uses`, :attr:`Program.events`), the line as the
learner sees it, before IPython's transformation (which drops leading blank lines and
joins continued magic lines); which of them matter is decided by
:mod:`classroom.scoring.shortcuts`. The analysis is conservative: a value flows into
whatever a call returns, so a name that *may* denote something is taken to. Setting an
attribute or item replaces something of a library's only where the object can be a
module, class or other library object that takes it (:func:`replaceable`): not a
function or method, a constant such as ``torch.float64``, or what a method gave back.

The reading has a hard budget (:data:`MAX_SECONDS`, :data:`MAX_WORK`, counted in
:meth:`Program._tick`): code that would take longer is not read on but raises
:class:`OverBudget`, and the notebook is held for review.

Written by hand: the kept analysers (astroid's inference, type checkers) infer from
source files and cannot see into PyTorch's C extension, where ``F.gelu`` lives; here
every path is resolved against the real objects of the trusted grader (:func:`resolve`)
without running any learner code, and without importing or running anything the
learner names: only modules the grader has already imported are looked into, by static
lookups that run no property, module ``__getattr__`` or other Python code.
"""
from __future__ import annotations

import ast
import builtins
import functools
import inspect
import re
import sys
import time
import types
from dataclasses import dataclass, field
from typing import Callable

from IPython.core import magic_arguments
from IPython.core.inputtransformer2 import TransformerManager
from IPython.core.magic import Magics
from IPython.core.magics.execution import ExecutionMagics
from IPython.core.magics.osm import OSMagics
from IPython.utils.text import DollarFormatter

_MISSING = object()
_MAGIC_CALLS = {"run_line_magic", "run_cell_magic", "system", "getoutput"}
# magics IPython runs without expanding ``{expression}`` and ``$name`` in their line
# (IPython.core.magic.no_var_expand); every other magic's line is expanded, which runs code
NO_VAR_EXPAND = {"time", "timeit", "prun", "debug"}
# magics that show an object named in their line (``gelu?`` is ``%pinfo gelu``)
SHOW_MAGICS = {"pinfo", "pinfo2", "pdef", "pdoc", "psource", "pfile", "page"}
MAX_NESTING = 12  # magic bodies, exec'd strings and annotations read inside one another
# calls that run a code string: the path and the (position, keyword) of each code argument
CODE_STRINGS = {
    "timeit.timeit": ((0, "stmt"), (1, "setup")), "timeit.repeat": ((0, "stmt"), (1, "setup")),
    "timeit.Timer": ((0, "stmt"), (1, "setup")),
    "torch.utils.benchmark.Timer": ((0, "stmt"), (1, "setup"), (None, "global_setup")),
    "torch.utils.benchmark.utils.timer.Timer": ((0, "stmt"), (1, "setup"), (None, "global_setup")),
}
# methods that store their arguments in their object, when kept or passed on as values
_MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault", "__setitem__", "put", "put_nowait",
             "appendleft", "extendleft", "push", "register", "__iadd__", "__ior__", "send"}
# builtins that never store one argument in another (what they are given flows into their result)
_PURE_BUILTINS = {"isinstance", "issubclass", "len", "print", "repr", "str", "int", "float", "bool", "complex",
                  "abs", "round", "divmod", "pow", "hash", "id", "type", "callable", "range", "enumerate", "zip",
                  "reversed", "sorted", "min", "max", "sum", "any", "all", "list", "tuple", "set", "frozenset",
                  "dict", "iter", "next", "format", "chr", "ord", "bin", "hex", "oct", "ascii", "slice",
                  "hasattr", "map", "filter", "bytes", "bytearray"}
# methods of os.environ that change it
_ENV_WRITES = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__"}
# attribute names under which a module the grader does not know is taken to hold the one
# it does (``somepackage.torch`` is ``torch``)
_REROOT = {"torch", "andrea_ref", "classroom", "sys", "builtins", "importlib", "threading", "_thread",
           "subprocess", "multiprocessing", "concurrent", "ctypes", "gc", "inspect", "pickle", "marshal"}
_NEWLINE = re.compile(r"\r\n|\r|\n")


class TooComplex(Exception):
    """The answer's code is beyond what the analysis reads (nesting, size)."""


class OverBudget(TooComplex):
    """Reading the answer's code took more than the analysis's budget (:data:`MAX_SECONDS`,
    :data:`MAX_WORK`): the grader stops rather than run on."""


MAX_DEFS = 5000  # learner functions, lambdas and classes read, nested copies included
MAX_CONTEXTS = 2000  # calls of the learner's functions read with the arguments they were given
# The analysis's hard budget: an honest notebook (the course's catalogues, habits and
# capstone) is read in well under a second and a few hundred thousand units of work (an
# expression read, an atom it may hold, an attribute looked up on one); code built to
# stall the grader is stopped here and held for review instead.
MAX_SECONDS = 10.0
MAX_WORK = 2_000_000
_CLOCK_EVERY = 4096  # work units between looks at the clock
# a dotted path built from attribute names the grader cannot resolve grows at most this many
# names past the deepest module it resolves (``torch.ops.aten.gelu.default`` is 3)
MAX_UNRESOLVED = 4
# what a library class's methods, functions and slots are: calling one does not give itself
# back, and setting an attribute on one replaces nothing that other code looks up
_ROUTINES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.MethodDescriptorType,
             types.WrapperDescriptorType, types.MethodWrapperType, types.ClassMethodDescriptorType,
             types.GetSetDescriptorType, types.MemberDescriptorType)
# what a function handed to library code is followed with (see Program._passed_on): objects and
# namespaces of a library's, getattr and the like, bound mutators
_REACHED = ("k", "w", "w*", "d", "d.get", "g", "g!", "b", "m")
_DESCRIPTORS = (types.MethodDescriptorType, types.WrapperDescriptorType, types.MethodWrapperType,
                types.ClassMethodDescriptorType)


def _module(name: str):
    """The module ``name`` if the grader has already imported it, else MISSING: learner
    source never makes the grader import (or run) anything."""
    mod = sys.modules.get(name, _MISSING)
    return mod if isinstance(mod, types.ModuleType) else _MISSING


def _module_name(mod) -> str | None:
    name = vars(mod).get("__name__")
    return name if isinstance(name, str) else None


@functools.lru_cache(maxsize=65536)
def resolve(path: str):
    """(canonical path, object) for a dotted ``path``, or (path, MISSING) when the
    grader cannot resolve it from the modules it has imported. A module met on the way
    is named by its own name. Nothing is imported and no Python code runs: attributes are
    read statically (no property, no module ``__getattr__``)."""
    parts = path.split(".")
    obj = _module(parts[0])
    if obj is _MISSING:
        return path, _MISSING
    canon = [parts[0]]
    for k, part in enumerate(parts[1:], start=1):
        try:
            value = _static_attr(obj, part)
            if value is _MISSING and isinstance(obj, types.ModuleType) and _module_name(obj):
                value = _module(f"{_module_name(obj)}.{part}")
        except Exception:  # noqa: BLE001 - a path that does not resolve stays a name
            value = _MISSING
        if value is _MISSING:
            return _from_module_prefix(parts) or (".".join(canon + parts[k:]), _MISSING)
        obj = value
        own = _module_name(obj) if isinstance(obj, types.ModuleType) else None
        canon = own.split(".") if own else canon + [part]
    return ".".join(canon), obj


MISSING = _MISSING


@functools.lru_cache(maxsize=65536)
def known_prefix(path: str):
    """``(object, unresolved)``: the deepest prefix of ``path`` the grader resolves (None
    where not even its root is an imported module) and how many names of ``path`` follow it."""
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        obj = resolve(".".join(parts[:n]))[1]
        if obj is not _MISSING:
            return obj, len(parts) - n
    return None, len(parts) - 1


@functools.lru_cache(maxsize=65536)
def replaceable(path: str, item: bool = False) -> bool:
    """Whether an object reached by ``path`` can be one whose attributes (``item``: items)
    other code looks up and the learner's code can set: a module, a class, another object
    of a library that takes them (``os.environ``, ``sys.stdout``), or a name below a module
    the grader has not imported; not a function or method, a constant such as
    ``torch.float64``, nor a value it cannot resolve below a function, class or instance
    (what a method or an instance's own attribute gives)."""
    obj = resolve(path)[1]
    if obj is _MISSING:
        obj, _ = known_prefix(path)
        return obj is None or isinstance(obj, types.ModuleType)
    if isinstance(obj, (types.ModuleType, type)):
        return True
    if isinstance(obj, _ROUTINES):
        return False
    if isinstance(peek(obj, "__dict__"), dict):
        return True
    kind = type(obj)
    if item:
        return _static_attr(kind, "__setitem__") is not _MISSING
    setter = _static_attr(kind, "__setattr__")
    return setter is not _MISSING and setter is not object.__setattr__


def _extensible(path: str) -> bool:
    """Whether an attribute the grader cannot resolve on ``path`` is still named by a
    longer path: on an object it resolves (once: ``box.pop`` where ``box`` may hold
    ``F.gelu`` is ``F.gelu.pop``), and below a module (``torch.ops.aten.gelu``), a few
    names deep; never on an unresolved name below a function, class or instance, so that
    chains of methods (``x.flatten().detach().flatten()``) do not make ever longer paths."""
    if resolve(path)[1] is not _MISSING:
        return True
    obj, unresolved = known_prefix(path)
    return (obj is None or isinstance(obj, types.ModuleType)) and unresolved < MAX_UNRESOLVED


def _from_module_prefix(parts: list[str]):
    """``from andrea_ref.block import pre_norm_block`` names the module ``andrea_ref.block``
    even where the package's attribute ``block`` is a function: a path that does not
    resolve attribute by attribute is read from the longest prefix that is an imported
    module."""
    for n in range(len(parts) - 1, 1, -1):
        mod = _module(".".join(parts[:n]))
        if mod is _MISSING:
            continue
        obj, canon = mod, (_module_name(mod) or ".".join(parts[:n])).split(".")
        for part in parts[n:]:
            try:
                value = _static_attr(obj, part)
            except Exception:  # noqa: BLE001
                value = _MISSING
            if value is _MISSING:
                return None
            obj = value
            own = _module_name(obj) if isinstance(obj, types.ModuleType) else None
            canon = own.split(".") if own else canon + [part]
        return ".".join(canon), obj
    return None


def _static_attr(obj, name):
    try:
        value = inspect.getattr_static(obj, name)
    except AttributeError:
        return _MISSING
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    return value


def peek(obj, name: str, default=None):
    """``obj.name`` where reading it runs no Python code (a value in the object's or its
    class's namespace, a slot, a C-level getset such as a function's ``__code__``), else
    ``default``: the grader reads its own objects, reached by learner-named paths, without
    running a property or ``__getattr__``."""
    try:
        value = inspect.getattr_static(obj, name)
    except Exception:  # noqa: BLE001
        return default
    if isinstance(value, (types.GetSetDescriptorType, types.MemberDescriptorType)):
        try:
            return value.__get__(obj, type(obj))
        except Exception:  # noqa: BLE001
            return default
    if isinstance(value, (staticmethod, classmethod)):
        return value.__func__
    if isinstance(value, property):
        return default
    return value


def source_lines(text: str) -> list[str]:
    """The lines of ``text`` as Python numbers them (``\\n``, ``\\r\\n`` and ``\\r`` end a line)."""
    lines = _NEWLINE.split(text)
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()
    return lines


def read(source: str):
    """``(tree, lines)``: a cell as Python, after IPython's own transformation of magics
    and shell commands, and ``lines(k)``, the cell's own line of line ``k`` of that Python
    (IPython drops leading blank lines and joins a magic continued with ``\\``); or
    ``(None, None)`` if it does not parse (it then runs nowhere)."""
    try:
        code = TransformerManager().transform_cell(source)
        tree = ast.parse(code)
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError, RecursionError, MemoryError ...
        return None, None
    return tree, _as_function(_line_map(source, code))


def _line_map(source: str, code: str) -> list[int]:
    orig, new = source_lines(source), source_lines(code)
    i = 0
    while i < len(orig) and not orig[i].strip():  # IPython's leading_empty_lines
        i += 1
    out = []
    for t in new:
        out.append(min(i, len(orig) - 1) + 1 if orig else 1)
        if i < len(orig) and orig[i].strip() != t.strip() and "get_ipython()" in t:
            while i < len(orig) - 1 and orig[i].endswith("\\"):  # a magic continued on the next line
                i += 1
        i += 1
    return out


def _as_function(table: list[int]) -> Callable[[int], int]:
    table = tuple(table)

    def line(k: int) -> int:
        if not table:
            return k
        return table[min(max(k, 1), len(table)) - 1]
    return line


def _same_line(k: int) -> int:
    return k


def _quietly(fn, *args, **kwargs):
    """IPython's own parsing of a magic's line; None where IPython refuses it (the magic
    then runs nothing)."""
    try:
        return fn(*args, **kwargs)
    except (Exception, SystemExit):  # noqa: BLE001 - UsageError, GetoptError ...
        return None


def _options(line: str, spec: str, **kw):
    parser = Magics.__new__(Magics)  # parse_options reads only its options_table
    parser.options_table = {}
    return parser.parse_options(line, spec, **kw)


def magic_code(name: str, line: str, body: str | None) -> list[tuple[str, int]]:
    """The Python that IPython's magic ``name`` runs, given its ``line`` and cell ``body``
    (None for a line magic), split the way IPython itself splits it: ``[(code, first)]``,
    where ``first`` is 0 when the code's first line is the magic's line and 1 when it is
    the line below (a cell's body)."""
    pieces: list[tuple[str, int]] = []
    if name == "time":
        if body is not None:
            pieces.append((body, 1))
        else:
            parsed = _quietly(magic_arguments.parse_argstring, ExecutionMagics.time, line, partial=True)
            if parsed is not None:
                pieces.append((" ".join(parsed[1]), 0))
    elif name == "timeit":
        parsed = _quietly(_options, line, "n:r:tcp:qov:", posix=False, strict=False, preserve_non_opts=True)
        if parsed is not None:
            pieces.append((parsed[1], 0))  # the statement, or a cell magic's set-up statement
            if body is not None:
                pieces.append((body, 1))
    elif name == "prun":
        parsed = _quietly(_options, line, "D:l:rs:T:q", list_all=True, posix=False)
        if parsed is not None:
            pieces.append((parsed[1] + ("\n" + body if body is not None else ""), 0))
    elif name == "capture":
        if body is not None:
            pieces.append((body, 1))
    elif name == "debug":
        pieces.append((line, 0))
        parsed = _quietly(magic_arguments.parse_argstring, ExecutionMagics.debug, line, partial=True)
        if parsed is not None:
            pieces.append((" ".join(parsed[1]) + ("\n" + body if body else ""), 0))
    return [(code, first) for code, first in pieces if isinstance(code, str) and code.strip()]


def expansions(line: str) -> list[str]:
    """The expressions IPython evaluates when it expands a magic's line
    (``{expression}`` and ``$name`` fields: ``InteractiveShell.var_expand``), in order, up
    to the first field it cannot parse."""
    out = []
    try:
        for _literal, name, spec, _conversion in DollarFormatter().parse(line):
            if name is not None:
                out.append(f"{name}:{spec}" if spec else name)
    except Exception:  # noqa: BLE001 - the fields before the error were evaluated
        pass
    return out


def writefile_name(line: str) -> str | None:
    """The file name a ``%%writefile`` line names (None: IPython refuses the line)."""
    parsed = _quietly(magic_arguments.parse_argstring, OSMagics.writefile, line)
    if parsed is None or not isinstance(parsed.filename, str):
        return None
    name = parsed.filename
    if re.match(r"^(\'.*\')|(\".*\")$", name):
        name = name[1:-1]
    return name


@dataclass
class Def:
    node: ast.AST  # FunctionDef, AsyncFunctionDef, Lambda or ClassDef
    scope: "Scope"  # where its free names are looked up
    cell: int
    name: str
    extra: frozenset = frozenset()  # defaults and decorators, evaluated where it was defined
    members: dict = field(default_factory=dict)  # a class: its namespace
    lines: Callable[[int], int] = _same_line  # the cell's own line of each line of its code
    owner: int | None = None  # a method: its class's index (its first parameter is the instance)
    defaults: dict = field(default_factory=dict)  # parameter name -> what its default value holds


@dataclass
class Scope:
    """A function's (or class body's) names; module names come from ``program.env``."""
    names: dict
    parent: "Scope | None"
    globals_: set = field(default_factory=set)
    module: dict | None = None  # the module bindings this evaluation reads (a boundary's)

    def lookup(self, name: str, program: "Program"):
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


class Program:
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
        self._lines: Callable[[int], int] = _same_line  # the cell's own line of a line of the code read
        self._nesting = 0
        self._calling = None  # the callee expression being read (``getattr`` called, not passed on)
        self.seconds = MAX_SECONDS if seconds is None else seconds  # the budget (see _tick)
        self.max_work = MAX_WORK if work is None else work
        self.work = 0  # units of work done (see _tick)
        self._started = time.monotonic()
        self._clock_at = _CLOCK_EVERY

    def _tick(self, units: int = 1) -> None:
        """Count ``units`` of work (an expression read, an atom it may hold, an attribute
        looked up on one); past the budget the reading stops (:class:`OverBudget`)."""
        self.work += units
        if self.work >= self._clock_at:
            self._clock_at = self.work + _CLOCK_EVERY
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
        self._lines = lines or _same_line
        self._module_scope.module = self.env
        self._block(tree.body, self._module_scope)
        self._recording = True
        self._lines = _same_line

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

    # ----------------------------------------------------------------- statements
    def _add(self, d: Def) -> None:
        if len(self.defs) >= MAX_DEFS:
            raise TooComplex(f"more than {MAX_DEFS} functions, lambdas and classes (nested ones counted per use)")
        self.defs.append(d)

    def _define(self, d: Def) -> int:
        """Add the function or lambda ``d``; one nested in a function is a copy per reading of
        that function (its closure), but met again in the same reading (a body is read twice,
        for its loops) it is the same copy, with what its defaults hold now added."""
        key = (id(d.node), id(d.scope))
        index = self._copies.get(key) if d.scope.module is None else None
        if index is not None and self.defs[index].scope is d.scope:
            old = self.defs[index]
            old.extra |= d.extra
            for name, atoms in d.defaults.items():
                old.defaults[name] = old.defaults.get(name, frozenset()) | atoms
            return index
        self._add(d)
        if d.scope.module is None:
            self._copies[key] = len(self.defs) - 1
        return len(self.defs) - 1

    def _bind(self, target, value: frozenset, scope: Scope, collect) -> None:
        if isinstance(target, ast.Name):
            if scope.module is not None:
                self.env[target.id] = value
                self.ever[target.id] = self.ever.get(target.id, frozenset()) | value
            elif target.id in scope.globals_:
                self.global_writes[target.id] = self.global_writes.get(target.id, frozenset()) | value
            else:
                scope.names[target.id] = scope.names.get(target.id, frozenset()) | value
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                self._bind(t.value if isinstance(t, ast.Starred) else t, value, scope, collect)
        elif isinstance(target, ast.Attribute):
            base = self._expr(target.value, scope, collect)
            self._attr_event(base, target.attr, target)
            self._store_attr(base, target.attr, value, target)
        elif isinstance(target, ast.Subscript):
            base = self._expr(target.value, scope, collect)
            self._expr(target.slice, scope, collect)
            key = target.slice
            literal = isinstance(key, ast.Constant) and isinstance(key.value, str)
            if literal and any(a[0] == "g!" for a in base):
                self.global_writes[key.value] = self.global_writes.get(key.value, frozenset()) | value
            self._store_attr(base, "[]", value, target, f"[{key.value!r}]" if literal else "[...]")
        elif isinstance(target, ast.Starred):
            self._bind(target.value, value, scope, collect)

    def _store_attr(self, base: frozenset, attr: str, value: frozenset, node, key: str = "[...]") -> None:
        """``base.attr = value`` (``attr`` "[]": an item): what it holds flows to every read
        of that attribute name; it replaces something of a library's where ``base`` can be a
        module, class or other object the code reached (:func:`replaceable`), not an
        instance it made, a function or method, or what one gave back."""
        self.attr_store[attr] = self.attr_store.get(attr, frozenset()) | value
        for a in base:
            if a[0] == "k" and not replaceable(a[1], attr == "[]"):
                continue
            if a[0] in ("k", "b", "d", "w", "w*"):  # not "i": an instance's own attribute or item
                where = _label(a) if a[0] in ("k", "b", "d") else f"{a[1]}.<computed>"
                self._event("sets", f"{where}.{attr}" if attr != "[]" else f"{where}{key}", node)

    def _attr_event(self, base: frozenset, attr: str, node) -> None:
        """An attribute read or written: the shortcut rules decide which names matter.
        The ``__dict__`` of the learner's own objects is their own data."""
        if attr == "__dict__" and base and all(a[0] in ("f", "p") for a in base):
            return
        self._event("attr", attr, node)

    def _block(self, body, scope: Scope, collect=None) -> None:
        for stmt in body:
            self._stmt(stmt, scope, collect)

    def _branches(self, bodies, scope: Scope, collect) -> None:
        """Bodies of which any may run: the module bindings after them are the union."""
        if scope.module is None:  # function locals are a union anyway
            for b in {id(b): b for b in bodies}.values():
                self._block(b, scope, collect)
            return
        start, merged = dict(self.env), {}
        for b in bodies:
            self.env.clear()
            self.env.update(start)
            self._block(b, scope, collect)
            for k, v in self.env.items():
                merged[k] = merged.get(k, frozenset()) | v
        self.env.clear()
        self.env.update(merged)

    def _merge(self, *envs) -> None:
        merged: dict = {}
        for e in envs:
            for k, v in e.items():
                merged[k] = merged.get(k, frozenset()) | v
        self.env.clear()
        self.env.update(merged)

    def _loop(self, body, scope: Scope, collect) -> None:
        """A loop body, which may run never, once or more: read twice near the top level
        (a name bound late in the body reaches its start on the next turn)."""
        if scope.module is None:
            self._block(body, scope, collect)
            return
        start = dict(self.env)
        self._block(body, scope, collect)
        once = dict(self.env)
        if self._loops <= 2:
            self._merge(start, once)
            self._block(body, scope, collect)
        self._merge(start, once, dict(self.env))

    def _stmt(self, s, scope: Scope, collect) -> None:
        self._tick()
        ex = lambda node: self._expr(node, scope, collect)  # noqa: E731
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            extra = frozenset().union(*[ex(d) for d in s.decorator_list]) if s.decorator_list else frozenset()
            if isinstance(s, ast.ClassDef):
                for b in s.bases + [k.value for k in s.keywords]:
                    extra |= ex(b)
                self._class_events(s)
                members = Scope({}, scope)
                d = Def(s, scope, self._cell, s.name, extra, lines=self._lines)
                self._add(d)
                idx = len(self.defs) - 1
                self._block(s.body, members, collect)
                d.members = dict(members.names)
                for name in members.names:  # methods see the module, not the class body
                    for a in members.names[name]:
                        if a[0] == "f" and self.defs[a[1]].scope is members:
                            self.defs[a[1]].scope = scope
                            self.defs[a[1]].owner = idx
                self._bind(ast.Name(s.name, ast.Store()), frozenset({("f", idx)}), scope, collect)
            else:
                defaults, each = self._defaults(s.args, scope, collect)
                extra |= defaults | self._annotations(s, scope, collect)
                index = self._define(Def(s, scope, self._cell, s.name, extra, lines=self._lines, defaults=each))
                self._bind(ast.Name(s.name, ast.Store()), frozenset({("f", index)}), scope, collect)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            self._import_stmt(s, scope, collect)
        elif isinstance(s, ast.Assign):
            value = ex(s.value)
            for t in s.targets:
                self._bind(t, value, scope, collect)
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
            if isinstance(s, ast.AnnAssign):
                self._annotation(s.annotation, scope, collect)
            value = ex(s.value) if s.value is not None else frozenset()
            if isinstance(s, ast.AugAssign):
                value |= ex(s.target) if not isinstance(s.target, ast.Name) else scope.lookup(s.target.id, self)
            if s.value is not None or isinstance(s, ast.AugAssign):
                self._bind(s.target, value, scope, collect)
        elif isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            if isinstance(s, ast.While):
                ex(s.test)
            else:
                self._bind(s.target, ex(s.iter), scope, collect)
            self._loops += 1
            try:
                self._loop(s.body, scope, collect)
            finally:
                self._loops -= 1
            self._block(s.orelse, scope, collect)
        elif isinstance(s, ast.If):
            ex(s.test)
            self._branches([s.body, s.orelse], scope, collect)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                v = ex(item.context_expr)
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, v, scope, collect)
            self._block(s.body, scope, collect)
        elif isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            self._branches([s.body + s.orelse] + [h.body for h in s.handlers] + [[]], scope, collect)
            for h in s.handlers:
                if h.type is not None:
                    ex(h.type)
            self._block(s.finalbody, scope, collect)
        elif isinstance(s, ast.Delete):
            for t in s.targets:
                if isinstance(t, ast.Name) and scope.module is not None:
                    self.env.pop(t.id, None)
                elif isinstance(t, ast.Attribute):
                    self._store_attr(ex(t.value), t.attr, frozenset(), t)
                else:
                    ex(t)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                ex(s.value)
        elif isinstance(s, ast.Global):
            scope.globals_.update(s.names)
        elif isinstance(s, ast.Match):
            ex(s.subject)
            self._branches([c.body for c in s.cases] + [[]], scope, collect)
        else:
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr):
                    ex(child)

    def _annotations(self, node, scope: Scope, collect) -> frozenset:
        """A function's annotations, evaluated where it is defined (and, written as strings,
        by whatever reads them: ``typing.get_type_hints``, ``functools.singledispatch``)."""
        args = node.args
        out = frozenset()
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None and a.annotation is not None:
                out |= self._annotation(a.annotation, scope, collect)
        if getattr(node, "returns", None) is not None:
            out |= self._annotation(node.returns, scope, collect)
        return out

    def _annotation(self, node, scope: Scope, collect) -> frozenset:
        out = self._expr(node, scope, collect)
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            line = self._line(node)
            out |= self._nested(node.value, lambda _k: line, scope, collect, mode="eval", ipython=False)
        return out

    def _defaults(self, args: ast.arguments, scope: Scope, collect) -> tuple[frozenset, dict]:
        """What the default values hold: all of them, and per parameter."""
        out, each = frozenset(), {}
        positional = args.posonlyargs + args.args
        pairs = list(zip(positional[len(positional) - len(args.defaults):], args.defaults)) + \
            [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
        for a, d in pairs:
            each[a.arg] = self._expr(d, scope, collect)
            out |= each[a.arg]
        return out, each

    def _class_events(self, node: ast.ClassDef) -> None:
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in (
                    "__del__", "__torch_function__", "__torch_dispatch__", "__init_subclass__", "__set_name__",
                    "__reduce__", "__reduce_ex__"):
                self._event("method", item.name, item)
        for kw in node.keywords:
            if kw.arg == "metaclass":
                self._event("method", "metaclass=", node)

    def _import_stmt(self, s, scope: Scope, collect) -> None:
        if isinstance(s, ast.Import):
            for alias in s.names:
                self._use(("k", alias.name), s)
                if alias.asname:
                    self._bind(ast.Name(alias.asname, ast.Store()), frozenset({("k", alias.name)}), scope, collect)
                else:
                    root = alias.name.split(".")[0]
                    self._bind(ast.Name(root, ast.Store()), frozenset({("k", root)}), scope, collect)
            return
        if s.level or not s.module:
            self._event("import", "a relative import", s)
            return
        for alias in s.names:
            if alias.name == "*":
                self._event("star", s.module, s)
                _, mod = resolve(s.module)
                names = []
                if isinstance(mod, types.ModuleType):
                    space = vars(mod)
                    listed = space.get("__all__")
                    names = list(listed)[:10000] if isinstance(listed, (list, tuple)) else \
                        [n for n in list(space)[:10000] if not n.startswith("_")]
                for n in names:
                    if not isinstance(n, str):
                        continue
                    self._bind(ast.Name(str(n), ast.Store()), frozenset({("k", f"{s.module}.{n}")}), scope, collect)
                continue
            path = f"{s.module}.{alias.name}"
            self._use(("k", path), s)
            self._bind(ast.Name(alias.asname or alias.name, ast.Store()), frozenset({("k", path)}), scope, collect)

    # ----------------------------------------------------------------- expressions
    def _line(self, node) -> int:
        k = getattr(node, "lineno", 0)
        return self._lines(k) if k else 0

    def _use(self, atom, node) -> None:
        if self._recording:
            key = (atom, self._cell, self._line(node))
            if key not in self.uses:
                self.uses[key] = None
                self.first_use.setdefault(atom, key[1:])

    def _event(self, kind: str, detail: str, node) -> None:
        if self._recording:
            key = (kind, detail, self._cell, self._line(node))
            if key not in self._events:
                self._events.add(key)
                self.events.append(key)

    def _out(self, atoms: frozenset, node, collect) -> frozenset:
        self._tick(1 + len(atoms))
        for a in atoms:
            if a[0] in ("k", "i", "b", "w", "w*"):
                self._use(a, node)
        if collect is not None:
            collect.update(atoms)
        return atoms

    def _expr(self, node, scope: Scope, collect=None) -> frozenset:
        ex = lambda n: self._expr(n, scope, collect)  # noqa: E731
        if node is None:
            return frozenset()
        if isinstance(node, ast.Name):
            if node.id in ("__builtins__", "__loader__", "__spec__"):
                self._event("name", node.id, node)
            atoms = scope.lookup(node.id, self)
            if node is not self._calling:  # passed on as a value: called later with names from data
                for a in atoms:
                    if a[0] == "b" and a[1] in ("getattr", "setattr", "delattr"):
                        self._event("computed", a[1], node)
            return self._out(atoms, node, collect)
        if isinstance(node, ast.Constant):
            return frozenset({("s", node.value)}) if isinstance(node.value, str) and len(node.value) < 200 \
                else frozenset()
        if isinstance(node, ast.Attribute):
            if node.attr in ("__name__", "__qualname__") and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "__class__":  # a class's name, as in a __repr__
                ex(node.value.value)
                return frozenset()
            base = ex(node.value)
            if isinstance(node.ctx, ast.Load):
                self._attr_event(base, node.attr, node)
            out = self._attr(base, node.attr, node)
            if node is not self._calling and isinstance(node.value, (ast.Name, ast.Attribute, ast.Subscript)) \
                    and (node.attr in _MUTATORS or any(a[0] == "f" and node.attr in self.defs[a[1]].members
                                                       for a in base)) \
                    and not self._module_like(base):  # `add = box.append`: calling it stores in box
                out |= {("m", self._receiver_key(node.value))}
            return self._out(out, node, collect)
        if isinstance(node, ast.Call):
            return self._out(self._call(node, scope, collect), node, collect)
        if isinstance(node, ast.Compare) and all(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops):
            # `'gelu' in globals()`: asks whether a name is bound, reaches no object
            for part in [node.left] + node.comparators:
                if not self._namespace_call(part, scope):
                    ex(part)
            return frozenset()
        if isinstance(node, ast.Subscript):
            key_node = node.slice
            if isinstance(node.ctx, ast.Load) and isinstance(key_node, ast.Constant) \
                    and isinstance(key_node.value, str) and self._namespace_call(node.value, scope):
                # `globals()['gelu']`: the module-level name itself
                return self._out(self._module_scope_of(scope).lookup(key_node.value, self), node, collect)
            base, key = ex(node.value), ex(key_node)
            out = set(base)
            for a in base:
                if a[0] == "d":
                    for k in key:
                        if k[0] == "s":
                            out.add(("k", f"{a[1]}.{k[1]}" if a[1] else k[1]))
                    out.add(("w", a[1]))
            return self._out(frozenset(out) | self.attr_store.get("[]", frozenset()), node, collect)
        if isinstance(node, ast.Lambda):
            extra, each = self._defaults(node.args, scope, collect)
            index = self._define(Def(node, scope, self._cell, "<lambda>", extra, lines=self._lines, defaults=each))
            return self._out(frozenset({("f", index)}), node, collect)
        if isinstance(node, ast.NamedExpr):
            v = ex(node.value)
            self._bind(node.target, v, scope, collect)
            return v
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            inner = Scope({}, scope)
            for g in node.generators:
                self._bind(g.target, self._expr(g.iter, inner, collect), inner, collect)
                for cond in g.ifs:
                    self._expr(cond, inner, collect)
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            return frozenset().union(*[self._expr(p, inner, collect) for p in parts])
        out = frozenset()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                out |= ex(child)
            elif isinstance(child, ast.keyword):
                out |= ex(child.value)
        return out

    def _namespace_call(self, node, scope: Scope) -> bool:
        """``globals()``, ``locals()`` or ``vars()`` (the builtins themselves, without arguments)."""
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args \
            and not node.keywords and node.func.id in ("globals", "locals", "vars") \
            and scope.lookup(node.func.id, self) == frozenset({("b", node.func.id)})

    def _module_scope_of(self, scope: Scope) -> Scope:
        s = scope
        while s.module is None and s.parent is not None:
            s = s.parent
        return s

    def _attr(self, base: frozenset, attr: str, node=None) -> frozenset:
        self._tick(len(base))
        out = set()
        for a in base:
            if a[0] == "k":
                path = f"{a[1]}.{attr}"
                canon, obj = resolve(path)
                if obj is not _MISSING or _extensible(a[1]):
                    out.add(("k", canon))
                if obj is _MISSING:
                    out.add(a)
                    out |= self.attr_store.get(attr, frozenset())
                    if attr in _REROOT and resolve(a[1].split(".")[0])[1] is _MISSING:
                        out.add(("k", attr))  # a module the grader does not know, holding one it does
                if attr == "__dict__":
                    out.add(("d", a[1]))
                if canon == "sys.modules":  # a namespace whose keys are module names
                    out.add(("d", ""))
            elif a[0] == "i":  # an instance of a library class: its class's attribute, or its own
                canon, obj = resolve(f"{a[1]}.{attr}")
                if obj is not _MISSING:
                    out.add(("k", canon))
                else:
                    out.add(a)
                    out |= self.attr_store.get(attr, frozenset())
            elif a[0] == "b":
                pass  # an attribute of a builtin function: its internals are seen as an attribute name
            elif a[0] in ("f", "p"):  # the learner's function, class or instance, or what a call of one gave
                d = self.defs[a[1]]
                out |= d.members.get(attr, frozenset())
                out |= self.attr_store.get(attr, frozenset())
                out.add(a)
            elif a[0] == "d":
                if attr in ("get", "pop", "setdefault", "__getitem__"):
                    out.add(("d.get", a[1]))
                else:  # .values(), .items(), .copy() ...: every member, by names taken from data
                    out.add(("w", a[1]))
                    if node is not None:
                        self._event("namespace", a[1] or "the notebook's", node)
            elif a[0] in ("w", "w*"):
                out.add(("w*", a[1]))
        if not base:
            out |= self.attr_store.get(attr, frozenset())
        return frozenset(out)

    def _call(self, node: ast.Call, scope: Scope, collect) -> frozenset:
        ex = lambda n: self._expr(n, scope, collect)  # noqa: E731
        magic = self._magic(node, scope, collect)
        if magic is not None:
            return magic
        saved, self._calling = self._calling, node.func
        try:
            func = ex(node.func)
        finally:
            self._calling = saved
        runner = next((CODE_STRINGS[f[1]] for f in func if f[0] == "k" and f[1] in CODE_STRINGS), None)
        if runner is not None:
            self._code_strings(node, runner, scope, collect)
        args = [ex(a) for a in node.args]
        kwargs = [frozenset() if runner is not None and k.arg == "globals" and self._namespace_call(k.value, scope)
                  else ex(k.value) for k in node.keywords]
        everything = frozenset().union(*args, *kwargs) if (args or kwargs) else frozenset()
        # a name is constant only when written as a literal: anything computed is a computed name
        consts = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in node.args]
        out = set(everything)
        if ("b", "getattr") in everything:  # `reduce(getattr, names, torch)`: anything below the namespaces
            out |= {("w*", a[1]) for a in everything if a[0] in ("k", "w", "w*")}
        self._mutation(node, func, args, kwargs, scope, collect)
        given = None
        for f in func:
            name = f[1] if f[0] == "b" else (f[1][9:] if f[0] == "k" and f[1].startswith("builtins.") else None)
            if name in ("getattr", "hasattr", "setattr", "delattr") and len(args) >= 2:
                if consts[1] is None:
                    self._event("computed", name, node)
                    out |= {("w", x[1]) for x in args[0] if x[0] in ("k", "i")}
                    out |= {("w*", x[1]) for x in args[0] if x[0] in ("w", "w*")}
                    out |= args[0]
                elif name == "getattr":  # exactly the attribute access it spells
                    self._attr_event(args[0], consts[1], node)
                    out |= self._attr(args[0], consts[1], node)
                elif name in ("setattr", "delattr"):
                    self._attr_event(args[0], consts[1], node)
                    self._store_attr(args[0], consts[1], args[2] if len(args) > 2 else frozenset(), node)
            elif name in ("vars",) and args:
                out |= {("d", x[1]) for x in args[0] if x[0] in ("k", "i")}
            elif name in ("globals", "locals", "vars"):
                out.add(("g!", "") if name == "globals" else ("d", ""))
            elif name in ("__import__",) and node.args and not consts[0]:
                self._event("computed", name, node)
            elif name == "__import__" and consts and consts[0]:
                out.add(("k", consts[0].split(".")[0]))
            elif name in ("exec", "eval") and consts and consts[0]:
                self._exec_string(consts[0], node, scope, collect, "eval" if name == "eval" else "exec")
            elif f[0] == "k" and f[1] in ("importlib.import_module", "operator.attrgetter",
                                          "operator.methodcaller") and node.args and not consts[0]:
                self._event("computed", f[1], node)
            elif f[0] == "k" and f[1] in ("importlib.import_module",) and consts and consts[0]:
                out.add(("k", consts[0]))
            elif f[0] == "k" and f[1] in ("operator.attrgetter", "operator.methodcaller") and consts and consts[0]:
                out.add(("g", consts[0]))
            elif f[0] == "k" and f[1].startswith("os.environ.") and f[1][11:] in _ENV_WRITES:
                self._env_write(node, f[1][11:])
            elif f[0] == "g" and args:
                out |= self._attr(args[0], f[1].split(".")[0], node)
            elif f[0] == "d.get":
                if consts and consts[0]:
                    out.add(("k", f"{f[1]}.{consts[0]}" if f[1] else consts[0]))
                else:
                    out.add(("w", f[1]))
                    self._event("namespace", f[1] or "the notebook's", node)
            elif f[0] == "f":
                if given is None:
                    given = self._given(node, args, kwargs)
                if isinstance(self.defs[f[1]].node, ast.ClassDef):
                    out.add(f)  # the new instance: what its class holds
                elif given is None:
                    out.add(("p", f[1], None))  # what it gives: its body, with nothing known given
                if given is not None:  # what this call makes: the body with these arguments (see reach)
                    out.add(self._made(f[1], given))
            elif f[0] == "k":
                _, obj = resolve(f[1])
                if isinstance(obj, type):
                    out.add(("i", f[1]))  # an instance of a library class
                elif isinstance(obj, _DESCRIPTORS):  # a method of a library class (it may give back its object)
                    owner = f[1].rpartition(".")[0]
                    if isinstance(resolve(owner)[1], type):
                        out.add(("i", owner))
                elif obj is _MISSING or not callable(obj) or not isinstance(obj, _ROUTINES):
                    out.add(f)  # something unknown
            elif f[0] in ("w", "w*", "i", "p"):  # `p` : what calling what a call made gives
                out.add(f)
        if not func or any(f[0] not in ("f", "p") for f in func):
            values = list(node.args) + [k.value for k in node.keywords]
            handed = frozenset().union(*(a for v, a in zip(values, list(args) + list(kwargs))
                                         if not isinstance(v.value if isinstance(v, ast.Starred) else v, ast.Call)))
            out |= {self._made(a[1], a[2]) for a in self._passed_on(everything, handed)}
        return frozenset(out)

    def _made(self, index: int, given: tuple) -> tuple:
        """``("p", index, given)``, what a call of the learner's function ``index`` makes,
        kept for :meth:`finish`."""
        call = ("p", index, given)
        self.calls.setdefault(call)
        return call

    @staticmethod
    def _passed_on(everything: frozenset, handed: frozenset) -> set:
        """A function of the learner's handed to code that is not its own (``map(pick,
        [F])``, ``functools.partial(pick, F)``) may be called with any of the other things
        that code was given: what such a call makes (see :meth:`reach`). ``handed``: what
        the arguments that are not themselves calls hold (``allclose(f(x), y)`` hands on
        what ``f`` gave, not ``f``). Only what the learner's code reached of a library's is
        followed so (:data:`_REACHED`): its own functions and values it hands on are read
        where they are made."""
        out = set()
        reached = frozenset(x for x in everything if x[0] in _REACHED)
        for a in handed:
            if a[0] == "f" and reached:
                out.add(("p", a[1], ((), reached, ())))
        return out

    @staticmethod
    def _given(node: ast.Call, args: list, kwargs: list):
        """What a call gives each parameter of a function of the learner's: ``(positional,
        unplaced, keywords)``, the atoms of each positional argument in order, of ``*xs`` and
        ``**kw`` (any parameter may get them) and of each named argument; None when it gives
        nothing known. Results of the learner's calls flow on their own, and strings only
        name things where the analysis reads them as literals."""
        keep = lambda atoms: frozenset(a for a in atoms if a[0] not in ("p", "s"))  # noqa: E731
        positional, unplaced, keywords, placed = [], set(), [], True
        for value, atoms in zip(node.args, args):
            placed = placed and not isinstance(value, ast.Starred)  # after `*xs` no place is known
            if placed:
                positional.append(keep(atoms))
            else:
                unplaced |= keep(atoms)
        for k, atoms in zip(node.keywords, kwargs):
            if k.arg is None:
                unplaced |= keep(atoms)
            elif keep(atoms):
                keywords.append((k.arg, keep(atoms)))
        while positional and not positional[-1]:
            positional.pop()
        if not positional and not unplaced and not keywords:
            return None
        return tuple(positional), frozenset(unplaced), tuple(sorted(keywords))

    def _mutation(self, node: ast.Call, func: frozenset, args: list, kwargs: list, scope: Scope, collect) -> None:
        """A call may store what it is given in its object or in one of its arguments
        (``box.append(f)``, ``table.update(g=f)``, ``list.append(box, f)``,
        ``operator.setitem(box, k, f)``, ``heapq.heappush(box, f)``, a helper of the
        learner's own that appends to a list it is given): what they hold flows into the
        object and into every argument that is plain data (not a function, class or
        module), so that reading the container gives it back."""
        everything = frozenset().union(*args, *kwargs) if (args or kwargs) else frozenset()
        for f_atom in func:  # a bound method kept in a variable or a partial: `add(f)`
            if f_atom[0] == "m" and everything:
                self._store_in(f_atom[1], everything, scope, elsewhere=True)
        for f_atom in everything:  # one passed on: `map(box.append, fs)`
            if f_atom[0] == "m":
                self._store_in(f_atom[1], everything, scope, elsewhere=True)
        if not everything:
            return
        values = list(node.args) + [k.value for k in node.keywords]
        if func and all(self._stores_nothing(f) for f in func):
            values = []  # a pure builtin or one of PyTorch's compiled functions: it computes on tensors
        atoms = list(args) + list(kwargs)  # aligned with values
        targets = []
        if isinstance(node.func, ast.Attribute):
            targets.append((node.func.value, everything, True))
        for i, v in enumerate(values):
            others = frozenset().union(*(a for j, a in enumerate(atoms) if j != i)) if len(atoms) > 1 else frozenset()
            targets.append((v, others, False))
        for target, stored, receiver in targets:
            if not stored or not isinstance(target, (ast.Name, ast.Attribute, ast.Subscript)):
                continue
            held = self._quiet_expr(target, scope)
            if self._module_like(held) or (not receiver and any(a[0] == "f" for a in held)):
                continue  # a module's function, a builtin, or (as an argument) a function or class
            self._store_in(self._receiver_key(target), stored, scope)

    @staticmethod
    def _stores_nothing(atom) -> bool:
        """Whether calling ``atom`` never stores one of its arguments in another: the
        builtins of :data:`_PURE_BUILTINS` and PyTorch's public compiled functions
        (``torch.rand(n, generator=g)`` puts ``g`` in nothing)."""
        if atom[0] == "b":
            return atom[1] in _PURE_BUILTINS
        if atom[0] != "k":
            return False
        canon, obj = resolve(atom[1])
        parts = canon.split(".")
        return isinstance(obj, types.BuiltinFunctionType) and parts[0] == "torch" \
            and not any(p.startswith("_") for p in parts)

    def _quiet_expr(self, node, scope: Scope) -> frozenset:
        """What ``node`` holds, read again without recording it (a name, an attribute, an item)."""
        if not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
            return frozenset()
        saved, self._recording = self._recording, False
        try:
            return self._expr(node, scope, None)
        finally:
            self._recording = saved

    @staticmethod
    def _module_like(atoms: frozenset) -> bool:
        return any(a[0] == "b" or (a[0] == "k" and isinstance(resolve(a[1])[1], types.ModuleType)) for a in atoms)

    @staticmethod
    def _receiver_key(node) -> tuple:
        if isinstance(node, ast.Name):
            return ("name", node.id)
        if isinstance(node, ast.Attribute):
            return ("attr", node.attr)
        return ("item", "[]")

    def _store_in(self, key: tuple, stored: frozenset, scope: Scope, elsewhere: bool = False) -> None:
        """What a method call stores in its receiver (``key``: a name, an attribute name or
        any container's items) flows into it; ``elsewhere``: through a bound method called
        where the receiver's name may mean another binding (any container's items then)."""
        kind, name = key
        if kind == "name":
            if scope.module is not None:
                self.env[name] = self.env.get(name, frozenset()) | stored
                self.ever[name] = self.ever.get(name, frozenset()) | stored
            elif any(name in s.names for s in self._local_scopes(scope)) and name not in scope.globals_:
                target = next(s for s in self._local_scopes(scope) if name in s.names)
                target.names[name] = target.names[name] | stored
            else:
                self.global_writes[name] = self.global_writes.get(name, frozenset()) | stored
            if elsewhere:
                self.attr_store["[]"] = self.attr_store.get("[]", frozenset()) | stored
        else:
            self.attr_store[name] = self.attr_store.get(name, frozenset()) | stored

    @staticmethod
    def _local_scopes(scope: Scope):
        s = scope
        while s is not None and s.module is None:
            yield s
            s = s.parent

    def _env_write(self, node: ast.Call, method: str) -> None:
        """``os.environ.update(...)``, ``.setdefault(...)``, ``.pop(...)`` ...: which variables."""
        keys: list[str | None] = []
        if method in ("setdefault", "pop", "__setitem__", "__delitem__") and node.args:
            first = node.args[0]
            keys.append(first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None)
        elif method in ("update", "__ior__"):
            for a in node.args:
                if isinstance(a, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str)
                                                   for k in a.keys):
                    keys += [k.value for k in a.keys]
                else:
                    keys.append(None)
            keys += [k.arg for k in node.keywords]
        if not keys:
            keys.append(None)
        for key in keys:
            self._event("sets", f"os.environ[{key!r}]" if key is not None else "os.environ[...]", node)

    def _code_strings(self, node: ast.Call, runner, scope: Scope, collect) -> None:
        """The code a ``timeit``-like call runs: a literal string is read as code of this
        line; one built at run time is code the grader cannot read."""
        line = self._line(node)
        for position, keyword in runner:
            arg = node.args[position] if position is not None and position < len(node.args) else next(
                (k.value for k in node.keywords if k.arg == keyword), None)
            if arg is None or isinstance(arg, ast.Lambda):
                continue
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                self._nested(arg.value, lambda _k: line, scope, collect, ipython=False)
                continue
            atoms = self._expr(arg, scope, collect)
            if not atoms or any(a[0] == "s" for a in atoms):
                self._event("code", f"{keyword} of {ast.unparse(node.func)[:60]}", node)

    def _exec_string(self, text: str, node, scope: Scope, collect, mode: str = "exec") -> None:
        line = self._line(node)
        self._nested(text, lambda _k: line, scope, collect, mode=mode, ipython=False)

    def _nested(self, text: str, at: Callable[[int], int], scope: Scope, collect, mode: str = "exec",
                ipython: bool = True) -> frozenset:
        """Read ``text``, code that a magic, ``exec`` or an annotation runs, as code of this
        cell: ``at(k)`` is the cell's line of its line ``k``. Returns what its last
        expression can give."""
        if self._nesting >= MAX_NESTING:
            raise TooComplex(f"code nested in strings and magics more than {MAX_NESTING} deep")
        if ipython:
            tree, lines = read(text)
        else:
            try:
                tree, lines = ast.parse(text, mode=mode), _same_line
            except Exception:  # noqa: BLE001 - it does not run either
                return frozenset()
        if tree is None:
            return frozenset()
        saved = self._lines
        self._lines = lambda k: at(lines(k))
        self._nesting += 1
        try:
            if isinstance(tree, ast.Expression):
                return self._expr(tree.body, scope, collect)
            last = frozenset()
            for i, s in enumerate(tree.body):
                if i == len(tree.body) - 1 and isinstance(s, ast.Expr):
                    last = self._expr(s.value, scope, collect)
                else:
                    self._stmt(s, scope, collect)
            return last
        finally:
            self._nesting -= 1
            self._lines = saved

    def _magic(self, node: ast.Call, scope: Scope, collect) -> frozenset | None:
        """An IPython magic or shell command as IPython's transformer writes it
        (``get_ipython().run_line_magic('timeit', 'gelu(x)')``), else None: recorded (as
        ``%name``, or a name that says what it does: ``config InlineBackend``, ``writefile``
        with a plain file name), and the Python it runs read as code of this cell (see
        :func:`magic_code`, :func:`expansions`). Returns what the magic can give."""
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr in _MAGIC_CALLS and isinstance(f.value, ast.Call)
                and isinstance(f.value.func, ast.Name) and f.value.func.id == "get_ipython"):
            return None
        consts = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in node.args]
        where = self._line(node)
        if f.attr in ("system", "getoutput"):
            self.magics.append(("!", self._cell, where))
            return frozenset()
        cell_magic = f.attr == "run_cell_magic"
        if len(consts) < (3 if cell_magic else 2) or None in consts or node.keywords:
            self.magics.append(("(a magic called with computed arguments)", self._cell, where))
            return frozenset()
        name, line = consts[0], consts[1]
        body = consts[2] if cell_magic else None
        on_line = lambda _k: where  # noqa: E731
        fields = expansions(line) if name not in NO_VAR_EXPAND else []
        for text in fields:  # IPython evaluates them in the notebook's namespace
            self._nested(text, on_line, scope, collect, mode="eval", ipython=False)
        label = name
        if name == "load_ext":
            label = f"load_ext {line.strip()}"
        elif name == "config":
            label = self._config(line, fields, where, scope, collect)
        elif name in ("writefile", "file"):
            target = writefile_name(line) if not fields else None
            plain = target is not None and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.\- ]*", target) is not None
            label = "writefile" if plain else "writefile (a path the learner's folder does not hold)"
        elif name in SHOW_MAGICS and not fields:
            self._nested(line.strip(), on_line, scope, collect, mode="eval", ipython=False)
        out = frozenset()
        for code, first in magic_code(name, line, body):
            at = (lambda k: where + k) if first else (lambda k: where + k - 1)
            last = self._nested(code, at, scope, collect)
            if name == "time":
                out |= last  # `y = %time expr` binds the value of expr
        self.magics.append((label, self._cell, where))
        return out

    def _config(self, line: str, fields: list, where: int, scope: Scope, collect) -> str:
        """``%config Class.trait = value`` runs ``cfg.<line>`` in the notebook's namespace
        (with the magic's own variables, ``self`` among them, in reach) and sets a trait of
        the shell that runs the answer. A display setting given a literal is all an answer
        needs."""
        text = line.strip()
        if "=" not in text:
            return "config (shows a setting)"
        try:
            tree = ast.parse("cfg." + text)
        except Exception:  # noqa: BLE001 - nothing runs
            return "config"
        self._nested("cfg." + text, lambda _k: where, scope, collect, ipython=False)
        s = tree.body[0] if len(tree.body) == 1 else None
        if not fields and isinstance(s, ast.Assign) and len(s.targets) == 1:
            t = s.targets[0]
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Attribute) \
                    and isinstance(t.value.value, ast.Name) and t.value.value.id == "cfg" \
                    and t.value.attr == "InlineBackend":
                try:
                    ast.literal_eval(s.value)
                    return "config InlineBackend"
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    pass
        return "config"


def _label(atom) -> str:
    return atom[1] if atom[0] != "b" else str(atom[1])
