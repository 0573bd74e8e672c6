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
  own GELU, under other names.

``tests/test_classroom_shortcuts.py`` grades them through the real grader: none gets
the points the rule against shortcuts governs, and each is reported with its evidence.
"""
from __future__ import annotations

import textwrap

ASSIGNMENT = "03_gelu"
NOTEBOOK = "gelu.ipynb"


def _d(text: str) -> str:
    return textwrap.dedent(text)


CLASSES: dict[str, dict[str, str]] = {
    "alias": {
        "core_module_alias": _d("""\
            import andrea_ref.grading._core as c
            c.Blocker.__enter__ = lambda self: self
            import torch.nn.functional as F
            def gelu(x):
                return F.gelu(x, approximate="tanh")
            """),
        "grading_attribute_alias": _d("""\
            g = grading
            core = g._core
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
            name = "_" + "co" + "re"
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
}
