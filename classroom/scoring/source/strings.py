"""Code that runs from a string, read as code of the cell it is in: magics, literal
``exec``/``eval`` strings, ``timeit`` statements, ``%config`` values."""
from __future__ import annotations

import ast
import re
from typing import Callable

from .bindings import Scope, TooComplex
from .text import expansions, magic_code, read, same_line, writefile_name


_MAGIC_CALLS = {"run_line_magic", "run_cell_magic", "system", "getoutput"}
# magics IPython runs without expanding ``{expression}`` and ``$name`` in their line
# (IPython.core.magic.no_var_expand); every other magic's line is expanded, which runs code
NO_VAR_EXPAND = {"time", "timeit", "prun", "debug"}
# magics that show an object named in their line (``gelu?`` is ``%pinfo gelu``)
SHOW_MAGICS = {"pinfo", "pinfo2", "pdef", "pdoc", "psource", "pfile", "page"}
MAX_NESTING = 12  # magic bodies, exec'd strings and annotations read inside one another


class CodeStrings:
    """The readers of code in strings of :class:`Program`."""

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
                tree, lines = ast.parse(text, mode=mode), same_line
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
