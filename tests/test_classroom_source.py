"""The grader's reading of an answer's source (classroom/scoring/source/), in the
grader's own process and fast: it never imports or runs a module the learner names,
it quotes the line of the cell as the learner wrote it, it reads the Python a magic
runs as IPython itself splits the magic's line, and it leaves the honest habits that
once were held for review alone while what they border on stays held. What a name can
denote is tracked closely enough that a function's own parameters, the loop variables
over them and what a library's methods give back are not taken for the library objects
other code reached (the capstone's honest answers), while a helper or an object given a
module, or one handed on to ``map`` or ``functools.partial``, is still followed; and
code built to stall the grader is stopped at the reading's budget and held.
"""
from __future__ import annotations

import json
import sys
import time
import types
from pathlib import Path

import pytest

from catalogue import capstone
from hostile.shortcuts import ASSIGNMENT
from hostile.submissions import GELU, notebook_with
from honest import released

from classroom.scoring import source
from classroom.scoring.plan import answer_runs, build_plan
from classroom.scoring.shortcuts import analyse

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def plan():
    inst = json.loads((ROOT / "solutions" / ASSIGNMENT / "gelu.ipynb").read_text())
    return build_plan(inst, released(ASSIGNMENT))


def _found(plan, answer: str, *after: str):
    nb = json.loads(notebook_with(released(ASSIGNMENT), answer, list(after)))
    return analyse(plan, answer_runs(plan, nb))


def _all(found):
    return found.machinery + found.notes + [f for hits in found.shortcuts.values() for f in hits]


# --------------------------------------------------------------------------- nothing imported or run
NAMED = GELU + (
    "import numpy.f2py.__main__\n"
    "import IPython.__main__\n"
    "import this\n"
    "import antigravity\n"
    "import torch._inductor.config\n"
    "from torch._dynamo import *\n"
    "from numpy.testing import assert_allclose\n"
    "_x = torch._dynamo.config\n"
    "_y = numpy_missing.sub.mod\n")


class _Recorder:
    """A first finder on sys.meta_path: every import the interpreter starts is seen here."""

    def __init__(self):
        self.names: list[str] = []

    def find_spec(self, name, path=None, target=None):
        self.names.append(name)
        return None


def test_learner_named_modules_are_never_imported_nor_run(plan):
    _found(plan, GELU)  # the grader's own lazy imports, once
    before, argv = set(sys.modules), list(sys.argv)
    recorder = _Recorder()
    sys.meta_path.insert(0, recorder)
    try:
        found = _found(plan, NAMED)  # numpy.f2py.__main__ would raise SystemExit, IPython.__main__ start a shell
    finally:
        sys.meta_path.remove(recorder)
    assert recorder.names == [], recorder.names
    assert set(sys.modules) == before and sys.argv == argv
    lines = {f.code: f.what for f in found.machinery}
    assert "entry point" in lines["import numpy.f2py.__main__"]
    assert "entry point" in lines["import IPython.__main__"]
    assert "internals" in lines["import torch._inductor.config"]


def test_resolve_reads_statically_and_runs_no_code():
    calls = []
    fake = types.ModuleType("andrea_fake_lazy")
    fake.__getattr__ = lambda name: calls.append(name) or types.ModuleType(name)  # PEP 562, as torch and numpy do

    class Trap:
        @property
        def __name__(self):
            calls.append("property")
            return "gelu"

    fake.trap = Trap()
    sys.modules[fake.__name__] = fake
    try:
        assert source.resolve("andrea_fake_lazy.lazy_submodule.f")[1] is source.MISSING
        assert source.peek(fake.trap, "__name__", "default") == "default"
        assert source.peek(source.peek, "__name__") == "peek"  # a function's C-level getset is read
    finally:
        del sys.modules[fake.__name__]
        source.resolve.cache_clear()
    assert calls == []


# --------------------------------------------------------------------------- lines as the learner wrote them
def _where(found, needle: str):
    return sorted({(f.line, f.code) for f in _all(found) if needle in f.what})


