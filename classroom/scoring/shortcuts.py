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
  ``torch.library``, ``torch.overrides``, private modules), code compilers and
  serialisers (``torch.jit``, ``torch.compile``, ``torch.export``, ``torch.load``,
  ``numpy.load``, ``pickle``, ``marshal``, ``shelve``...: they run or rebuild code the
  source does not show), threads, processes and executors, signal handlers, ``atexit``
  and finalizers, ``sys.modules``, ``sys.path``, frames, ``gc``, ``ctypes``,
  ``importlib``, ``builtins``, code objects and function internals, any module's
  private names and ``__main__`` entry points, ``exec``/``eval``/``compile``/
  ``__import__``, computed attribute names (``getattr`` with a name built at run time or
  passed on as a value, the values of a module's ``__dict__``), replacing attributes of
  modules and classes it did not define, environment variables other than thread
  counts, shell commands and magics other than the harmless ones. A submission that
  does is held for review;
- **notes**: file access (``open``, ``pathlib``, ``sqlite3``...), harmless to the
  grade (the sandbox shows nothing worth reading) but worth a look.

What is honest stays silent: ``inspect.getsource``, ``'gelu' in globals()``, reading
``__module__`` or the ``__dict__`` of the learner's own objects, thread-count
variables in ``os.environ``, ``%config InlineBackend...`` with a literal value,
``%%writefile`` with a plain file name, and the code of ``%time``/``%timeit``/
``%prun``/``%%capture``, which is read like any other code of the cell.

:func:`analyse` returns all three with the cell, line and code of each. Which implementations a
notebook's rule forbids is decided by :class:`.forbidden.Rule`.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from .forbidden import Rule
from .source import OverBudget, Program, read, resolve, source_lines

# modules no answer needs at all (a module whose name starts with "_" is internals too)
WHOLE = {"gc", "ctypes", "importlib", "builtins", "threading", "multiprocessing", "concurrent", "subprocess",
         "signal", "atexit", "socket", "select", "selectors", "mmap", "fcntl", "pty", "resource", "marshal",
         "pickle", "copyreg", "dis", "code", "codeop", "site", "zipimport", "pkgutil", "runpy", "imp",
         "ipykernel", "zmq", "jupyter_client", "traitlets", "faulthandler", "tracemalloc", "asyncio",
         "__main__", "classroom", "posix", "nt", "sysconfig",
         # deserialisers that rebuild objects by calling what the data names
         "shelve", "dill", "cloudpickle", "joblib", "jsonpickle", "pickletools",
         # code runners, debuggers, profilers and loaders that run code from files or strings
         "doctest", "pdb", "bdb", "trace", "cProfile", "profile", "pydoc", "compileall", "py_compile",
         "pkg_resources", "setuptools", "distutils", "pip", "ensurepip", "venv", "xmlrpc",
         # compilers of Python or native code
         "numba", "triton", "Cython", "pyximport", "cffi", "torchgen", "functorch"}
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
    # reading source and asking what an object is; not frames, members or annotations evaluated
    "inspect": {"getsource", "getsourcelines", "getdoc", "cleandoc", "getcomments", "isfunction", "isclass",
                "ismethod", "ismodule", "isbuiltin", "isroutine", "iscoroutinefunction", "isgeneratorfunction"},
    "timeit": {"timeit", "repeat", "Timer", "default_timer", "default_number", "default_repeat"},
    "unittest": {"TestCase", "TextTestRunner", "TestSuite", "FunctionTestCase", "skip", "skipIf", "skipUnless",
                 "expectedFailure", "SkipTest"},
    "pytest": {"approx", "raises", "warns"},
    "yaml": {"safe_load", "safe_load_all", "safe_dump", "safe_dump_all", "dump", "YAMLError"},
}
MACHINERY_PATHS = (
    # PyTorch's dispatcher and tracing
    "torch.ops", "torch.library", "torch.overrides", "torch.fx", "torch.multiprocessing", "torch.utils.hooks",
    # code compiled, traced, exported, loaded or rebuilt from data
    "torch.jit", "torch.compile", "torch.compiler", "torch.export", "torch.onnx", "torch.package", "torch.hub",
    "torch.load", "torch.serialization", "torch.utils.cpp_extension", "torch.utils.model_zoo", "torch.classes",
    "torch.cuda.jiterator", "torch.distributed", "torch.utils.bottleneck",
    "numpy.load", "numpy.lib.format", "numpy.lib.npyio", "numpy.f2py", "numpy.distutils", "numpy.ctypeslib",
    "sympy.sympify", "sympy.S", "sympy.parse_expr", "sympy.parsing", "sympy.lambdify", "sympy.core.sympify",
    # names resolved from strings
    "logging.config")
