"""The answer server's private copies of the machinery a checked call runs through
(:func:`classroom.isolation.answer_guard.private`): answer code in the server's process
that rebinds a function of any of those modules, in the module that defines it or in
one that imports it, changes nothing the server's core calls."""
from __future__ import annotations

import sys
import types

import pytest
import torch

from andrea_ref.grading import core, integrity, messages, watch
from classroom.isolation import answer_guard

pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class

GROUP = tuple(sys.modules[name] for name in core.CALL_MODULES)  # what the answer server copies


def _raises():
    raise ValueError("a learner's bug")


def _forge(monkeypatch):
    """What answer code could do: every function on the call's path replaced, where it is
    defined and where it was imported."""
    monkeypatch.setattr(integrity, "integrity_problem", lambda: "forged")
    monkeypatch.setattr(core, "integrity_problem", lambda: "forged")
    monkeypatch.setattr(messages, "learner_lines", lambda error, limit=3: ["forged"])
    monkeypatch.setattr(core, "learner_lines", lambda error, limit=3: ["forged"])
    monkeypatch.setattr(messages, "_", lambda message: "forged")
    monkeypatch.setattr(watch, "importing", lambda frame: True)
    monkeypatch.setattr(core, "_importing", lambda frame: True)


def test_the_copies_call_one_another_not_the_modules(monkeypatch):
    copy = answer_guard.private(*GROUP)[0]
    _forge(monkeypatch)
    ok = copy["execute"](lambda x: x + 1, (torch.ones(2),))
    assert ok.integrity is None and ok.error is None and torch.equal(ok.result, torch.full((2,), 2.0))
    failed = copy["execute"](_raises, ())
    assert isinstance(failed.error, ValueError)
    assert failed.where and not any("forged" in line for line in failed.where), failed.where


def test_the_control_the_modules_own_functions_are_fooled(monkeypatch):
    """Without the copies, the same rebinding changes what execute reports: the test above can fail."""
    _forge(monkeypatch)
    assert core.execute(lambda x: x, (torch.ones(2),)).integrity == "forged"


def test_a_replaced_torch_function_is_still_seen_when_the_integrity_check_is_forged(monkeypatch):
    """torch.tanh replaced, and the integrity module's own helper rebound to hide it: the
    copies still see the replacement; the module's own execute does not (the control)."""
    copy = answer_guard.private(*GROUP)[0]
    monkeypatch.setattr(torch, "tanh", lambda x: x)
    monkeypatch.setattr(integrity, "_replaced", lambda label, name, value, now: False)
    monkeypatch.setattr(messages, "_", lambda message: "forged")
    seen = copy["execute"](lambda x: x, (torch.ones(2),))
    assert seen.integrity is not None and "torch.tanh" in seen.integrity, seen.integrity
    assert core.execute(lambda x: x, (torch.ones(2),)).integrity is None


def test_a_forbidden_call_is_still_seen_by_the_copies(monkeypatch):
    """The watch itself holds in the copies: a library GELU inside the call is recorded
    and refused at the dispatcher although the import test was replaced."""
    copy = answer_guard.private(*GROUP)[0]
    _forge(monkeypatch)
    rule = watch.Forbidden("no library GELU", aten_words=("gelu",))
    out = copy["execute"](torch.nn.functional.gelu, (torch.ones(3),), rule)
    assert "gelu" in out.ops and out.result is None and out.error is not None


def test_each_module_keeps_its_own_private_namespace():
    spaces = answer_guard.private(*GROUP)
    assert len(spaces) == len(GROUP)
    for module, space in zip(GROUP, spaces):
        assert space is not vars(module)
        for name, value in space.items():
            original = vars(module).get(name)
            if callable(original) and getattr(original, "__globals__", None) is vars(module):
                assert value is not original and value.__code__ is original.__code__, name
    # a name imported from another module of the group is that module's copy
    copy, integ = spaces[0], spaces[1]
    assert copy["integrity_problem"] is integ["integrity_problem"]


def _reached(fn) -> list:
    """The package's functions ``fn`` reaches through the names its code (nested code
    included) looks up in its globals and through the functions its wrappers wrap."""
    seen, todo, out = set(), [fn], []
    while todo:
        f = todo.pop()
        if id(f) in seen or not isinstance(f, types.FunctionType):
            continue
        seen.add(id(f))
        todo.append(getattr(f, "__wrapped__", None))
        if not (f.__module__ or "").startswith("andrea_ref"):
            continue
        out.append(f)
        codes, names = [f.__code__], set()
        while codes:
            code = codes.pop()
            names.update(code.co_names)
            codes += [c for c in code.co_consts if isinstance(c, types.CodeType)]
        todo += [f.__globals__.get(n) for n in names]
    return out


def test_no_function_a_call_reaches_runs_with_a_modules_own_namespace():
    """Every function of the package that the copied execute can reach runs with a private
    namespace, decorated ones (the time limit, the paused collector) included: a helper
    moved to a module the answer server does not copy fails this test."""
    live = {id(vars(m)): name for name, m in list(sys.modules.items())
            if name.startswith("andrea_ref") and isinstance(m, types.ModuleType)}
    reached = _reached(answer_guard.private(*GROUP)[0]["execute"])
    names = {f.__name__ for f in reached}
    assert {"execute", "integrity_problem", "learner_lines", "time_limit", "importing", "_"} <= names, names
    leaks = [f"{f.__module__}.{f.__qualname__}" for f in reached if id(f.__globals__) in live]
    assert not leaks, leaks


def test_a_default_argument_holding_a_function_of_the_group_holds_its_copy():
    """``def _text(exc, limit, _limit=watch.time_limit)``: the default is the copy as well, so
    rebinding a global of the module that defines the function changes nothing it runs."""
    b = types.ModuleType("group_b")
    exec("VALUE = 'real'\ndef g():\n    return VALUE\n", vars(b))
    a = types.ModuleType("group_a")
    vars(a)["g"] = b.g
    exec("def f(h=g):\n    return h()\n", vars(a))
    space_a, _space_b = answer_guard.private(a, b)
    b.VALUE = "forged"
    assert a.f() == "forged"  # the control: the module's own function is fooled
    assert space_a["f"]() == "real"
