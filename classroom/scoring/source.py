"""What the names in a learner's code can denote, read from its source in the grader.

:class:`Program` reads the answer cells (Python's ``ast``, after IPython's own input
transformation) the way they run: top to bottom, module-level bindings in order
(:meth:`Program.boundary` keeps what every name is bound to where a graded cell runs),
and tracks what every name, attribute, container and call result can hold:

- objects the grader itself knows, by the dotted path they were reached by
  (``("k", "torch.nn.functional.gelu")``), followed through ``import ... as``, ``from
  ... import``, assignment, containers, default arguments, ``getattr`` with a constant
  name, ``operator.attrgetter``, ``vars(m)[...]`` / ``m.__dict__[...]``,
  ``sys.modules[...]``, ``importlib.import_module`` and ``__import__``; a module reached
  through another module's attribute is named by its own name (``logging.threading``
  is ``threading``);
- the learner's own functions, lambdas and classes (``("f", index)``), whose bodies are
  read with the bindings of the moment they would run (:meth:`Program.reach`: what a
  function can touch, transitively through the learner's functions, classes, default
  arguments, attributes set on objects and top-level aliases);
- constant strings (for computed names) and what a computed ``getattr`` may give
  (``("w", path)``: any attribute of ``path``).

Every object path and construct met anywhere is recorded with the cell and line it is
on (:attr:`Program.uses`, :attr:`Program.events`); which of them matter is decided by
:mod:`classroom.scoring.shortcuts`. The analysis is conservative: a value flows into
whatever a call returns, so a name that *may* denote something is taken to.

Written by hand: the kept analysers (astroid's inference, type checkers) infer from
source files and cannot see into PyTorch's C extension, where ``F.gelu`` lives; here
every path is resolved against the real objects of the trusted grader
(:func:`resolve`), without running any learner code.
"""
from __future__ import annotations

import ast
import builtins
import functools
import importlib
import sys
import types
import warnings
from dataclasses import dataclass, field

# top-level packages the resolver may import in the grader (imported by the grader anyway,
# or harmless): a learner-named module outside these is never imported here
IMPORTABLE = {"torch", "andrea_ref", "numpy", "math", "typing", "collections", "functools", "itertools",
              "operator", "dataclasses", "enum", "warnings", "time", "random", "abc", "contextlib",
              "copy", "statistics", "string", "re", "json", "os", "sys", "gc", "ctypes", "importlib",
              "builtins", "inspect", "threading", "_thread", "multiprocessing", "concurrent", "subprocess",
              "signal", "atexit", "socket", "select", "traceback", "types", "weakref", "marshal", "pickle",
              "asyncio", "io", "pathlib", "shutil", "tempfile", "logging", "queue", "IPython", "textwrap",
              "numbers", "decimal", "fractions", "__future__", "linecache", "dis", "code", "site", "pkgutil",
              "runpy", "sqlite3", "glob", "mmap", "faulthandler", "tracemalloc", "copyreg", "codecs", "base64"}
_MISSING = object()
_MAGIC_CALLS = {"run_line_magic", "run_cell_magic", "system", "getoutput"}


class TooComplex(Exception):
    """The answer's code is beyond what the analysis reads (nesting, size)."""


MAX_DEFS = 5000  # learner functions, lambdas and classes read, nested copies included


def _import(name: str):
    if name in sys.modules:
        return sys.modules[name]
    if name.split(".")[0] not in IMPORTABLE:
        return _MISSING
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.import_module(name)
    except Exception:  # noqa: BLE001 - no such module: the path stays a name
        return _MISSING


@functools.lru_cache(maxsize=65536)
def resolve(path: str):
    """(canonical path, object) for a dotted ``path``, or (path, MISSING) when the
    grader cannot resolve it. A module met on the way is named by its own name."""
    parts = path.split(".")
    obj = _import(parts[0])
    if obj is _MISSING:
        return path, _MISSING
    canon = [parts[0]]
    for k, part in enumerate(parts[1:], start=1):
        try:
            if isinstance(obj, types.ModuleType):
                value = getattr(obj, part, _MISSING)
                if value is _MISSING:
                    value = _import(f"{obj.__name__}.{part}")
            else:
                value = _static_attr(obj, part)
        except Exception:  # noqa: BLE001 - a path that does not resolve stays a name
            value = _MISSING
        if value is _MISSING:
            return ".".join(canon + parts[k:]), _MISSING
        obj = value
        canon = obj.__name__.split(".") if isinstance(obj, types.ModuleType) else canon + [part]
    return ".".join(canon), obj


MISSING = _MISSING


def _static_attr(obj, name):
    import inspect  # the grader's own use, to read attributes without running properties
    value = inspect.getattr_static(obj, name)
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    return value


