"""Forged shortcuts: answers that reach a forbidden implementation, or the grader's
machinery, in ways the answer server's own signals cannot be trusted to see.

Each class holds several variants; every one is an answer cell for the released GELU
notebook whose graded function would pass every check if its points were given as the
answer server reported them. The classes:

- ``alias``: the grading package's, the grader's or PyTorch's machinery reached under
  an alias, through a plain module import, ``importlib``, ``sys.modules`` or a
  computed attribute name;
- ``thread``: the library's GELU, or ``andrea_ref``'s, run in a worker thread,
  an executor or a thread started from the low-level module;
- ``dispatch``: the real kernel reached through another dispatch key or entry point
  (nested tensors, ``torch.ops.aten``, ``torch._C._nn``, with the dispatcher's modes
  disabled);
- ``reply``: the server's reply replaced, or reached through frames, ``gc`` or
  function internals, so that what is sent back is not what the checked call returned;
- ``refs``: PyTorch's own Python reference implementations and decompositions;
- ``helpers``: the grading package's internal reference helpers and ``andrea_ref``'s
  own GELU, under other names;
- ``namespace``: a module's members reached by names taken from data: the values of
  its ``__dict__`` (through ``getattr(m, "__dict__")``), ``getattr`` passed on to
  ``map``, ``functools.reduce`` or a ``__reduce__`` that ``copy`` calls;
- ``strings``: code IPython or Python runs from a string the cell holds: the line of
  ``%timeit``, ``%time`` and ``%prun``, a magic inside ``%%capture``, the
  ``{expression}`` IPython expands in a magic's line, the value ``%config`` evaluates,
  a string annotation ``typing.get_type_hints`` evaluates;
- ``code``: code compiled, serialised or built at run time, which the source does not
  show: a pickle whose ``__reduce__`` runs code, through ``torch.load`` or
  ``numpy.load``, a TorchScript archive, a ``timeit`` statement built at run time;
- ``containers``: a forbidden implementation picked from a module by a helper or a
  class of the learner's own that is given the module, or stored in a container or
  object by a method call (``append``, ``insert``, ``update``, ``operator.setitem``, a bound
  ``append`` kept in a ``functools.partial`` or handed to ``map``, ``heapq.heappush``,
  a helper of the learner's own that appends to the list it is given ...) and read back
  by the graded function.

``tests/test_classroom_shortcuts.py`` grades them through the real grader: none gets
the points the rule against shortcuts governs, and each is reported with its evidence.
"""
from __future__ import annotations

import io
import pickle
import textwrap
import warnings

ASSIGNMENT = "03_gelu"
NOTEBOOK = "gelu.ipynb"


def _d(text: str) -> str:
    return textwrap.dedent(text)


class _Payload:
    """Unpickling it runs code: the library's own GELU becomes the notebook's ``gelu``."""

    def __reduce__(self):
        return (exec, ("import __main__, torch, torch._refs.nn.functional as R\n"
                       "__main__.gelu = lambda t, R=R: R.gelu(t, approximate='tanh')",))


PICKLE = pickle.dumps(_Payload(), protocol=2)


