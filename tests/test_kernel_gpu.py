"""The CUDA kernels on a real GPU (skipped where none is visible).

The thorough matrix (every dtype, variant, size, layout, > 2^31 elements, speed) is
``python -m andrea_ref.kernels.selfcheck``; these tests run its correctness part at small
sizes plus what only a test can see: streams, devices, the public API's use of the kernel.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from andrea_ref import kernels
from andrea_ref.kernels import selfcheck

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU visible"),
]


@pytest.fixture(scope="module")
def cuda_kernels():
    kernels.reset()
    from andrea_ref.kernels.loader import KernelLoader

    loader = KernelLoader(mode="require")
    st = loader.load()
    kernels.use_loader(loader)
    assert st.backend == "cuda", st.reason
    yield st
    kernels.reset()


def test_correctness_matrix_small(cuda_kernels):
    checks = selfcheck.check_correctness(
        kernels, (torch.float32, torch.bfloat16, torch.float16), ("precise", "fast"), "cuda",
        2**12 + 3, lambda _msg: None,
    )
    failed = [c for c in checks if not c.passed]
    assert not failed, "\n".join(f"{c.op} {c.dtype} {c.variant} {c.case}: {c.max_abs_err:.3g} {c.note}" for c in failed)


def test_public_api_runs_the_kernel(cuda_kernels):
    x = torch.randn(64, 96, device="cuda", requires_grad=True)
    b = torch.randn(96, device="cuda", requires_grad=True)
    assert kernels.fast_path_ready(x)
    y = kernels.gelu(x)
    assert "GeluFunction" in type(y.grad_fn).__name__
    torch.testing.assert_close(y, F.gelu(x, approximate="tanh"), rtol=1.3e-6, atol=1e-5)
    z = kernels.bias_gelu(x, b)
    torch.testing.assert_close(z, F.gelu(x + b, approximate="tanh"), rtol=1.3e-6, atol=1e-5)
    z.sum().backward()
    assert b.grad.shape == (96,)


def test_runs_on_the_current_stream(cuda_kernels):
    side = torch.cuda.Stream()
    x = torch.randn(2**22, device="cuda")
    expected = F.gelu(x, approximate="tanh")
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = kernels.gelu(x)  # queued on `side`; reading y on `side` must see the result
        ok = torch.allclose(y, expected, rtol=1.3e-6, atol=1e-5)
    side.synchronize()
    assert bool(ok)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_device_guard(cuda_kernels):
    x = torch.randn(1000, device="cuda:1")
    with torch.cuda.device(0):
        y = kernels.gelu(x)
    assert y.device == x.device
    torch.testing.assert_close(y, F.gelu(x, approximate="tanh"), rtol=1.3e-6, atol=1e-5)


def test_device_mismatch_names_b(cuda_kernels):
    with pytest.raises(ValueError, match="'b' must be on"):
        kernels.bias_gelu(torch.randn(4, 3, device="cuda"), torch.randn(3))


def test_float64_on_cuda_uses_torch(cuda_kernels):
    x = torch.randn(10, device="cuda", dtype=torch.float64)
    assert not kernels.fast_path_ready(x)
    torch.testing.assert_close(kernels.gelu(x), F.gelu(x, approximate="tanh"))


def test_selfcheck_quick_passes(cuda_kernels, tmp_path):
    out = tmp_path / "selfcheck.json"
    assert selfcheck.main(["--quick", "--no-bench", "--big", "off", "--json", str(out)]) == 0
    assert out.exists()