GRADING_PUBLIC = re.compile(r"^(check_\w+|report_\w+|GradingError|ERROR_NAME|failure_lines)$")
# attributes through which code, frames and function internals are reached
DUNDERS = {"__code__", "__globals__", "__closure__", "__dict__", "__class__", "__bases__", "__base__",
           "__mro__", "__subclasses__", "__builtins__", "__func__", "__self__", "__wrapped__",
           "__defaults__", "__kwdefaults__", "__getattribute__", "__setattr__", "__delattr__",
           "__import__", "__loader__", "__spec__", "__reduce__", "__reduce_ex__", "__traceback__",
           "__objclass__", "__torch_function__", "__torch_dispatch__", "__subclasshook__", "__getattr__",
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
                   "prun", "load_ext autoreload", "config InlineBackend", "config (shows a setting)", "writefile"}
# environment variables that only tune thread counts and determinism: nothing reads them to
# decide which code runs (PYTHONBREAKPOINT, LD_PRELOAD, PYTHONPATH or TORCH_* could)
HARMLESS_ENV = {"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                "NUMEXPR_MAX_THREADS", "VECLIB_MAXIMUM_THREADS", "TOKENIZERS_PARALLELISM", "CUBLAS_WORKSPACE_CONFIG",
                "CUDA_VISIBLE_DEVICES", "PYTHONHASHSEED"}
NOTE_ROOTS = {"pathlib", "shutil", "tempfile", "glob", "sqlite3", "urllib", "http", "requests", "io"}
NOTE_OS = {"listdir", "makedirs", "mkdir", "remove", "unlink", "rename", "replace", "walk", "scandir", "stat"}


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
    work: int = 0  # units of work the reading took (source.MAX_WORK is its budget)


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


@functools.lru_cache(maxsize=65536)
def machinery(path: str) -> str | None:
    """Why reaching ``path`` (canonical, dotted) is machinery, else None."""
    parts = path.split(".")
    root = parts[0]
    if root in WHOLE or (_private(root) and root != "_"):
        return f"{path} (nothing these exercises need)"
    if "__main__" in parts:
        return f"{path} (a program's entry point, which runs when imported)"
    if any(path == m or path.startswith(m + ".") for m in MACHINERY_PATHS):
        if root == "torch" and not path.startswith(("torch.ops", "torch.library", "torch.overrides", "torch.fx")):
            return f"{path} (compiles, loads or rebuilds code that the answer's source does not show)"
        if root == "torch":
            return f"{path} (PyTorch's dispatcher and tracing machinery)"
        return f"{path} (runs or rebuilds code that the answer's source does not show)"
    if root == "andrea_ref" and len(parts) >= 3 and parts[1] == "grading":
        if len(parts) == 3 and GRADING_PUBLIC.match(parts[2]):
            return None
        return f"{path} (the grading package's internals)"
    if any(_private(p) for p in parts[1:]):
        return f"{path} (PyTorch's internals)" if root == "torch" else f"{path} (a module's internals)"
    if root == "torch":
        return None
    if root in ALLOWED and len(parts) > 1 and parts[1] not in ALLOWED[root]:
        if root == "IPython" and parts[1] == "core" and len(parts) > 2 and parts[2] == "display":
            return None
        return f"{path} (nothing these exercises need)"
    return None


@functools.lru_cache(maxsize=65536)
def _note(path: str) -> str | None:
    parts = path.split(".")
    if parts[0] in NOTE_ROOTS or (parts[0] == "os" and len(parts) > 1 and parts[1] in NOTE_OS):
        return f"{path} (file access)"
    return None


_ENV_KEY = re.compile(r"^os\.environ\['([A-Za-z0-9_]+)'\]$")