@pytest.mark.parametrize("cell,needle,line,code", [
    # IPython drops leading blank lines before it parses
    ("\n\n# my answer\n" + GELU + "import gc\n", "gc", 7, "import gc"),
    # a magic continued with a backslash is joined into one line
    (GELU + "%timeit -n1 \\\n    -r1 gelu(torch.ones(3))\nimport gc\n", "gc", 6, "import gc"),
    # a cell magic's body, itself starting with blank lines
    ("%%time\n\n\nimport gc\n" + GELU, "gc", 4, "import gc"),
    # a classic prompt
    (">>> import gc\n" + GELU, "gc", 1, ">>> import gc"),
    # every line of a string run by exec is on the exec's line (one finding per line: the exec)
    (GELU + "exec('x = 1\\nimport gc')\n", "", 4, "exec('x = 1\\nimport gc')"),
])
def test_evidence_quotes_the_line_the_learner_wrote(plan, cell, needle, line, code):
    assert _where(_found(plan, cell), needle) == [(line, code)]


def test_source_lines_number_lines_as_python_does():
    assert source.source_lines("a\r\nb\rc\nd\n") == ["a", "b", "c", "d"]
    tree, lines = source.read("\n\n%time x = 1\n\ny = 2 \\\n + 3\nimport gc\n")
    assert [lines(s.lineno) for s in tree.body] == [3, 5, 7]


# --------------------------------------------------------------------------- magics
@pytest.mark.parametrize("name,line,body,expected", [
    ("timeit", "gelu(x)", None, [("gelu(x)", 0)]),
    ("timeit", "-n1 -r1 global g; g = 1", "pass\n", [("global g; g = 1", 0), ("pass\n", 1)]),
    ("timeit", '-n1 -s "g = 1" pass', None, []),  # IPython refuses -s: nothing runs
    ("time", "--no-raise-error y = f(x)", None, [("y = f(x)", 0)]),
    ("time", "", "y = f(x)\n", [("y = f(x)\n", 1)]),
    ("prun", "-q -l 3 g = 1", "h = 2\n", [("g = 1\nh = 2\n", 0)]),
    ("capture", "out", "y = 1\n", [("y = 1\n", 1)]),
    ("matplotlib", "inline", None, []),
])
def test_magic_code_is_split_as_ipython_splits_it(name, line, body, expected):
    assert source.magic_code(name, line, body) == expected


def test_the_magics_ipython_does_not_expand_are_known():
    from IPython.core import magic, magics
    found = set()
    for cls in (getattr(magics, n) for n in dir(magics)):  # its classes load lazily
        if isinstance(cls, type) and issubclass(cls, magic.Magics) and hasattr(cls, "magics"):
            for table in cls.magics.values():
                for name, method in table.items():
                    method = method if isinstance(method, str) else method.__name__
                    if getattr(getattr(cls, method, None), magic.MAGIC_NO_VAR_EXPAND_ATTR, False):
                        found.add(name)
    assert found == source.NO_VAR_EXPAND
    assert source.expansions("{a.b} and $c, '$d' {e:>3}") == ["a.b", "c", "e:>3"]


