"""How :class:`~classroom.scoring.source.program.Program` reads expressions and looks up
attributes."""
from __future__ import annotations

import ast

from .bindings import Def, Scope
from .objects import MISSING, REROOT, extensible, resolve


# methods that store their arguments in their object, when kept or passed on as values
_MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault", "__setitem__", "put", "put_nowait",
             "appendleft", "extendleft", "push", "register", "__iadd__", "__ior__", "send"}


class Expressions:
    """The expression readers of :class:`Program`."""

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
                if obj is not MISSING or extensible(a[1]):
                    out.add(("k", canon))
                if obj is MISSING:
                    out.add(a)
                    out |= self.attr_store.get(attr, frozenset())
                    if attr in REROOT and resolve(a[1].split(".")[0])[1] is MISSING:
                        out.add(("k", attr))  # a module the grader does not know, holding one it does
                if attr == "__dict__":
                    out.add(("d", a[1]))
                if canon == "sys.modules":  # a namespace whose keys are module names
                    out.add(("d", ""))
            elif a[0] == "i":  # an instance of a library class: its class's attribute, or its own
                canon, obj = resolve(f"{a[1]}.{attr}")
                if obj is not MISSING:
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
