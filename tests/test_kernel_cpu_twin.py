"""The CPU twin of the GELU kernel, built through the real loader, against PyTorch.

One cold build per test session, into a temporary cache (ANDREA_KERNEL_CACHE), so the test
proves the build works from nothing. The twin runs cuda/gelu_math.h, the arithmetic the CUDA
kernels run, so these tests check the handwritten math on every machine.

Tolerances (rtol, atol):
* float32 vs F.gelu(approximate="tanh"): 1.3e-6 / 1e-5 (design notes, "fp32 precise"): both
  compute the same formula in fp32 with a correctly rounded tanh to within an ulp or two, so
  they agree to a few ulps; 1e-5 is still 20x tighter than the erf/tanh gap (4.7e-4).
* float64: 1e-12 / 1e-13: same formula, double precision; only operation order differs.
"""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

from andrea_ref import kernels
from andrea_ref.kernels import loader as kloader

FP32 = dict(rtol=1.3e-6, atol=1e-5)
FP64 = dict(rtol=1e-12, atol=1e-13)


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """Build the twin cold (fresh cache) through the real loader; make it the process loader."""
    cache = tmp_path_factory.mktemp("andrea_kernel_cache")
    saved = os.environ.get(kloader.ENV_CACHE)
    os.environ[kloader.ENV_CACHE] = str(cache)
    try:
        loader = kloader.KernelLoader(mode="require", backend="cpu-twin")
        st = loader.load()
        kernels.use_loader(loader)
        yield st
    finally:
        kernels.reset()
        if saved is None:
            os.environ.pop(kloader.ENV_CACHE, None)
        else:
            os.environ[kloader.ENV_CACHE] = saved


def _inputs(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 2.5
    flat = x.view(-1)
    specials = torch.tensor([0.0, 2.7, -2.7, 6.0, -6.0, 1e-4, -1e-4, 30.0, -30.0], dtype=torch.float64)
    k = min(flat.numel(), specials.numel())
    flat[:k] = specials[:k]
    return x.to(dtype)


def _on_kernel(y):
    return y.grad_fn is not None and "GeluFunction" in type(y.grad_fn).__name__


def test_cold_build_status(twin):
    assert twin.backend == "cpu-twin"
    assert twin.compiled_now, "the fixture's cache was empty, so this load must have compiled"
    assert twin.build_dir and os.path.isdir(twin.build_dir)
    assert "CPU twin" in twin.reason
    assert kernels.status().backend == "cpu-twin"
    # a second call in the same process finds the library loaded and compiles nothing
    again = kernels.load()
    assert not again.compiled_now and (again.backend, again.build_dir) == (twin.backend, twin.build_dir)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, FP32), (torch.float64, FP64)])
@pytest.mark.parametrize("shape", [(1,), (7,), (33, 65), (4, 5, 129), (2**16 + 3,)])
def test_forward_matches_torch(twin, dtype, tol, shape):
    x = _inputs(shape, dtype)
    y = kernels.gelu(x)
    torch.testing.assert_close(y, F.gelu(x, approximate="tanh"), **tol)
    # and the raw operator, both variants (identical on the CPU)
    ops = kernels.ops()
    torch.testing.assert_close(ops.gelu_fwd(x, False), ops.gelu_fwd(x, True), rtol=0, atol=0)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, FP32), (torch.float64, FP64)])
def test_backward_matches_torch(twin, dtype, tol):
    x = _inputs((257, 31), dtype, seed=1)
    dy = _inputs((257, 31), dtype, seed=2)
    xa = x.clone().requires_grad_(True)
    ya = kernels.gelu(xa)
    assert _on_kernel(ya)
    (dxa,) = torch.autograd.grad(ya, xa, dy)
    xb = x.clone().requires_grad_(True)
    (dxb,) = torch.autograd.grad(F.gelu(xb, approximate="tanh"), xb, dy)
    # the backward multiplies by dy (|dy| up to ~10): scale atol with it
    torch.testing.assert_close(dxa, dxb, rtol=tol["rtol"] * 10, atol=tol["atol"] * 10)


@pytest.mark.parametrize("dtype,tol", [(torch.float32, FP32), (torch.float64, FP64)])
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (64, 96), (2, 17, 33)])
def test_bias_gelu_forward_and_backward(twin, dtype, tol, shape):
    x = _inputs(shape, dtype, seed=3)
    b = _inputs(shape[-1:], dtype, seed=4)
    dy = _inputs(shape, dtype, seed=5)
    xa, ba = x.clone().requires_grad_(True), b.clone().requires_grad_(True)
    ya = kernels.bias_gelu(xa, ba)
    assert _on_kernel(ya)
    xb, bb = x.clone().requires_grad_(True), b.clone().requires_grad_(True)
    yb = F.gelu(xb + bb, approximate="tanh")
    # In float32/float64 the eager pair stores x + b in the precision the fused kernel computes
    # it in, so the two agree to the usual tolerance.
    torch.testing.assert_close(ya, yb, **tol)
    dxa, dba = torch.autograd.grad(ya, (xa, ba), dy)
    dxb, dbb = torch.autograd.grad(yb, (xb, bb), dy)
    torch.testing.assert_close(dxa, dxb, rtol=tol["rtol"] * 10, atol=tol["atol"] * 10)
    rows = x.numel() // x.shape[-1]
    torch.testing.assert_close(dba, dbb, rtol=tol["rtol"] * 10, atol=tol["atol"] * 10 * rows)