@dataclass
class Def:
    node: ast.AST  # FunctionDef, AsyncFunctionDef, Lambda or ClassDef
    scope: "Scope"  # where its free names are looked up
    cell: int
    name: str
    extra: frozenset = frozenset()  # defaults and decorators, evaluated where it was defined
    members: dict = field(default_factory=dict)  # a class: its namespace


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

    def __init__(self):
        self.env: dict[str, frozenset] = {}  # module bindings now (flow-sensitive)
        self.ever: dict[str, frozenset] = {}  # every binding a module name ever had
        self.defs: list[Def] = []
        self.attr_store: dict[str, frozenset] = {}  # attribute name -> what was stored under it
        self.global_writes: dict[str, frozenset] = {}  # bound from inside functions (`global`)
        self.uses: list[tuple[tuple, int, int]] = []  # (atom, cell, line)
        self.events: list[tuple[str, str, int, int]] = []  # (kind, detail, cell, line)
        self.magics: list[tuple[str, int, int]] = []
        self.boundaries: list[dict] = []
        self._cell = 0
        self._recording = True
        self._reach: dict = {}
        self._loops = 0
        self._module_scope = Scope({}, None, module=self.env)

    # ----------------------------------------------------------------- module level
    def run(self, tree: ast.Module, cell: int, record: bool = True) -> None:
        """Read one cell's module-level statements; ``record``: note what it uses
        (False for the instructor's set-up cells)."""
        self._cell, self._recording = cell, record
        self._module_scope.module = self.env
        self._block(tree.body, self._module_scope)
        self._recording = True

    def boundary(self) -> int:
        """Keep the bindings of this moment (where a graded cell runs); returns its index."""
        self.boundaries.append(dict(self.env))
        return len(self.boundaries) - 1

    def finish(self) -> None:
        """Read every function body once, with every binding any name ever had, so that
        what any code could reach is recorded wherever it is."""
        done, i = set(), 0
        while i < len(self.defs):
            if i not in done:
                done.add(i)
                self._body(i, self.ever)
            i += 1

    def reach(self, atoms: frozenset, boundary: int) -> frozenset:
        """Everything ``atoms`` can touch when called where ``boundary`` was kept."""
        env = self.boundaries[boundary]
        seen, todo, out = set(), list(atoms), set()
        while todo:
            a = todo.pop()
            out.add(a)
            if a[0] == "f" and a[1] not in seen:
                seen.add(a[1])
                key = (a[1], boundary)
                if key not in self._reach:
                    self._reach[key] = frozenset()  # recursion: what is known so far
                    self._reach[key] = self._body(a[1], env)
                todo.extend(x for x in self._reach[key] if x not in out)
        return frozenset(out)

    # ----------------------------------------------------------------- bodies
    def _body(self, index: int, env: dict) -> frozenset:
        d = self.defs[index]
        saved = (self._recording, self._cell)
        self._recording, self._cell = True, d.cell
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
            args = d.node.args
            for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
                if a is not None:
                    scope.names[a.arg] = frozenset()
            for node in ast.walk(d.node):
                if isinstance(node, ast.Global):
                    scope.globals_.update(node.names)
            body = [ast.Return(d.node.body)] if isinstance(d.node, ast.Lambda) else d.node.body
            collect: set = set()
            for _ in range(2):  # names bound later in the body are seen by loops
                self._block(body, scope, collect)
            produced |= collect
        self._recording, self._cell = saved
        return frozenset(produced)

    # ----------------------------------------------------------------- statements
    def _add(self, d: Def) -> None:
        if len(self.defs) >= MAX_DEFS:
            raise TooComplex(f"more than {MAX_DEFS} functions, lambdas and classes (nested ones counted per use)")
        self.defs.append(d)

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
            self._event("attr", target.attr, target)
            self._store_attr(base, target.attr, value, target)
        elif isinstance(target, ast.Subscript):
            base = self._expr(target.value, scope, collect)
            self._expr(target.slice, scope, collect)
            key = target.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and any(a[0] == "g!" for a in base):
                self.global_writes[key.value] = self.global_writes.get(key.value, frozenset()) | value
            self._store_attr(base, "[]", value, target)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, value, scope, collect)

    def _store_attr(self, base: frozenset, attr: str, value: frozenset, node) -> None:
        self.attr_store[attr] = self.attr_store.get(attr, frozenset()) | value
        for a in base:
            if a[0] in ("k", "b", "d"):
                self._event("sets", f"{_label(a)}.{attr}" if attr != "[]" else f"{_label(a)}[...]", node)

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
        ex = lambda node: self._expr(node, scope, collect)  # noqa: E731
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            extra = frozenset().union(*[ex(d) for d in s.decorator_list]) if s.decorator_list else frozenset()
            if isinstance(s, ast.ClassDef):
                for b in s.bases + [k.value for k in s.keywords]:
                    extra |= ex(b)
                self._class_events(s)
                members = Scope({}, scope)
                d = Def(s, scope, self._cell, s.name, extra)
                self._add(d)
                idx = len(self.defs) - 1
                self._block(s.body, members, collect)
                d.members = dict(members.names)
                for name in members.names:  # methods see the module, not the class body
                    for a in members.names[name]:
                        if a[0] == "f" and self.defs[a[1]].scope is members:
                            self.defs[a[1]].scope = scope
                self._bind(ast.Name(s.name, ast.Store()), frozenset({("f", idx)}), scope, collect)
            else:
                extra |= self._defaults(s.args, scope, collect)
                self._add(Def(s, scope, self._cell, s.name, extra))
                self._bind(ast.Name(s.name, ast.Store()), frozenset({("f", len(self.defs) - 1)}), scope, collect)
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            self._import_stmt(s, scope, collect)
        elif isinstance(s, ast.Assign):
            value = ex(s.value)
            for t in s.targets:
                self._bind(t, value, scope, collect)
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
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

    def _defaults(self, args: ast.arguments, scope: Scope, collect) -> frozenset:
        out = frozenset()
        for d in args.defaults + [d for d in args.kw_defaults if d is not None]:
            out |= self._expr(d, scope, collect)
        return out

    def _class_events(self, node: ast.ClassDef) -> None:
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in (
                    "__del__", "__torch_function__", "__torch_dispatch__", "__init_subclass__", "__set_name__"):
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
                names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")] \
                    if mod is not _MISSING else []
                for n in names:
                    self._bind(ast.Name(str(n), ast.Store()), frozenset({("k", f"{s.module}.{n}")}), scope, collect)
                continue
            path = f"{s.module}.{alias.name}"
            self._use(("k", path), s)
            self._bind(ast.Name(alias.asname or alias.name, ast.Store()), frozenset({("k", path)}), scope, collect)

    # ----------------------------------------------------------------- expressions
    def _use(self, atom, node) -> None:
        if self._recording:
            self.uses.append((atom, self._cell, getattr(node, "lineno", 0)))

    def _event(self, kind: str, detail: str, node) -> None:
        if self._recording:
            self.events.append((kind, detail, self._cell, getattr(node, "lineno", 0)))

    def _out(self, atoms: frozenset, node, collect) -> frozenset:
        for a in atoms:
            if a[0] in ("k", "b", "w"):
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
            return self._out(scope.lookup(node.id, self), node, collect)
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
                self._event("attr", node.attr, node)
            return self._out(self._attr(base, node.attr), node, collect)
        if isinstance(node, ast.Call):
            return self._out(self._call(node, scope, collect), node, collect)
        if isinstance(node, ast.Subscript):
            base, key = ex(node.value), ex(node.slice)
            out = set(base)
            for a in base:
                if a[0] == "d":
                    for k in key:
                        if k[0] == "s":
                            out.add(("k", f"{a[1]}.{k[1]}" if a[1] else k[1]))
                    out.add(("w", a[1]))
            return self._out(frozenset(out) | self.attr_store.get("[]", frozenset()), node, collect)
        if isinstance(node, ast.Lambda):
            extra = self._defaults(node.args, scope, collect)
            self._add(Def(node, scope, self._cell, "<lambda>", extra))
            return self._out(frozenset({("f", len(self.defs) - 1)}), node, collect)
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

    def _attr(self, base: frozenset, attr: str) -> frozenset:
        out = set()
        for a in base:
            if a[0] == "k":
                path = f"{a[1]}.{attr}"
                canon, obj = resolve(path)
                out.add(("k", canon))
                if obj is _MISSING:
                    out.add(a)
                    out |= self.attr_store.get(attr, frozenset())
                if attr == "__dict__":
                    out.add(("d", a[1]))
                if canon == "sys.modules":  # a namespace whose keys are module names
                    out.add(("d", ""))
            elif a[0] == "b":
                pass  # an attribute of a builtin function: its internals are seen as an attribute name
            elif a[0] == "f":
                d = self.defs[a[1]]
                out |= d.members.get(attr, frozenset())
                out |= self.attr_store.get(attr, frozenset())
                out.add(a)
            elif a[0] == "d" and attr in ("get", "pop", "setdefault", "__getitem__"):
                out.add(("d.get", a[1]))
            elif a[0] == "w":
                out.add(a)
        if not base:
            out |= self.attr_store.get(attr, frozenset())
        return frozenset(out)

    def _call(self, node: ast.Call, scope: Scope, collect) -> frozenset:
        ex = lambda n: self._expr(n, scope, collect)  # noqa: E731
        if self._magic(node, scope, collect):
            return frozenset()
        func = ex(node.func)
        args = [ex(a) for a in node.args]
        kwargs = [ex(k.value) for k in node.keywords]
        everything = frozenset().union(*args, *kwargs) if (args or kwargs) else frozenset()
        # a name is constant only when written as a literal: anything computed is a computed name
        consts = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in node.args]
        out = set(everything)
        for f in func:
            name = f[1] if f[0] == "b" else (f[1][9:] if f[0] == "k" and f[1].startswith("builtins.") else None)
            if name in ("getattr", "hasattr", "setattr", "delattr") and len(args) >= 2:
                if consts[1] is None:
                    self._event("computed", name, node)
                    out |= {("w", x[1]) for x in args[0] if x[0] == "k"}
                    out |= args[0]
                elif name == "getattr":
                    out |= self._attr(args[0], consts[1])
                elif name in ("setattr", "delattr"):
                    self._store_attr(args[0], consts[1], args[2] if len(args) > 2 else frozenset(), node)
            elif name in ("vars",) and args:
                out |= {("d", x[1]) for x in args[0] if x[0] == "k"}
            elif name in ("globals", "locals", "vars"):
                out.add(("g!", "") if name == "globals" else ("d", ""))
            elif name in ("__import__",) and node.args and not consts[0]:
                self._event("computed", name, node)
            elif name == "__import__" and consts and consts[0]:
                out.add(("k", consts[0].split(".")[0]))
            elif name in ("exec", "eval") and consts and consts[0]:
                self._exec_string(consts[0], node, scope, collect)
            elif f[0] == "k" and f[1] in ("importlib.import_module", "operator.attrgetter",
                                          "operator.methodcaller") and node.args and not consts[0]:
                self._event("computed", f[1], node)
            elif f[0] == "k" and f[1] in ("importlib.import_module",) and consts and consts[0]:
                out.add(("k", consts[0]))
            elif f[0] == "k" and f[1] in ("operator.attrgetter", "operator.methodcaller") and consts and consts[0]:
                out.add(("g", consts[0]))
            elif f[0] == "g" and args:
                out |= self._attr(args[0], f[1].split(".")[0])
            elif f[0] == "d.get" and consts and consts[0]:
                out.add(("k", f"{f[1]}.{consts[0]}" if f[1] else consts[0]))
            elif f[0] == "f":
                out.add(f)
            elif f[0] == "k":
                _, obj = resolve(f[1])
                if obj is _MISSING or isinstance(obj, type) or not callable(obj) \
                        or type(obj).__name__ not in ("function", "builtin_function_or_method", "method"):
                    out.add(f)  # a class (an instance of it) or something unknown
            elif f[0] == "w":
                out.add(f)
        return frozenset(out)

    def _exec_string(self, text: str, node, scope: Scope, collect) -> None:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return
        for s in tree.body:
            ast.increment_lineno(s, getattr(node, "lineno", 1) - 1)
            self._stmt(s, scope, collect)

    def _magic(self, node: ast.Call, scope: Scope, collect) -> bool:
        """An IPython magic or shell command as IPython's transformer writes it
        (``get_ipython().run_line_magic('timeit', 'gelu(x)')``): recorded, and the code
        of the time and capture magics read as code of this cell."""
        f = node.func
        if not (isinstance(f, ast.Attribute) and f.attr in _MAGIC_CALLS and isinstance(f.value, ast.Call)
                and isinstance(f.value.func, ast.Name) and f.value.func.id == "get_ipython"):
            return False
        consts = [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None for a in node.args]
        if f.attr in ("system", "getoutput"):
            self.magics.append(("!", self._cell, node.lineno))
            return True
        name = consts[0] if consts else None
        if name == "load_ext" and len(consts) > 1:  # which extension is what matters
            name = f"load_ext {str(consts[1]).strip()}"
        self.magics.append((str(name), self._cell, node.lineno))
        code = consts[-1] if f.attr == "run_cell_magic" else (consts[1] if len(consts) > 1 else None)
        if name in ("time", "timeit", "capture", "prun") and code:
            words = code.split()
            for start in range(len(words) + 1):  # leading options such as -n 10 -r 3
                try:
                    tree = ast.parse(code if f.attr == "run_cell_magic" else " ".join(words[start:]))
                except SyntaxError:
                    continue
                for s in tree.body:
                    ast.increment_lineno(s, node.lineno - (0 if f.attr == "run_cell_magic" else 1))
                    self._stmt(s, scope, collect)
                break
        return True


def _label(atom) -> str:
    return atom[1] if atom[0] != "b" else str(atom[1])