# --------------------------------------------------------------------------- honest, and what stays held
HONEST = {
    "thread count": "import os\nos.environ['OMP_NUM_THREADS'] = '1'\n",
    "retina figures": "%config InlineBackend.figure_format = 'retina'\n",
    "own source": "import inspect\nprint(inspect.getsource(gelu))\n",
    "name bound": "print('gelu' in globals(), globals()['gelu'] is gelu)\n",
    "own module name": "print(gelu.__module__)\n",
    "own object": "class P:\n    def __init__(self):\n        self.a = 1\n\n\nprint(P().__dict__)\n",
    "notes": "%%writefile notes.txt\nmy notes\n",
    "timing": "%timeit gelu(torch.ones(3))\n",
    "timed cell": "%%time\ny = gelu(torch.ones(3))\n",
    "timeit with a lambda": "import timeit\nprint(timeit.timeit(lambda: gelu(torch.ones(3)), number=3))\n",
    "help": "gelu?\n",
    "a settings object": "import types\ncfg = types.SimpleNamespace()\ncfg.scale = 2.0\n",
    "own helper given the library's GELU": "def compare(f, g):\n    xs = torch.linspace(-3, 3, 7)\n"
                                           "    return (f(xs) - g(xs)).abs().max()\n\n\n"
                                           "print(compare(gelu, torch.nn.functional.gelu))\n",
    # a function's own parameters, and loop variables over them, hold what its calls give it,
    # not what a library call elsewhere was given (the generator and dtype of torch.rand)
    "own parameters cleared": "def step(forward, params, batch):\n    out = forward(batch[:, :-1], params)\n"
                              "    for name in params:\n        params[name] = torch.nn.Parameter(params[name])\n"
                              "    for p in params.values():\n        p.grad = None\n    return out\n\n\n"
                              "probs = torch.softmax(torch.randn(4, 3), dim=-1)\n"
                              "u = torch.rand(probs.shape[0], 1, generator=torch.Generator().manual_seed(0),\n"
                              "               dtype=torch.float64)\n",
    # isinstance stores nothing in what it is given
    "isinstance then set": "p = torch.nn.Parameter(torch.ones(2))\nif isinstance(p, torch.nn.Parameter):\n"
                           "    p.grad = None\n",
    # what a library method gives back is not that method
    "method chain": "y = torch.nn.Parameter(torch.ones(3)).flatten().detach().flatten().detach().clone()\n"
                    "y.tag = 'mine'\n",
}
HELD = {
    "sys.path": ("import sys\nsys.path.append('..')\n", "sys.path"),
    "code-choosing variable": ("import os\nos.environ['PYTHONBREAKPOINT'] = 'x.y'\n", "PYTHONBREAKPOINT"),
    "environ update": ("import os\nos.environ.update({'LD_PRELOAD': 'x.so'})\n", "LD_PRELOAD"),
    "other config": ("%config InteractiveShell.ast_node_interactivity = 'all'\n", "%config"),
    "config code": ("%config InlineBackend.figure_format = self.shell.user_ns\n", "%config"),
    "writefile elsewhere": ("%%writefile ../x.py\nprint(1)\n", "%%writefile"),
    "expanded line": ("%matplotlib {__import__('os')}\n", "__import__"),
    "inspect frames": ("import inspect\nf = inspect.currentframe()\n", "inspect.currentframe"),
    "module dict": ("print(torch.__dict__)\n", "__dict__"),
    "module dict by getattr": ("d = getattr(torch, '__dict__')\n", "__dict__"),
    "globals written": ("globals()['ge' + 'lu'] = gelu\n", "globals"),
    "torch.compile": ("fast = torch.compile(gelu)\n", "torch.compile"),
    "pickle in numpy": ("import numpy as np\nnp.load('x.npy', allow_pickle=True)\n", "numpy.load"),
    "getattr as a value": ("f = list(map(getattr, [torch], ['tanh']))[0]\n", "getattr"),
    # replacing a library's function, through a helper or an object given the module
    "helper replaces": ("def _patch(m):\n    m.tanh = abs\n\n\n_patch(torch)\n", "replaces torch.tanh"),
    "object replaces": ("class _H:\n    def __init__(self, m):\n        self.m = m\n"
                        "        self.m.tanh = abs\n\n\n_H(torch)\n", "replaces torch.tanh"),
    "class method replaced": ("torch.Tensor.tanh = lambda self: self\n", "replaces torch.Tensor.tanh"),
}


@pytest.mark.parametrize("name", list(HONEST))
def test_honest_habit_finds_nothing(plan, name):
    found = _found(plan, GELU, HONEST[name])
    assert not _all(found), [f.text() for f in _all(found)]


@pytest.mark.parametrize("name", list(HELD))
def test_what_stays_held(plan, name):
    cell, word = HELD[name]
    found = _found(plan, GELU, cell)
    assert found.machinery and any(word in f.text() for f in found.machinery), [f.text() for f in _all(found)]
    assert all(f.cell > 0 and f.line > 0 and f.code in cell for f in found.machinery)


