"""The checks' integrity snapshot tells torch's own rebinding from a learner's.

``torch.set_default_dtype(torch.float64)`` makes PyTorch's core rebind ``torch.Storage``,
importing ``torch._dynamo`` wraps some of torch's functions: honest notebooks do such
things, and the checks must neither refuse them nor grade them differently. A name
rebound by the learner's own code is still refused, however it is dressed up. Each
case runs in a fresh interpreter: these settings are global to a process."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class

GRADE_ALL = """
import contextlib, io, json, math, torch
from andrea_ref import grading
from andrea_ref.grading import integrity
from grading_answers import gelu, layer_norm

def unbiased(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(x.var(dim=-1, keepdim=True) + eps) + beta

def erf_gelu(x):
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))

def outcome():
    out = {"integrity": integrity.integrity_problem()}
    for name, fn, checks in (
            ("gelu", gelu, (grading.check_gelu_shape, grading.check_gelu_values, grading.check_gelu_extremes)),
            ("erf_gelu", erf_gelu, (grading.check_gelu_values,)),
            ("layer_norm", layer_norm, (grading.check_layer_norm_shape, grading.check_layer_norm_normalises,
                                        grading.check_layer_norm_affine, grading.check_layer_norm_eps)),
            ("unbiased", unbiased, (grading.check_layer_norm_normalises, grading.check_layer_norm_eps))):
        verdicts = []
        for check in checks:
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    check(fn, seed=20261130)
                verdicts.append("pass")
            except AssertionError as exc:
                verdicts.append(str(exc))
        out[name] = verdicts
    return out
"""


def _run(setup: str) -> dict:
    script = GRADE_ALL + textwrap.dedent(setup) + "\nprint(json.dumps(outcome()))\n"
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}", "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def plain():
    return _run("")


HONEST = {
    "default dtype float64": "torch.set_default_dtype(torch.float64)",
    "default dtype float64 and back": "torch.set_default_dtype(torch.float64)\ntorch.set_default_dtype(torch.float32)",
    "default tensor type": "import warnings\nwarnings.simplefilter('ignore')\n"
                           "torch.set_default_tensor_type(torch.DoubleTensor)",
    "default device cpu": "torch.set_default_device('cpu')",
    "dynamo, compile, seeds, print options": (
        "import torch._dynamo\n"
        "f = torch.compile(lambda t: t + 1, backend='eager')\n"
        "f(torch.ones(2))\n"
        "torch.manual_seed(0)\n"
        "torch.set_printoptions(precision=3)\n"
        "torch.use_deterministic_algorithms(True)\n"
        "torch.set_float32_matmul_precision('high')\n"
        "torch.autograd.set_detect_anomaly(True)\n"
        "import torch.fx, torch.func, torch.export\n"),
}


@pytest.mark.parametrize("setup", HONEST, ids=list(HONEST))
def test_torch_settings_an_honest_notebook_makes_change_no_verdict(plain, setup):
    assert plain["integrity"] is None and plain["gelu"] == ["pass"] * 3 and plain["layer_norm"] == ["pass"] * 4
    assert plain["erf_gelu"] != ["pass"] and plain["unbiased"][0] != "pass"
    # same verdicts, same messages: the checks draw their inputs in float64 on the CPU
    # whatever the defaults, so the kernel and the independent check see the same numbers
    assert _run(HONEST[setup]) == plain


HOSTILE = {
    "a storage class of the wrong dtype": ("torch.set_default_dtype(torch.float64)\n"
                                           "torch.Storage = torch.HalfStorage", "torch.Storage"),
    "something else as torch.Storage": ("torch.Storage = object", "torch.Storage"),
    "a wrapper that claims to wrap tanh": ("import functools\n"
                                           "torch.tanh = functools.wraps(torch.tanh)(lambda t: t * 0)",
                                           "torch.tanh"),
    "torch's own wrapper around another function": ("import torch._dynamo\n"
                                                    "torch.tanh = torch._dynamo.disable(lambda t: t * 0)",
                                                    "torch.tanh"),
    "a comparison": ("torch.allclose = lambda *a, **k: True", "torch.allclose"),
}


@pytest.mark.parametrize("setup", HOSTILE, ids=list(HOSTILE))
def test_a_name_the_learner_rebinds_is_still_refused(setup):
    code, name = HOSTILE[setup]
    got = _run(code)
    assert name in (got["integrity"] or ""), got["integrity"]
    assert all(name in v for v in got["gelu"]), got["gelu"]
