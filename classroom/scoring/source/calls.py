"""How :class:`~classroom.scoring.source.program.Program` reads a call: the callee, what
its arguments may be stored in, and what it returns."""
from __future__ import annotations

import ast
import types

from .bindings import Scope
from .objects import DESCRIPTORS, MISSING, ROUTINES, resolve


# calls that run a code string: the path and the (position, keyword) of each code argument
CODE_STRINGS = {
    "timeit.timeit": ((0, "stmt"), (1, "setup")), "timeit.repeat": ((0, "stmt"), (1, "setup")),
    "timeit.Timer": ((0, "stmt"), (1, "setup")),
    "torch.utils.benchmark.Timer": ((0, "stmt"), (1, "setup"), (None, "global_setup")),
    "torch.utils.benchmark.utils.timer.Timer": ((0, "stmt"), (1, "setup"), (None, "global_setup")),
}
# builtins that never store one argument in another (what they are given flows into their result)
_PURE_BUILTINS = {"isinstance", "issubclass", "len", "print", "repr", "str", "int", "float", "bool", "complex",
                  "abs", "round", "divmod", "pow", "hash", "id", "type", "callable", "range", "enumerate", "zip",
                  "reversed", "sorted", "min", "max", "sum", "any", "all", "list", "tuple", "set", "frozenset",
                  "dict", "iter", "next", "format", "chr", "ord", "bin", "hex", "oct", "ascii", "slice",
                  "hasattr", "map", "filter", "bytes", "bytearray"}
# methods of os.environ that change it
_ENV_WRITES = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__"}
# what a function handed to library code is followed with (see Program._passed_on): objects and
# namespaces of a library's, getattr and the like, bound mutators
_REACHED = ("k", "w", "w*", "d", "d.get", "g", "g!", "b", "m")


class Calls:
    """The call readers of :class:`Program`."""

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
                elif isinstance(obj, DESCRIPTORS):  # a method of a library class (it may give back its object)
                    owner = f[1].rpartition(".")[0]
                    if isinstance(resolve(owner)[1], type):
                        out.add(("i", owner))
                elif obj is MISSING or not callable(obj) or not isinstance(obj, ROUTINES):
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
