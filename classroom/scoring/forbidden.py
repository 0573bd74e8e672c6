"""A notebook's rule against shortcuts, for :mod:`.shortcuts`: :class:`Rule`, made from its
checks' ``Forbidden``, says which forbidden implementation a path that the answer reaches
denotes -- the library's (under ``torch``, by the rule's ATen words), ``andrea_ref``'s own
(the rule's reference files) or the checks' internal helpers (``andrea_ref/grading/``) --
itself, or as a member of a namespace reached by a computed name.
"""
from __future__ import annotations

import os
import re
import sys
import types

import andrea_ref

from .source import MISSING, peek, resolve

_PKG = os.path.dirname(os.path.abspath(andrea_ref.__file__))


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(text).lower())


class Rule:
    """The notebook's forbidden implementations (from its checks' ``Forbidden``)."""

    def __init__(self, forbidden: dict):
        self.words = tuple(_norm(w) for w in forbidden.get("aten_words") or ())
        files = [os.path.join(_PKG, f) for f in forbidden.get("ref_files") or ()]
        self.files = tuple(files) + (os.path.join(_PKG, "grading") + os.sep,)
        self._wild: dict[str, str | None] = {}

    def _in_files(self, filename) -> bool:
        if not isinstance(filename, str):
            return False
        filename = os.path.abspath(filename)
        return any(filename == f or (f.endswith(os.sep) and filename.startswith(f)) for f in self.files)

    def forbidden(self, path: str) -> str | None:
        """The name of the forbidden implementation ``path`` denotes, else None."""
        canon, obj = resolve(path)
        root = canon.split(".")[0]
        names = [p for p in canon.split(".") if p]
        if obj is not MISSING:
            if self._in_files(_source_file(obj)):
                return canon
            names += [v for v in (peek(obj, a) for a in ("__name__", "__qualname__", "_qualified_op_name"))
                      if isinstance(v, str)]
            module = peek(obj, "__module__")
            module = module if isinstance(module, str) else ""
            if not (root == "torch" or module.startswith("torch")):
                return None
        elif root == "andrea_ref":
            mods = {os.path.splitext(os.path.relpath(f, _PKG))[0].replace(os.sep, ".").rstrip(".") for f in self.files}
            return canon if any(canon.startswith(f"andrea_ref.{m}") for m in mods if m) else None
        elif root != "torch":
            return None
        if self.words and any(w in _norm(n) for n in names for w in self.words):
            return canon
        return None

    def _named_like(self, name) -> bool:
        return isinstance(name, str) and any(w in _norm(name) for w in self.words)

    def forbidden_member(self, path: str, deep: bool = False) -> str | None:
        """For ``getattr(namespace, <computed>)``: a forbidden member of the namespace;
        ``deep``: of the namespace or of any module below it the grader has imported (what
        further attributes of such a member can reach)."""
        key = (path, deep)
        if key not in self._wild:
            canon, obj = resolve(path)
            hit = None
            if obj is not MISSING:
                spaces = [(canon, obj)]
                if deep and isinstance(obj, types.ModuleType):
                    spaces += [(n, m) for n, m in sorted(sys.modules.items())
                               if n.startswith(canon + ".") and isinstance(m, types.ModuleType)][:5000]
                for name, space in spaces:
                    hit = self._member_of(name, space)
                    if hit:
                        break
            self._wild[key] = hit
        return self._wild[key]

    def _member_of(self, canon: str, obj) -> str | None:
        space = peek(obj, "__dict__")
        if not isinstance(space, (dict, types.MappingProxyType)):
            return None
        names = [n for n in list(space)[:20000] if isinstance(n, str)]
        if canon.split(".")[0] == "torch" and self.words and not any(w in _norm(canon) for w in self.words):
            # the names decide under torch: look closer only at members named like the rule, by
            # the name they are kept under or their own
            names = [n for n in names if self._named_like(n) or self._named_like(peek(space.get(n), "__name__"))]
        return next((h for h in (self.forbidden(f"{canon}.{n}") for n in names) if h), None)


def _source_file(obj):
    for _ in range(4):
        inner = peek(obj, "func") or peek(obj, "__func__")
        if inner is None or inner is obj:
            break
        obj = inner
    code = peek(obj, "__code__")
    if isinstance(code, types.CodeType):
        return code.co_filename
    if isinstance(obj, type):
        name = peek(obj, "__module__")
        mod = sys.modules.get(name) if isinstance(name, str) else None
        return peek(mod, "__file__") if isinstance(mod, types.ModuleType) else None
    if isinstance(obj, types.ModuleType):
        return peek(obj, "__file__")
    return None