def _event_reason(kind: str, detail: str) -> tuple[str, str] | None:
    if kind == "attr" and (detail in DUNDERS or detail in FRAME_ATTRS):
        return "machinery", f".{detail} (code, frames or object internals)"
    if kind == "sets":
        env = _ENV_KEY.match(detail)
        if env and env.group(1) in HARMLESS_ENV:
            return None
        root = detail.split(".")[0].split("[")[0]
        if (root in GUARDED_ROOTS or root in ALLOWED or _private(root)) and not detail.startswith("torch.backends."):
            return "machinery", f"replaces {detail} (changes what other code runs)"
    if kind == "computed":
        return "machinery", f"{detail}() with a computed attribute name"
    if kind == "namespace":
        return "machinery", f"every member of {detail} namespace, by names taken from data (a computed attribute name)"
    if kind == "code":
        return "machinery", f"runs the {detail}, a code string built at run time that the grader cannot read"
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
    return read(source)[0]


def analyse(plan: dict, runs: list[tuple[str, list[tuple[int, str]]]]) -> Analysis:
    """The findings in the learner's cells: ``runs[k]`` is (graded cell id, the (cell
    number, source) pairs that run before that graded cell), as
    :func:`~classroom.scoring.plan.answer_runs` gives them (the plan's set-up cells are
    read first, for their bindings only). The shortcuts of graded cell ``k`` are what its
    function reaches, there, of the rule its checks enforce. The reading has a hard budget
    (``source.MAX_SECONDS``, ``source.MAX_WORK``): past it, it stops and the notebook is
    held for review ("the answer's code could not be read within N s")."""
    out = Analysis()
    prog = Program()
    graded = {g["grade_id"]: g for g in plan["graded"]}
    sources: dict[int, list[str]] = {}
    try:
        for src in plan["setup"]:
            tree, lines = read(src)
            if tree is not None:
                prog.run(tree, 0, record=False, lines=lines)
        for _gid, segment in runs:
            for cell, src in segment:
                sources[cell] = source_lines(src)
                tree, lines = read(src)
                if tree is not None:
                    prog.run(tree, cell, lines=lines)
                if re.search(r"\bget_ipython\b", src):
                    prog.events.append(("get_ipython", "get_ipython()", cell, _line_of(src, "get_ipython")))
            prog.boundary()
        prog.finish()
        for k, env in enumerate(prog.boundaries):
            g = graded[runs[k][0]]
            fn, forbidden = g["function"], g.get("forbidden") or {}
            key = repr(sorted(forbidden.items()))
            rule = _RULES.get(key) or _RULES.setdefault(key, Rule(forbidden))
            reached = prog.reach(env.get(fn, frozenset()), k)
            out.shortcuts[k] = _shortcuts(prog, rule, reached, sources, fn)
    except OverBudget as exc:  # the grader stops rather than run on: held, never passed
        out.machinery.append(Finding("machinery", str(exc), 0, 0, ""))
    except Exception as exc:  # noqa: BLE001 - TooComplex, RecursionError, MemoryError ...: held, never passed
        out.machinery.append(Finding("machinery", f"the answer's code could not be read ({type(exc).__name__}: "
                                     f"{str(exc)[:120]})", 0, 0, ""))
    _collect(prog, sources, out)
    out.work = prog.work
    return out


_RULES: dict[str, Rule] = {}  # the rules met so far, with what their namespaces hold


def _line_of(src: str, needle: str) -> int:
    for i, line in enumerate(source_lines(src), start=1):
        if needle in line:
            return i
    return 0


def _code(sources, cell: int, line: int) -> str:
    lines = sources.get(cell) or []
    text = lines[line - 1].strip() if 0 < line <= len(lines) else ""
    return text[:160]


def _first_use(prog: Program, atom) -> tuple[int, int]:
    return prog.first_use.get(atom, (0, 0))


def _shortcuts(prog: Program, rule: Rule, reached, sources, fn: str) -> list[Finding]:
    found, seen = [], set()
    for atom in sorted(reached, key=str):
        name = None
        if atom[0] in ("k", "i"):  # a library object, or an instance of a library class
            name = rule.forbidden(atom[1])
        elif atom[0] in ("w", "w*"):
            member = rule.forbidden_member(atom[1], deep=atom[0] == "w*")
            name = f"{member} (reached from {atom[1]} by a computed name)" if member else None
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
        elif atom[0] in ("k", "i", "w", "w*"):
            if ("machinery", cell, line) in seen and ("note", cell, line) in seen:
                continue
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
