"""How :class:`~classroom.scoring.source.program.Program` reads statements: bindings,
definitions, branches and loops, imports, attributes set."""
from __future__ import annotations

import ast
import types

from .bindings import Def, Scope, TooComplex
from .objects import replaceable, resolve


MAX_DEFS = 5000  # learner functions, lambdas and classes read, nested copies included


class Statements:
    """The statement readers of :class:`Program`."""

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


def _label(atom) -> str:
    return atom[1] if atom[0] != "b" else str(atom[1])