# --------------------------------------------------------------------------- what calls give
# the library's GELU picked from its module by a helper of the learner's, wherever the
# module lands among the helper's parameters, or by one handed on to library code
_PICK = "def _pick(a, m=None):\n    return m.gelu\n\n\n"
_USE = "\n\ndef gelu(x):\n    return _g(x, approximate='tanh')\n"
REACHES = {
    "second argument": _PICK + "_g = _pick(1, torch.nn.functional)" + _USE,
    "keyword argument": _PICK + "_g = _pick(1, m=torch.nn.functional)" + _USE,
    "starred arguments": _PICK + "_g = _pick(*[1, torch.nn.functional])" + _USE,
    "default argument": "def _pick(m=torch.nn.functional):\n    return m.gelu\n\n\n_g = _pick()" + _USE,
    "static method": "class _P:\n    @staticmethod\n    def pick(m):\n        return m.gelu\n\n\n"
                     "_g = _P.pick(torch.nn.functional)" + _USE,
    "method called on its class": "class _P:\n    def pick(self, m):\n        return m.gelu\n\n\n"
                                  "_g = _P.pick(None, torch.nn.functional)" + _USE,
    "map": "def _pick(m):\n    return m.gelu\n\n\n_g = list(map(_pick, [torch.nn.functional]))[0]" + _USE,
    "functools.partial": "import functools\n\n\ndef _pick(m):\n    return m.gelu\n\n\n"
                         "_g = functools.partial(_pick, torch.nn.functional)()" + _USE,
    "popped from a list": "_impl = [torch.nn.functional.gelu]\n_g = _impl.pop()" + _USE,
    "method of an object given the module": "class _M:\n    def __init__(self, m):\n        self.m = m\n\n"
                                            "    def get(self):\n        return self.m.gelu\n\n\n"
                                            "_g = _M(torch.nn.functional).get()" + _USE,
    "object made by a helper": "class _H:\n    def __init__(self, m):\n        self.f = m.gelu\n\n"
                               "    def __call__(self, x):\n        return self.f(x, approximate='tanh')\n\n\n"
                               "def _make(cls, m):\n    return cls(m)\n\n\n"
                               "gelu = _make(_H, torch.nn.functional)\n",
}


@pytest.mark.parametrize("name", list(REACHES))
def test_what_a_call_gives_is_followed(plan, name):
    found = _found(plan, REACHES[name])
    assert all(found.shortcuts.get(k) for k in range(len(plan["graded"]))), [f.text() for f in _all(found)]


# --------------------------------------------------------------------------- the capstone's honest answers
@pytest.fixture(scope="module")
def capstone_plan():
    inst = json.loads((ROOT / "solutions" / capstone.NB / "capstone.ipynb").read_text())
    return build_plan(inst, released(capstone.NB))


@pytest.mark.parametrize("name", ["train_parameters_wrapped", "sample_inverse_cdf"])
def test_capstone_answers_are_read_quickly_and_found_honest(capstone_plan, name):
    """``params[name] = torch.nn.Parameter(params[name])`` on train's own parameter, and
    ``p.grad = None`` in train while another cell seeds ``torch.Generator().manual_seed``,
    replace nothing of the library's; the first once took minutes to read."""
    entry = next(e for e in capstone.CORRECT if e.name == name)
    nb = json.loads(json.dumps(released(capstone.NB)))
    for cell in nb["cells"]:
        if cell.get("id") in capstone.FUNCTIONS:
            cell["source"] = entry.source if cell["id"] == entry.cell else capstone.solution(cell["id"])
    start = time.perf_counter()
    found = analyse(capstone_plan, answer_runs(capstone_plan, nb))
    assert time.perf_counter() - start < 2.0
    assert not _all(found), [f.text() for f in _all(found)]
    assert found.work < source.MAX_WORK // 50


# --------------------------------------------------------------------------- the reading's budget
# many names of the library flowing through one variable: each line makes the set it may
# hold larger, so the reading grows with the cube of the code
_NAMES = sorted(n for n in vars(__import__("torch")) if n.isidentifier() and not n.startswith("_"))[:150]
STALL = GELU + "v = torch\nfor _ in range(2):\n" + "".join(f"    v = v.{n} or v\n" for n in _NAMES)


def test_code_built_to_stall_the_grader_is_stopped_and_held(plan, monkeypatch):
    monkeypatch.setattr(source.program, "MAX_SECONDS", 1.0)
    start = time.perf_counter()
    found = _found(plan, STALL)
    spent = time.perf_counter() - start
    assert spent < 6.0, spent
    assert any("could not be read within 1 s" in f.what for f in found.machinery), [f.text() for f in _all(found)]


def test_the_work_budget_stops_the_reading_too(plan, monkeypatch):
    monkeypatch.setattr(source.program, "MAX_WORK", 20_000)
    found = _found(plan, STALL)
    assert any("could not be read within" in f.what and "units of work" in f.what for f in found.machinery)
    assert 20_000 <= found.work < 20_000 + 2 * source.program.CLOCK_EVERY


def test_the_budget_is_far_below_the_supervisors_patience():
    # the supervisor replaces a worker that makes no progress for its deadline + 120 s
    assert 1.0 <= source.MAX_SECONDS <= 30.0