def test_bias_gelu_one_dimensional_input(twin):
    x = _inputs((9,), torch.float64).requires_grad_(True)
    b = _inputs((9,), torch.float64, seed=8).requires_grad_(True)
    y = kernels.bias_gelu(x, b)
    dx, db = torch.autograd.grad(y.sum(), (x, b))
    torch.testing.assert_close(db, dx, rtol=0, atol=0)  # a 1-d x has no rows to sum over
    torch.testing.assert_close(y, F.gelu(x + b, approximate="tanh"), **FP64)


def test_non_contiguous_inputs_are_read_correctly(twin):
    base = _inputs((64, 48), torch.float32, seed=6)
    views = {
        "transposed": base.t(),
        "strided": base[:, ::3],
        "offset": base.view(-1)[1:1001],
        "expanded": base[:1].expand(5, 48),
    }
    for name, v in views.items():
        assert not v.is_contiguous() or v.storage_offset() > 0, name
        torch.testing.assert_close(kernels.gelu(v), F.gelu(v, approximate="tanh"), **FP32, msg=name)
    x = base.t()  # [48, 64]: bias along the last dim of the *view*
    b = _inputs((64,), torch.float32, seed=7)
    torch.testing.assert_close(kernels.bias_gelu(x, b), F.gelu(x + b, approximate="tanh"), **FP32)
    torch.testing.assert_close(kernels.bias_gelu(x.contiguous(), b[::1]), F.gelu(x + b, approximate="tanh"), **FP32)
    bs = _inputs((128,), torch.float32, seed=9)[::2]  # strided bias
    torch.testing.assert_close(kernels.bias_gelu(x, bs), F.gelu(x + bs, approximate="tanh"), **FP32)


def test_empty_tensors(twin):
    for shape in [(0,), (0, 5), (3, 0)]:
        x = torch.empty(shape, requires_grad=True)
        y = kernels.gelu(x)
        assert y.shape == x.shape
        y.sum().backward()
        assert x.grad.shape == x.shape
    x = torch.empty(0, 5, requires_grad=True)
    b = torch.randn(5, requires_grad=True)
    y = kernels.bias_gelu(x, b)
    assert y.shape == (0, 5)
    y.sum().backward()
    assert torch.equal(b.grad, torch.zeros(5))


def test_half_precision_on_the_twin(twin):
    # float math inside, rounded once at the end: within one rounding of the fp64 formula
    x64 = _inputs((4096,), torch.float64, seed=10)
    for dtype, rtol, atol in [(torch.bfloat16, 1.6e-2, 1e-3), (torch.float16, 1e-3, 1e-4)]:
        x = x64.to(dtype)
        y = kernels.gelu(x)
        assert y.dtype == dtype
        torch.testing.assert_close(y.double(), F.gelu(x.double(), approximate="tanh"), rtol=rtol, atol=atol)


def test_gradcheck_float64(twin):
    g = torch.Generator().manual_seed(11)
    x = (torch.randn(6, 5, generator=g, dtype=torch.float64) * 2).requires_grad_(True)
    b = torch.randn(5, generator=g, dtype=torch.float64).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: kernels.gelu(t), (x,))
    assert torch.autograd.gradcheck(lambda t, c: kernels.bias_gelu(t, c), (x, b))


