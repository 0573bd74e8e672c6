"""The CUDA sources compile (no GPU needed, only nvcc) and the PTX is what we claim.

* gelu_kernels.cu compiles to PTX for sm_80 and sm_90, and to an sm_90 object, with the
  flags torch.utils.cpp_extension passes (which switch off the half/bf16 operators) and
  with every warning turned into an error.
* The fast kernels use `tanh.approx.f32`; the precise ones never do.
* The vectorised kernels really issue 128-bit loads and stores.
* gelu_math.h compiles as plain C++ (the twin's view of it) and the CUDA binding compiles
  against the torch headers.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

CUDA_DIR = Path(__file__).resolve().parents[1] / "cuda"


def _nvcc():
    found = shutil.which("nvcc")
    if found:
        return found
    for home in ("/usr/local/cuda",):
        candidate = Path(home) / "bin" / "nvcc"
        if candidate.exists():
            return str(candidate)
    return None


NVCC = _nvcc()
pytestmark = pytest.mark.nvcc
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not installed")

# What torch.utils.cpp_extension adds to every nvcc command line.
TORCH_NVCC_FLAGS = [
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
    "-std=c++17",
]
STRICT = ["-O3", "-Werror", "all-warnings", "-Xcompiler", "-Wall,-Wextra"]


def _compile(tmp_path, mode, arch):
    out = tmp_path / f"gelu_{arch}.{mode}"
    cmd = [NVCC, f"-{mode}", f"-arch={arch}", *TORCH_NVCC_FLAGS, *STRICT,
           str(CUDA_DIR / "gelu_kernels.cu"), "-o", str(out)]
    if mode == "c":
        cmd[4:4] = ["-Xcompiler", "-fPIC"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stderr.strip() == "", f"nvcc printed warnings:\n{res.stderr}"
    return out


def _entries(ptx: str):
    """{kernel name: body} for every .entry in a PTX file."""
    parts = re.split(r"(?m)^\s*(?:\.visible\s+)?\.entry\s+", ptx)[1:]
    return {p.split("(", 1)[0].strip(): p for p in parts}


def _fast_flag(name: str) -> bool:
    # gelu_*_kernel<Storage, Fast, Backward, Bias>: the first bool template argument is Fast.
    return re.search(r"Lb([01])E", name).group(1) == "1"


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_ptx_compiles_and_variants_are_what_they_say(tmp_path, arch):
    ptx = _compile(tmp_path, "ptx", arch).read_text()
    entries = _entries(ptx)
    # 3 storage types x 2 variants x (fwd, bwd, bias fwd, bias bwd) x (vectorised, scalar)
    assert len(entries) == 48, sorted(entries)
    for name, body in entries.items():
        if _fast_flag(name):
            assert "tanh.approx.f32" in body, f"fast kernel without the hardware tanh: {name}"
        else:
            assert "tanh.approx" not in body, f"precise kernel uses the hardware tanh: {name}"
        if "vectorized" in name:
            assert re.search(r"ld\.global(\.nc)?\.v4\.(u32|b32|f32)", body), f"no 128-bit load: {name}"
            assert re.search(r"st\.global\.v4\.(u32|b32|f32)", body), f"no 128-bit store: {name}"
    for storage in ("Float32", "Float16", "BFloat16"):
        assert any(storage in n for n in entries), storage
    # 64-bit indexing: the grid-stride loops compare 64-bit counters
    assert "setp.lt.s64" in ptx or "setp.ge.s64" in ptx


@needs_nvcc
def test_object_compiles_for_sm90(tmp_path):
    obj = _compile(tmp_path, "c", "sm_90")
    assert obj.stat().st_size > 0


def test_math_header_is_plain_cpp(tmp_path):
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "use_header.cpp"
    src.write_text(
        '#include "gelu_math.h"\n'
        "#include <cstdio>\n"
        "int main() {\n"
        "  const double x = 2.7;\n"
        "  std::printf(\"%.17g %.17g %.9g %.9g\\n\", andrea::gelu_forward<false>(x),\n"
        "              andrea::gelu_derivative<false>(x), andrea::gelu_forward<true>(2.7f),\n"
        "              andrea::gelu_derivative<true>(2.7f));\n"
        "}\n"
    )
    exe = tmp_path / "use_header"
    res = subprocess.run([cxx, "-std=c++17", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{CUDA_DIR}",
                          str(src), "-o", str(exe)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    values = [float(v) for v in subprocess.run([str(exe)], capture_output=True, text=True,
                                               timeout=30).stdout.split()]
    x = torch.tensor(2.7, dtype=torch.float64, requires_grad=True)
    y = torch.nn.functional.gelu(x, approximate="tanh")
    (dy,) = torch.autograd.grad(y, x)
    assert abs(values[0] - y.item()) < 1e-14
    assert abs(values[1] - dy.item()) < 1e-14
    # on the host the fast variant is the precise tanh, in float
    assert abs(values[2] - y.item()) < 1e-6 and abs(values[3] - dy.item()) < 1e-6


@needs_nvcc
def test_cuda_binding_compiles_against_torch_headers(tmp_path):
    """Syntax and types of gelu_binding.cpp (a CPU-only torch cannot link it)."""
    cxx = shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    torch_inc = Path(torch.__file__).parent / "include"
    candidates = [Path(NVCC).parents[1] / "include", Path(NVCC).resolve().parents[1] / "include",
                  Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"]
    cuda_inc = next((c for c in candidates if (c / "cuda_runtime.h").exists()), None)
    if cuda_inc is None:
        pytest.skip("cuda_runtime.h not found next to nvcc")
    if not (torch_inc / "c10" / "cuda" / "CUDAGuard.h").exists():
        pytest.skip("this torch ships no c10/cuda headers")
    includes = ["-isystem", str(torch_inc), "-isystem", str(torch_inc / "torch/csrc/api/include"),
                "-isystem", str(cuda_inc), f"-I{CUDA_DIR}"]
    macros = torch_inc / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h"
    if not macros.exists():  # generated at torch's build time; absent from CPU wheels
        stub = tmp_path / "stub" / "c10" / "cuda" / "impl"
        stub.mkdir(parents=True)
        (stub / "cuda_cmake_macros.h").write_text("#pragma once\n")
        includes += ["-isystem", str(tmp_path / "stub")]
    res = subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                          "-DANDREA_OPS_NS=andrea_gelu_syntax", *includes,
                          str(CUDA_DIR / "gelu_binding.cpp")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
