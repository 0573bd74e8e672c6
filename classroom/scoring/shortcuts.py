"""The rules against shortcuts, decided on the answer's source in the grader.

The answer server reports what ran inside it (the ATen operations, the forbidden
functions entered), but code in that process can hide or forge any of it. So the
rules are decided here, from the answer cells' source, read by
:class:`classroom.scoring.source.Program`, which tracks what every name can denote:

- a **shortcut**: a forbidden implementation of the notebook's operation reached from
  the graded function, as it is bound where each graded cell runs: the library's
  (``F.gelu``, ``nn.LayerNorm``, ``torch.ops.aten.gelu``, PyTorch's Python references
  in ``torch._refs`` and ``torch._decomp``), ``andrea_ref``'s own, or the checks'
  internal reference helpers, whatever name, alias, container or default argument it
  is reached through. Calling it in the learner's own test code is fine (comparing
  with ``F.gelu`` in a test cell is what a careful learner does);
- **machinery**: code that reaches for what no answer to these exercises needs,
  anywhere in the cells the answer server runs: the grading package's and the
  grader's internals, PyTorch's dispatcher and internals (``torch._C``, ``torch.ops``,
  ``torch.library``, ``torch.overrides``, private modules), threads, processes and
  executors, signal handlers, ``atexit`` and finalizers, ``sys.modules``, frames,
  ``gc``, ``ctypes``, ``importlib``, ``builtins``, code objects and function
  internals, ``exec``/``eval``/``compile``/``__import__``, computed attribute names,
  replacing attributes of modules and classes it did not define, shell commands and
  magics other than the harmless ones. A submission that does is held for review;
- **notes**: file access (``open``, ``pathlib``, ``sqlite3``...), harmless to the
  grade (the sandbox shows nothing worth reading) but worth a look.

:func:`analyse` returns all three with the cell, line and code of each.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from IPython.core.inputtransformer2 import TransformerManager

import andrea_ref

from .source import MISSING, Program, TooComplex, resolve

# modules no answer needs at all
WHOLE = {"gc", "ctypes", "_ctypes", "importlib", "builtins", "inspect", "threading", "_thread",
         "multiprocessing", "concurrent", "subprocess", "signal", "_signal", "atexit", "socket",
         "_socket", "select", "selectors", "mmap", "fcntl", "pty", "resource", "marshal", "pickle",
         "_pickle", "copyreg", "dis", "code", "codeop", "site", "zipimport", "pkgutil", "runpy",
         "ipykernel", "zmq", "jupyter_client", "traitlets", "faulthandler", "tracemalloc", "asyncio",
         "__main__", "classroom", "_imp", "posix", "nt", "_posixsubprocess", "_weakref", "_io",
         "sysconfig", "_operator", "_functools", "_collections", "_abc", "_warnings", "gc"}
# modules of which only these names are honest
ALLOWED = {
    "sys": {"version", "version_info", "platform", "float_info", "int_info", "maxsize", "byteorder",
            "getrecursionlimit", "setrecursionlimit", "stdout", "stderr", "exc_info", "implementation",
            "hexversion", "executable", "argv", "getsizeof", "float_repr_style", "exit"},
    "os": {"environ", "path", "getcwd", "cpu_count", "sep", "linesep", "name", "getpid", "getenv",
           "listdir", "makedirs", "mkdir", "remove", "unlink", "rename", "replace", "stat", "walk",
           "scandir", "devnull", "curdir", "pardir", "extsep", "pathsep", "fspath", "urandom"},
    "types": {"SimpleNamespace", "MappingProxyType", "NoneType", "GenericAlias", "EllipsisType",
              "NotImplementedType", "UnionType", "BuiltinFunctionType", "BuiltinMethodType"},
    "weakref": {"ref", "WeakKeyDictionary", "WeakValueDictionary", "WeakSet", "proxy"},
    "traceback": {"print_exc", "format_exc", "print_exception", "format_exception",
                  "format_exception_only", "print_tb", "format_tb", "TracebackException"},
    "IPython": {"display"},
}
TORCH_MACHINERY = ("torch.ops", "torch.library", "torch.overrides", "torch.fx", "torch.multiprocessing",
                   "torch.utils.cpp_extension", "torch.utils.hooks", "torch.jit._state")
GRADING_PUBLIC = re.compile(r"^(check_\w+|report_\w+|GradingError|ERROR_NAME|failure_lines)$")
# attributes through which code, frames and function internals are reached
DUNDERS = {"__code__", "__globals__", "__closure__", "__dict__", "__class__", "__bases__", "__base__",
           "__mro__", "__subclasses__", "__builtins__", "__func__", "__self__", "__wrapped__",
           "__defaults__", "__kwdefaults__", "__getattribute__", "__setattr__", "__delattr__",
           "__import__", "__loader__", "__spec__", "__reduce__", "__reduce_ex__", "__traceback__",
           "__objclass__", "__module__", "__torch_function__", "__torch_dispatch__", "__subclasshook__",
           "__init_subclass__", "__class_getitem__", "__getstate__", "__setstate__"}
FRAME_ATTRS = {"tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "f_trace",
               "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "co_code", "co_consts", "co_names",
               "cell_contents", "mro"}
BUILTIN_MACHINERY = {"exec", "eval", "compile", "__import__", "globals", "locals", "vars", "breakpoint",
                     "memoryview", "__build_class__"}
# where replacing an attribute changes what others run
GUARDED_ROOTS = {"torch", "andrea_ref", "builtins", "sys", "os", "math", "json", "struct", "socket", "io",
                 "types", "functools", "operator", "IPython", "numpy", "warnings", "copy"} | WHOLE
HARMLESS_MAGICS = {"time", "timeit", "matplotlib", "capture", "pinfo", "pinfo2", "precision", "who", "whos",
                   "who_ls", "autoreload", "reset", "xmode", "pdb", "page", "pprint", "lsmagic", "magic",
                   "prun", "load_ext autoreload"}
NOTE_ROOTS = {"pathlib", "shutil", "tempfile", "glob", "sqlite3", "urllib", "http", "requests", "io"}
NOTE_OS = {"listdir", "makedirs", "mkdir", "remove", "unlink", "rename", "replace", "walk", "scandir", "stat"}
_PKG = os.path.dirname(os.path.abspath(andrea_ref.__file__))


@dataclass
class Finding:
    kind: str  # "shortcut", "machinery" or "note"
    what: str  # what it reaches, in the grader's words
    cell: int  # the notebook's cell number (1 = its first cell)
    line: int
    code: str  # that line of the cell

    def text(self) -> str:
        return f"cell {self.cell}, line {self.line}: `{self.code}`: {self.what}"


@dataclass
class Analysis:
    machinery: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    shortcuts: dict[int, list[Finding]] = field(default_factory=dict)  # per graded cell (index in the plan)


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
            names += [str(getattr(obj, a, "")) for a in ("__name__", "__qualname__", "_qualified_op_name")]
            module = str(getattr(obj, "__module__", "") or "")
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

    def forbidden_member(self, path: str) -> str | None:
        """For ``getattr(namespace, <computed>)``: a forbidden member of the namespace."""
        if path not in self._wild:
            canon, obj = resolve(path)
            hit = None
            if obj is not MISSING:
                try:
                    names = list(vars(obj))[:5000]
                except TypeError:
                    names = []
                hit = next((h for h in (self.forbidden(f"{canon}.{n}") for n in names) if h), None)
            self._wild[path] = hit
        return self._wild[path]


def _source_file(obj):
    for _ in range(4):
        inner = getattr(obj, "func", None) or getattr(obj, "__func__", None)
        if inner is None or inner is obj:
            break
        obj = inner
    code = getattr(obj, "__code__", None)
    if code is not None:
        return getattr(code, "co_filename", None)
    if isinstance(obj, type):
        import sys
        mod = sys.modules.get(getattr(obj, "__module__", ""), None)
        return getattr(mod, "__file__", None)
    return None


def machinery(path: str) -> str | None:
    """Why reaching ``path`` (canonical, dotted) is machinery, else None."""
    parts = path.split(".")
    root = parts[0]
    if root in WHOLE:
        return f"{path} (nothing these exercises need)"
    if root == "torch":
        if any(p.startswith("_") and not (p.startswith("__") and p.endswith("__")) for p in parts[1:]):
            return f"{path} (PyTorch's internals)"
        if any(path == m or path.startswith(m + ".") for m in TORCH_MACHINERY):
            return f"{path} (PyTorch's dispatcher and tracing machinery)"
        return None
    if root == "andrea_ref" and len(parts) >= 3 and parts[1] == "grading":
        if len(parts) == 3 and GRADING_PUBLIC.match(parts[2]):
            return None
        return f"{path} (the grading package's internals)"
    if root in ALLOWED and len(parts) > 1 and parts[1] not in ALLOWED[root]:
        if root == "IPython" and parts[1] == "core" and len(parts) > 2 and parts[2] == "display":
            return None
        return f"{path} (nothing these exercises need)"
    return None


def _note(path: str) -> str | None:
    parts = path.split(".")
    if parts[0] in NOTE_ROOTS or (parts[0] == "os" and len(parts) > 1 and parts[1] in NOTE_OS):
        return f"{path} (file access)"
    return None


def _event_reason(kind: str, detail: str) -> tuple[str, str] | None:
    if kind == "attr" and (detail in DUNDERS or detail in FRAME_ATTRS):
        return "machinery", f".{detail} (code, frames or object internals)"
    if kind == "sets":
        root = detail.split(".")[0].split("[")[0]
        if root in GUARDED_ROOTS and not detail.startswith("torch.backends."):
            return "machinery", f"replaces {detail} (changes what other code runs)"
    if kind == "computed":
        return "machinery", f"{detail}() with a computed attribute name"
    if kind == "name":
        return "machinery", f"{detail} (the interpreter's internals)"
    if kind == "method":
        return "machinery", f"defines {detail} (code that runs behind the caller's back)"
    if kind == "import":
        return "note", detail
    return None


def parse_cell(source: str):
    """The cell as Python (IPython's transformation of magics and shell commands
    applied), or None if it does not parse (it then runs nowhere)."""
    try:
        import ast
        return ast.parse(TransformerManager().transform_cell(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def analyse(plan: dict, segments: list[list[tuple[int, str]]]) -> Analysis:
    """The findings in the learner's cells: ``segments[k]`` holds the (cell number,
    source) pairs that run before graded cell ``k`` (the plan's set-up cells are read
    first, for their bindings only)."""
    out = Analysis()
    prog, rule = Program(), Rule(plan.get("forbidden") or {})
    sources: dict[int, list[str]] = {}
    try:
        for src in plan["setup"]:
            tree = parse_cell(src)
            if tree is not None:
                prog.run(tree, 0, record=False)
        for k, segment in enumerate(segments):
            for cell, src in segment:
                sources[cell] = src.splitlines()
                tree = parse_cell(src)
                if tree is not None:
                    prog.run(tree, cell)
                if re.search(r"\bget_ipython\b", src):
                    prog.events.append(("get_ipython", "get_ipython()", cell, _line_of(src, "get_ipython")))
            prog.boundary()
        prog.finish()
        fn = plan["function"]
        for k, env in enumerate(prog.boundaries):
            reached = prog.reach(env.get(fn, frozenset()), k)
            out.shortcuts[k] = _shortcuts(prog, rule, reached, sources, fn)
    except (TooComplex, RecursionError, MemoryError) as exc:
        out.machinery.append(Finding("machinery", f"the answer's code could not be read ({type(exc).__name__}: "
                                     f"{str(exc)[:120]})", 0, 0, ""))
    _collect(prog, sources, out)
    return out


def _line_of(src: str, needle: str) -> int:
    for i, line in enumerate(src.splitlines(), start=1):
        if needle in line:
            return i
    return 0


def _code(sources, cell: int, line: int) -> str:
    lines = sources.get(cell) or []
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return text[:160]


def _first_use(prog: Program, atom) -> tuple[int, int]:
    return next(((c, ln) for a, c, ln in prog.uses if a == atom), (0, 0))


def _shortcuts(prog: Program, rule: Rule, reached, sources, fn: str) -> list[Finding]:
    found, seen = [], set()
    for atom in sorted(reached, key=str):
        name = None
        if atom[0] == "k":
            name = rule.forbidden(atom[1])
        elif atom[0] == "w":
            member = rule.forbidden_member(atom[1])
            name = f"{member} (an attribute of {atom[1]} with a computed name)" if member else None
        if name and name not in seen:
            seen.add(name)
            cell, line = _first_use(prog, atom)
            found.append(Finding("shortcut", f"{name}, reached from `{fn}`", cell, line, _code(sources, cell, line)))
    return found


def _collect(prog: Program, sources, out: Analysis) -> None:
    seen = set()

    def add(kind, what, cell, line):
        key = (kind, cell, line)  # one finding of a kind per line: the first, outermost path
        if key in seen or cell == 0:
            return
        seen.add(key)
        f = Finding(kind, what, cell, line, _code(sources, cell, line))
        (out.machinery if kind == "machinery" else out.notes).append(f)

    for atom, cell, line in prog.uses:
        if atom[0] == "b":
            if atom[1] in BUILTIN_MACHINERY:
                add("machinery", f"{atom[1]}() (runs or reaches code the checks cannot see)", cell, line)
            elif atom[1] == "open":
                add("note", "open() (file access)", cell, line)
        elif atom[0] in ("k", "w"):
            canon = resolve(atom[1])[0]
            why = machinery(canon)
            if why:
                add("machinery", why, cell, line)
            elif _note(canon):
                add("note", _note(canon), cell, line)
    for kind, detail, cell, line in prog.events:
        if kind == "get_ipython":
            add("machinery", "get_ipython() (the shell the answer runs in)", cell, line)
            continue
        r = _event_reason(kind, detail)
        if r:
            add(r[0], r[1], cell, line)
    for name, cell, line in prog.magics:
        if name == "!":
            add("machinery", "a shell command (!...)", cell, line)
        elif name not in HARMLESS_MAGICS:
            add("machinery", f"the magic %{name}", cell, line)
    out.machinery.sort(key=lambda f: (f.cell, f.line))
    out.notes.sort(key=lambda f: (f.cell, f.line))