def test_double_backward_is_refused(twin):
    x = torch.randn(4, dtype=torch.float64, requires_grad=True)
    (dx,) = torch.autograd.grad(kernels.gelu(x).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        dx.sum().backward()


def test_fast_path_ready(twin):
    assert kernels.fast_path_ready(torch.randn(3))
    assert kernels.fast_path_ready(torch.randn(3, dtype=torch.float64))
    assert not kernels.fast_path_ready(torch.arange(3))
    assert not kernels.fast_path_ready([1.0, 2.0])
    assert not kernels.fast_path_ready(torch.randn(3, device="meta"))
    assert not kernels.fast_path_ready(torch.randn(3, dtype=torch.complex64))


# ----------------------------------------------------------------- bad input names the argument


def test_bad_inputs_name_the_argument(twin):
    x = torch.randn(4, 6)
    with pytest.raises(TypeError, match="'x'"):
        kernels.gelu(torch.arange(4))
    with pytest.raises(TypeError, match="'x'"):
        kernels.gelu([1.0, 2.0])
    with pytest.raises(ValueError, match=r"'b' must have shape \[6\].*\[7\]"):
        kernels.bias_gelu(x, torch.randn(7))
    with pytest.raises(ValueError, match=r"'b' must have shape \[6\].*\[2, 6\]"):
        kernels.bias_gelu(x, torch.randn(2, 6))
    with pytest.raises(TypeError, match="'b' must have dtype torch.float32.*torch.float64"):
        kernels.bias_gelu(x, torch.randn(6, dtype=torch.float64))
    with pytest.raises(ValueError, match="'b' must be on cpu.*meta"):
        kernels.bias_gelu(x, torch.randn(6, device="meta"))
    with pytest.raises(TypeError, match="'b'"):
        kernels.bias_gelu(x, [0.0] * 6)
    with pytest.raises(ValueError, match="'x' must have at least 1 dimension"):
        kernels.bias_gelu(torch.tensor(1.0), torch.randn(1))
    with pytest.raises(ValueError, match="variant"):
        kernels.gelu(x, variant="turbo")


def test_operator_checks_name_the_argument(twin):
    """The C++ checks behind the Python ones (for anyone calling torch.ops directly)."""
    ops = kernels.ops()
    x = torch.randn(4, 6)
    with pytest.raises(ValueError, match="argument 'b' must have shape \\[6\\]"):
        ops.bias_gelu_fwd(x, torch.randn(5), False)
    with pytest.raises(TypeError, match="argument 'b' must have the dtype of x"):
        ops.bias_gelu_fwd(x, torch.randn(6, dtype=torch.float64), False)
    with pytest.raises(TypeError, match="argument 'x' must have dtype"):
        ops.gelu_fwd(torch.arange(3), False)
    with pytest.raises(ValueError, match="argument 'dy' must have the shape of x"):
        ops.gelu_bwd(torch.randn(3), torch.randn(4), False)
    with pytest.raises(TypeError, match="argument 'dy' must have the dtype of x"):
        ops.gelu_bwd(torch.randn(4, dtype=torch.float64), torch.randn(4), False)


def test_variant_resolution():
    assert kernels.use_fast_tanh(torch.float32, "auto") is False
    assert kernels.use_fast_tanh(torch.bfloat16, "auto") is True
    assert kernels.use_fast_tanh(torch.float16, "auto") is True
    assert kernels.use_fast_tanh(torch.float32, "fast") is True
    assert kernels.use_fast_tanh(torch.bfloat16, "precise") is False
    with pytest.raises(ValueError, match="variant"):
        kernels.use_fast_tanh(torch.float32, "quick")


def test_variant_env_var(monkeypatch):
    monkeypatch.setenv(kernels.ENV_VARIANT, "fast")
    assert kernels.use_fast_tanh(torch.float32) is True
    monkeypatch.setenv(kernels.ENV_VARIANT, "bogus")
    with pytest.raises(ValueError, match="ANDREA_GELU_VARIANT"):
        kernels.use_fast_tanh(torch.float32)


def test_selfcheck_benchmark_logic_runs_on_the_twin(twin):
    """The self-check's benchmark code, driven on the CPU with a wall-clock timer, so its
    bookkeeping (rows, ratios, targets) is exercised before it ever meets a GPU."""
    from andrea_ref.kernels import selfcheck

    timings, targets = selfcheck.benchmark(kernels, 2**14, 1, 2, lambda _m: None, device="cpu",
                                           timer=selfcheck.time_cpu)
    assert len(timings) == 3 * 12  # per dtype: copy + 3 fwd + 3 bwd + 3 bias fwd + 2 bias bwd
    assert all(t.ms > 0 and t.gbps > 0 for t in timings)
    copies = [t for t in timings if t.op == "copy"]
    assert all(t.ratio_to_copy == 1.0 for t in copies)
    names = [t["target"] for t in targets]
    assert len(names) == 2 * 4 + 2  # fp32, bf16: 4 targets each; fp16: 2
    assert all(isinstance(t["met"], bool) for t in targets)


@pytest.mark.skipif(torch.cuda.is_available(), reason="tests the self-check's no-GPU path")
def test_selfcheck_cpu_path(twin, tmp_path, capsys):
    import json

    from andrea_ref.kernels import selfcheck

    out = tmp_path / "sc.json"
    # correct twin, but --require-gpu: the checks pass and the exit code says "no GPU"
    assert selfcheck.main(["--quick", "--require-gpu", "--json", str(out)]) == selfcheck.EXIT_NO_GPU
    text = capsys.readouterr().out
    assert "No CUDA GPU is visible" in text and "self-check passed" in text
    data = json.loads(out.read_text())
    assert data["passed"] is True and data["kernel"]["backend"] == "cpu-twin"
    assert {c["dtype"] for c in data["correctness"]} == {"float32", "float64", "bfloat16", "float16"}