def _archive() -> bytes:
    """A TorchScript archive of the library's GELU: nothing in the answer's source names it."""
    import torch

    class _G(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.gelu(x, approximate="tanh")

    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated, and still loads
        torch.jit.save(torch.jit.trace(_G(), torch.randn(8)), buf)
    return buf.getvalue()


ARCHIVE = _archive()


CLASSES: dict[str, dict[str, str]] = {
    "alias": {
        "core_module_alias": _d("""\
            import andrea_ref.grading.core as c
            c.Blocker.__enter__ = lambda self: self
            import torch.nn.functional as F
            def gelu(x):
                return F.gelu(x, approximate="tanh")
            """),
        "grading_attribute_alias": _d("""\
            g = grading
            core = g.core
            core.CALL_TIME_LIMIT = 1e9
            def gelu(x):
                return torch.nn.functional.gelu(x, approximate="tanh")
            """),
        "importlib_server": _d("""\
            import importlib
            server = importlib.import_module("classroom.isolation.answer_server")
            def gelu(x):
                return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
            """),
        "sys_modules_guard": _d("""\
            import sys as _s
            guard = _s.modules["classroom.isolation.answer_guard"]
            def gelu(x):
                return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
            """),
        "computed_attribute": _d("""\
            name = "c" + "o" + "re"
            core = getattr(grading, name)
            def gelu(x):
                return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
            """),
        "dunder_import": _d("""\
            wire = __import__("classroom.isolation.wire", fromlist=["send"])
            def gelu(x):
                return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
            """),
    },
    "thread": {
        "threading_thread": _d("""\
            import threading
            from andrea_ref.gelu import gelu as _g
            def gelu(x):
                box = []
                t = threading.Thread(target=lambda: box.append(_g(x)))
                t.start(); t.join()
                return box[0]
            """),
        "executor_alias": _d("""\
            from concurrent.futures import ThreadPoolExecutor as Pool
            import torch.nn.functional as nnf
            def gelu(x):
                with Pool(1) as pool:
                    return pool.submit(nnf.gelu, x, approximate="tanh").result()
            """),
        "low_level_thread": _d("""\
            import _thread, time
            def gelu(x):
                box = []
                _thread.start_new_thread(lambda: box.append(torch.nn.functional.gelu(x, approximate="tanh")), ())
                end = time.monotonic() + 2.0
                while not box and time.monotonic() < end:
                    time.sleep(0.001)
                return box[0] if box else x
            """),
        "thread_module_by_name": _d("""\
            th = __import__("thr" + "eading")
            def gelu(x):
                box = []
                t = th.Thread(target=lambda: box.append(torch.nn.GELU("tanh")(x)))
                t.start(); t.join()
                return box[0]
            """),
        "dummy_pool": _d("""\
            from multiprocessing.dummy import Pool
            pool = Pool(1)
            def gelu(x):
                return pool.apply(torch.nn.functional.gelu, (x,), {"approximate": "tanh"})
            """),
    },
    "dispatch": {
        "nested_tensor": _d("""\
            import torch.nn.functional as F
            def gelu(x):
                nt = torch.nested.nested_tensor([x.reshape(-1)])
                return F.gelu(nt, approximate="tanh").unbind()[0].reshape(x.shape)
            """),
        "modes_disabled": _d("""\
            from torch.utils._python_dispatch import _disable_current_modes
            def gelu(x):
                with _disable_current_modes():
                    return torch.nn.functional.gelu(x, approximate="tanh")
            """),
        "ops_aten": _d("""\
            op = torch.ops.aten.gelu.default
            def gelu(x):
                return op(x, approximate="tanh")
            """),
        "c_nn": _d("""\
            kernel = torch._C._nn.gelu
            def gelu(x):
                return kernel(x, approximate="tanh")
            """),
        "dispatch_guard_off": _d("""\
            def gelu(x):
                with torch._C._DisableTorchDispatch():
                    return torch.nn.functional.gelu(x, approximate="tanh")
            """),
        "computed_op_name": _d("""\
            aten = torch.ops.aten
            def gelu(x):
                return getattr(aten, "ge" + "lu")(x, approximate="tanh")
            """),
    },
    "reply": {
        "main_module_reply": _d("""\
            import sys
            main = sys.modules["__main__"]
            _real = torch.nn.functional.gelu
            def gelu(x):
                return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
            main.reply = lambda *a, **k: None
            """),
        "wire_send_replaced": _d("""\
            from classroom.isolation import wire as w
            _send = w.send
            w.send = lambda sock, msg: _send(sock, msg)
            def gelu(x):
                return x
            """),
        "frames": _d("""\
            import inspect
            def gelu(x):
                caller = inspect.currentframe().f_back
                caller.f_locals["result"] = torch.nn.functional.gelu(x, approximate="tanh")
                return x
            """),
        "gc_objects": _d("""\
            import gc
            for obj in gc.get_objects():
                if callable(obj) and getattr(obj, "__name__", "") == "reply":
                    break
            def gelu(x):
                return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
            """),
        "function_globals": _d("""\
            def gelu(x):
                return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
            g = grading.check_gelu_values.__globals__
            """),
        "tensor_method_replaced": _d("""\
            _clone = torch.Tensor.clone
            torch.Tensor.clone = lambda self, *a, **k: torch.nn.functional.gelu(_clone(self), approximate="tanh")
            def gelu(x):
                return x.clone()
            """),
    },
    "refs": {
        "refs_functional": _d("""\
            import torch._refs.nn.functional as R
            def gelu(x):
                return R.gelu(x, approximate="tanh")
            """),
        "decomposition_table": _d("""\
            from torch._decomp import decomposition_table
            table = decomposition_table
            def gelu(x):
                return table[torch.ops.aten.gelu.default](x, approximate="tanh")
            """),
        "get_decompositions": _d("""\
            from torch._decomp import get_decompositions as gd
            impls = list(gd([torch.ops.aten.gelu]).values())
            def gelu(x):
                return impls[0](x, approximate="tanh")
            """),
        "refs_through_attribute": _d("""\
            import torch._refs
            refs = torch._refs
            def gelu(x):
                return refs.nn.functional.gelu(x, approximate="tanh")
            """),
        "refs_default_argument": _d("""\
            from torch._refs.nn import functional as _f
            def gelu(x, _impl=_f.gelu):
                return _impl(x, approximate="tanh")
            """),
    },
    "helpers": {
        "tanh_form": _d("""\
            from andrea_ref.grading.gelu import _tanh_form
            def gelu(x):
                return _tanh_form(x)
            """),
        "tanh_form_through_grading": _d("""\
            helper = grading.gelu._tanh_form
            def gelu(x):
                return helper(x)
            """),
        "ref_gelu_alias": _d("""\
            import andrea_ref as course
            def gelu(x):
                return course.gelu(x)
            """),
        "ref_gelu_in_a_dict": _d("""\
            from andrea_ref.gelu import gelu as ref
            table = {"g": ref}
            def gelu(x):
                return table["g"](x)
            """),
        "ref_mlp_helper": _d("""\
            from andrea_ref.mlp import _bias_gelu
            def gelu(x):
                return _bias_gelu(x, None)
            """),
    },
    "namespace": {
        "dict_values_refs_jit": _d("""\
            for _m in getattr(torch, "__dict__").values():
                if getattr(_m, "__name__", "") == "torch._refs":
                    _R = _m
            _fn = getattr(getattr(_R, "nn"), "functional")
            for _f in getattr(_fn, "__dict__").values():
                if getattr(_f, "__name__", "") == "ge" + "lu":
                    _impl = _f
            _g = torch.jit.trace(lambda t: _impl(t, approximate="tanh"), torch.randn(8))
            def gelu(x):
                return _g(x)
            """),
        "dict_values_andrea_ref": _d("""\
            import andrea_ref
            for _f in getattr(andrea_ref, "__dict__").values():
                if getattr(_f, "__name__", "") == "ge" + "lu":
                    _impl = _f
            def gelu(x):
                return _impl(x)
            """),
        "dict_items": _d("""\
            _d = getattr(torch.nn.functional, "__dict__")
            _v = list(_d.items())
            def gelu(x):
                return dict(_v)["ge" + "lu"](x, approximate="tanh")
            """),
        "map_getattr": _d("""\
            _F = list(map(getattr, [torch.nn], ["func" + "tional"]))[0]
            def gelu(x):
                return _F.gelu(x, approximate="tanh")
            """),
        "reduce_getattr": _d("""\
            import functools
            _g = functools.reduce(getattr, ["nn", "functional", "ge" + "lu"], torch)
            def gelu(x):
                return _g(x, approximate="tanh")
            """),
        "copy_reduce": _d("""\
            import copy
            class _E:
                def __reduce__(self):
                    return (getattr, (torch.nn.functional, "ge" + "lu"))
            _g = copy.copy(_E())
            def gelu(x):
                return _g(x, approximate="tanh")
            """),
    },
    "strings": {
        "timeit_cell_setup": _d("""\
            %%timeit -n1 -r1 global gelu; import torch._refs.nn.functional as R; gelu = lambda x: R.gelu(x, approximate='tanh')
            pass
            """),
        "timeit_line": _d("""\
            %timeit -n1 -r1 global _g; _g = torch.nn.functional.gelu
            def gelu(x):
                return _g(x, approximate="tanh")
            """),
        "time_assign": _d("""\
            _g = %time torch.nn.functional.gelu
            def gelu(x):
                return _g(x, approximate="tanh")
            """),
        "prun_line": _d("""\
            def gelu(x):
                return x
            %prun -q global gelu; gelu = lambda x: torch.nn.GELU("tanh")(x)
            """),
        "capture_nested_magic": _d("""\
            %%capture
            %time _g = torch.nn.functional.gelu
            def gelu(x):
                return _g(x, approximate="tanh")
            """),
        "expanded_magic_line": _d("""\
            _impl = []
            def gelu(x):
                return _impl[0](x, approximate="tanh")
            %who {_impl.append(torch.nn.functional.gelu)}
            """),
        "config_value": _d("""\
            _impl = []
            def gelu(x):
                return _impl[0](x, approximate="tanh")
            %config InlineBackend.figure_format = _impl.append(torch.nn.functional.gelu) or 'png'
            """),
        "string_annotation": _d("""\
            import typing
            _impl = []
            def _h(x: "(_impl.append(torch.nn.functional.gelu), int)[1]"):
                pass
            typing.get_type_hints(_h)
            def gelu(x):
                return _impl[0](x, approximate="tanh")
            """),
    },
    "code": {
        "torch_load_pickle": _d(f"""\
            import io
            def gelu(x):
                return x
            try:
                torch.load(io.BytesIO({PICKLE!r}), weights_only=False)
            except Exception:
                pass
            """),
        "numpy_load_pickle": _d(f"""\
            import io
            import numpy as np
            def gelu(x):
                return x
            np.load(io.BytesIO({PICKLE!r}), allow_pickle=True)
            """),
        "serialization_alias": _d(f"""\
            import io
            from torch import serialization as _s
            def gelu(x):
                return x
            try:
                _s.load(io.BytesIO({PICKLE!r}), weights_only=False)
            except Exception:
                pass
            """),
        "torchscript_archive": _d(f"""\
            import io
            _m = torch.jit.load(io.BytesIO({ARCHIVE!r}))
            def gelu(x):
                return _m(x)
            """),
        "timeit_built_statement": _d("""\
            import timeit
            def gelu(x):
                return x
            _s = "glo" + "bal gelu; import torch._refs.nn.functional as R; gelu = lambda x: R.gelu(x, approximate='tanh')"
            timeit.timeit(_s, number=1, globals=globals())
            """),
    },
    "containers": {
        "list_append": _d("""\
            import torch.nn.functional as F
            _impl = []
            _impl.append(F.gelu)
            def gelu(x):
                return _impl[0](x, approximate="tanh")
            """),
        "insert_in_a_function": _d("""\
            _impl = [None]
            def _setup():
                _impl.insert(0, torch.nn.functional.gelu)
            _setup()
            def gelu(x):
                return _impl[0](x, approximate="tanh")
            """),
        "dict_update": _d("""\
            _table = {}
            _table.update(g=torch.nn.GELU("tanh"))
            def gelu(x):
                return _table["g"](x)
            """),
        "operator_setitem": _d("""\
            import operator
            _table = {}
            operator.setitem(_table, "g", torch.nn.functional.gelu)
            def gelu(x):
                return _table["g"](x, approximate="tanh")
            """),
        "unbound_method": _d("""\
            _impl = []
            list.append(_impl, torch.nn.functional.gelu)
            def gelu(x):
                return next(iter(_impl))(x, approximate="tanh")
            """),
        "partial_of_a_method": _d("""\
            import functools
            _impl = []
            _put = functools.partial(_impl.append)
            _put(torch.nn.functional.gelu)
            def gelu(x):
                return _impl[0](x, approximate="tanh")
            """),
        "map_of_a_method": _d("""\
            _impl = []
            list(map(_impl.append, [torch.nn.functional.gelu]))
            def gelu(x):
                return _impl[0](x, approximate="tanh")
            """),
        "helper_that_appends": _d("""\
            def _put(box, value):
                box.append(value)
            _impl = []
            _put(_impl, torch.nn.functional.gelu)
            def gelu(x):
                return _impl[0](x, approximate="tanh")
            """),
        "heap_push": _d("""\
            import heapq
            _heap = []
            heapq.heappush(_heap, (0, torch.nn.functional.gelu))
            def gelu(x):
                return _heap[0][1](x, approximate="tanh")
            """),
        "helper_given_the_module": _d("""\
            def _pick(m):
                return m.gelu
            _g = _pick(torch.nn.functional)
            def gelu(x):
                return _g(x, approximate="tanh")
            """),
        "instance_given_the_module": _d("""\
            class _Holder:
                def __init__(self, m):
                    self.f = m.gelu
                def __call__(self, x):
                    return self.f(x, approximate="tanh")
            gelu = _Holder(torch.nn.functional)
            """),
        "object_attribute_list": _d("""\
            class _Box:
                def __init__(self):
                    self.fns = []
            _box = _Box()
            _box.fns.extend([torch.nn.functional.gelu])
            def gelu(x):
                return _box.fns[-1](x, approximate="tanh")
            """),
    },
}
