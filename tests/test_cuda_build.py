"""The CUDA kernel built, linked and loaded against a CUDA build of torch, without a GPU.

Run by ``make test-cuda-build`` in ``.venv-cuda`` (a CUDA build of torch whose CUDA major
version is nvcc's). In the course's ``.venv`` (CPU-only torch) the whole file is skipped:
a CPU-only torch cannot build ``.cu`` files at all.

What is proven here, all through the real loader (``andrea_ref.kernels.loader``):

* the CUDA library builds for sm_80 and sm_90 (``TORCH_CUDA_ARCH_LIST`` set explicitly, as
  no GPU can be asked), links and loads in build-only mode (``ANDREA_KERNEL_BUILD_ONLY``);
* every operator is registered with the schema the Python side calls, with a CUDA and a
  CPU implementation, and the autograd functions and the public API run through the build
  (on its CPU twin: every dtype, both variants, forward and backward, bias and no bias);
* the library holds machine code (SASS) for each requested architecture and the PTX for the
  newest; every kernel (3 storage types x 2 variants x 4 operations x vectorised/scalar) is
  there for each architecture; the fast variant's PTX uses ``tanh.approx.f32`` and its SASS
  the hardware tanh (``MUFU.TANH``), the precise variant neither.

What needs a GPU (launching the kernels) is ``cuda/gpu_check.sh``.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from andrea_ref.kernels import loader as kloader

REPO = Path(__file__).resolve().parents[1]
#: sm_80 and sm_90 machine code, plus compute_90 PTX that newer GPUs compile at load time.
ARCH_LIST = "8.0;9.0+PTX"
SASS_ARCHS = {"sm_80", "sm_90"}
PTX_ARCHS = {"sm_90"}

#: The operators and the schemas that andrea_ref/kernels/autograd.py calls them with.
SCHEMAS = {
    "gelu_fwd": "gelu_fwd(Tensor x, bool fast) -> Tensor",
    "gelu_bwd": "gelu_bwd(Tensor dy, Tensor x, bool fast) -> Tensor",
    "bias_gelu_fwd": "bias_gelu_fwd(Tensor x, Tensor b, bool fast) -> Tensor",
    "bias_gelu_bwd": "bias_gelu_bwd(Tensor dy, Tensor x, Tensor b, bool fast) -> Tensor",
}
STORAGE = ("Float32", "Float16", "BFloat16")
KERNELS_PER_ARCH = len(STORAGE) * 2 * 4 * 2  # storage x variant x op x (vectorised, scalar)

pytestmark = [
    pytest.mark.nvcc,
    pytest.mark.skipif(
        torch.version.cuda is None,
        reason=f"torch {torch.__version__} is a CPU-only build; `make test-cuda-build` runs this "
        "file with a CUDA build of torch",
    ),
]


# --------------------------------------------------------------------------- the build


@pytest.fixture(scope="module")
def build():
    """The CUDA library, built (or loaded from the loader's cache) in build-only mode."""
    nvcc = kloader.nvcc_path()
    if nvcc is None:
        pytest.skip("nvcc was not found (CUDA_HOME or PATH)")
    nvcc_ver = kloader.nvcc_version(nvcc)
    if nvcc_ver.split(".")[0] != torch.version.cuda.split(".")[0]:
        pytest.skip(f"nvcc is CUDA {nvcc_ver} but torch {torch.__version__} is built for CUDA "
                    f"{torch.version.cuda}: the loader refuses mismatched majors")
    saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = ARCH_LIST
    try:
        loader = kloader.KernelLoader(mode="require", backend="cuda", build_only=True)
        status = loader.load()
        plan = kloader.plan("cuda")
    finally:
        if saved is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved
    return loader, status, plan, nvcc


def test_builds_and_loads_without_a_gpu(build):
    loader, status, plan, _ = build
    assert status.backend == "cuda", status.reason
    assert "no kernel launched" in status.reason
    assert plan.arch_list == ARCH_LIST
    assert Path(status.build_dir) == plan.build_dir
    assert plan.library_path.is_file()
    assert loader.ops is not None


def test_build_only_switch_from_the_environment(build):
    """The documented switch, in a fresh process: the cached library loads, nothing compiles."""
    env = dict(os.environ, ANDREA_KERNEL_BUILD_ONLY="1", ANDREA_KERNEL="require",
               TORCH_CUDA_ARCH_LIST=ARCH_LIST)
    code = ("from andrea_ref import kernels; st = kernels.status(); "
            "print('STATUS', st.backend, st.compiled_now)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, cwd=REPO, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().splitlines()[-1] == "STATUS cuda False"

    # without the switch and without a GPU, require mode says why instead of launching
    env.pop("ANDREA_KERNEL_BUILD_ONLY")
    code = ("from andrea_ref.kernels.loader import KernelLoader; "
            "KernelLoader(mode='require', backend='cuda').load()")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=600, cwd=REPO, env=env)
    if torch.cuda.is_available():
        assert out.returncode == 0, out.stderr
    else:
        assert out.returncode != 0
        assert "KernelBuildError" in out.stderr


# --------------------------------------------------------------------------- operators


def test_schemas_in_the_header_are_the_ones_python_calls():
    header = (REPO / "cuda" / "gelu_ops.h").read_text()
    declared = {name: schema for schema, name in re.findall(r'kSchema\w+\s*=\s*"((\w+)\([^"]*)"', header)}
    assert declared == SCHEMAS


def test_every_operator_registered_with_its_schema(build):
    loader, _, plan, _ = build
    for op, schema in SCHEMAS.items():
        overload = getattr(loader.ops, op).default
        assert str(overload._schema) == f"{plan.name}::{schema}"
        for key in ("CPU", "CUDA"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(overload.name(), key), (op, key)


def _ref(h: torch.Tensor) -> tuple:
    h = h.double()
    k = (2.0 / torch.pi) ** 0.5
    t = torch.tanh(k * (h + 0.044715 * h**3))
    y = 0.5 * h * (1 + t)
    dy = 0.5 * (1 + t) + 0.5 * h * (1 - t * t) * k * (1 + 3 * 0.044715 * h * h)
    return y, dy


TOL = {torch.float32: (1.3e-6, 1e-5), torch.float64: (1e-12, 1e-12),
       torch.float16: (1e-3, 1e-4), torch.bfloat16: (1.6e-2, 1e-3)}


@pytest.mark.parametrize("dtype", list(TOL), ids=lambda d: str(d).replace("torch.", ""))
@pytest.mark.parametrize("fast", [False, True], ids=["precise", "fast"])
def test_autograd_functions_call_the_build(build, dtype, fast):
    """autograd.py's calls (forward, backward, fused bias forward and backward) against the
    built library's operators, on CPU tensors (its twin): a schema the Python side does not
    match fails here."""
    from andrea_ref.kernels.autograd import BiasGeluFunction, GeluFunction

    ops = build[0].ops
    rtol, atol = TOL[dtype]
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(5, 12, generator=g) * 3).to(dtype).requires_grad_(True)
    b = torch.randn(12, generator=g).to(dtype).requires_grad_(True)
    dy = torch.randn(5, 12, generator=g).to(dtype)

    y = GeluFunction.apply(x, fast, ops)
    (dx,) = torch.autograd.grad(y, x, dy)
    ref_y, ref_d = _ref(x.detach())
    torch.testing.assert_close(y.double(), ref_y, rtol=rtol, atol=atol)
    torch.testing.assert_close(dx.double(), dy.double() * ref_d, rtol=rtol, atol=atol)

    z = BiasGeluFunction.apply(x, b, fast, ops)
    dxb, db = torch.autograd.grad(z, (x, b), dy)
    ref_z, ref_dz = _ref(x.detach().double() + b.detach().double())
    torch.testing.assert_close(z.double(), ref_z, rtol=rtol, atol=atol)
    torch.testing.assert_close(dxb.double(), dy.double() * ref_dz, rtol=rtol, atol=atol)
    torch.testing.assert_close(db.double(), (dy.double() * ref_dz).sum(0), rtol=rtol, atol=5 * atol)


def test_public_api_runs_through_the_build(build):
    from andrea_ref import kernels

    kernels.use_loader(build[0])
    try:
        x = torch.randn(7, 9, dtype=torch.float64, requires_grad=True)
        b = torch.randn(9, dtype=torch.float64, requires_grad=True)
        assert kernels.fast_path_ready(x)
        y = kernels.bias_gelu(x, b)
        assert "GeluFunction" in type(y.grad_fn).__name__
        expected = torch.nn.functional.gelu(x + b, approximate="tanh")
        torch.testing.assert_close(y, expected, rtol=1e-12, atol=1e-12)
    finally:
        kernels.reset()


# --------------------------------------------------------------------------- device code


def cuobjdump(nvcc: str):
    """cuobjdump next to nvcc, on PATH, or the one triton (a dependency of CUDA torch) ships."""
    candidates = [Path(nvcc).parent / "cuobjdump", shutil.which("cuobjdump")]
    try:
        import triton  # noqa: F401 - only to find its bundled binary

        candidates.append(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump")
    except Exception:  # noqa: BLE001 - triton missing or broken: not needed
        pass
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    return None


def _run(cmd) -> str:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout


def fatbin_entries(so: Path) -> list:
    """[(kind, arch)] of every image in the library's ``.nv_fatbin`` ELF section, kind "elf"
    (machine code) or "ptx", arch "sm_80" etc.: the same list cuobjdump gives, from the ELF
    and fat-binary headers alone (for toolkits without cuobjdump)."""
    data = so.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2, "not a 64-bit ELF file"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_off = sections[shstrndx][4]

    def name(sec):
        start = names_off + sec[0]
        return data[start:data.index(b"\0", start)].decode()

    fat = next((s for s in sections if name(s) == ".nv_fatbin"), None)
    assert fat is not None, "the library has no .nv_fatbin section: no device code"
    blob = data[fat[4]:fat[4] + fat[5]]
    entries, pos = [], 0
    while pos + 16 <= len(blob):
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", blob, pos)
        if magic != 0xBA55ED50:  # padding between containers
            pos += 8
            continue
        entry, end = pos + header_size, pos + header_size + fat_size
        while entry < end:
            kind, _v, ehead, payload = struct.unpack_from("<HHIQ", blob, entry)
            sm, = struct.unpack_from("<I", blob, entry + 28)
            entries.append(({1: "ptx", 2: "elf"}.get(kind, str(kind)), f"sm_{sm}"))
            entry += ehead + payload
        pos = end
    return entries


def test_device_code_for_each_architecture(build):
    _, _, plan, nvcc = build
    from_headers = fatbin_entries(plan.library_path)
    assert {a for k, a in from_headers if k == "elf"} == SASS_ARCHS, from_headers
    assert {a for k, a in from_headers if k == "ptx"} == PTX_ARCHS, from_headers
    tool = cuobjdump(nvcc)
    if tool is None:
        pytest.skip("no cuobjdump: checked the ELF and fat-binary headers only")
    elf = set(re.findall(r"\.(sm_\d+)\.cubin", _run([tool, "--list-elf", str(plan.library_path)])))
    ptx = set(re.findall(r"\.(sm_\d+)\.ptx", _run([tool, "--list-ptx", str(plan.library_path)])))
    assert (elf, ptx) == (SASS_ARCHS, PTX_ARCHS)


def _fast_flag(mangled: str) -> bool:
    # gelu_*_kernel<Storage, Fast, Backward, Bias>: the first bool template argument is Fast.
    return re.search(r"Lb([01])E", mangled).group(1) == "1"


def _check_kernel_set(names) -> None:
    assert len(names) == KERNELS_PER_ARCH, sorted(names)
    for storage in STORAGE:
        assert sum(f"{len(storage)}{storage}E" in n for n in names) == KERNELS_PER_ARCH // 3, storage
    assert sum(_fast_flag(n) for n in names) == KERNELS_PER_ARCH // 2


def test_ptx_fast_uses_hardware_tanh_precise_does_not(build):
    _, _, plan, nvcc = build
    tool = cuobjdump(nvcc)
    if tool is None:
        pytest.skip("no cuobjdump to extract the PTX (the toolkit's or triton's)")
    ptx = _run([tool, "--dump-ptx", str(plan.library_path)])
    parts = re.split(r"(?m)^\s*(?:\.visible\s+)?\.entry\s+", ptx)[1:]
    entries = {p.split("(", 1)[0].strip(): p for p in parts}
    _check_kernel_set(entries)
    for mangled, body in entries.items():
        if _fast_flag(mangled):
            assert "tanh.approx.f32" in body, f"fast kernel without the hardware tanh: {mangled}"
        else:
            assert "tanh.approx" not in body, f"precise kernel uses the hardware tanh: {mangled}"


def test_machine_code_of_each_arch_has_every_kernel(build):
    """SASS per architecture: all 48 kernels; the fast ones issue MUFU.TANH, the precise
    ones never do (the hardware tanh really reached each GPU's machine code)."""
    _, _, plan, nvcc = build
    tool = cuobjdump(nvcc)
    if tool is None:
        pytest.skip("no cuobjdump to disassemble the machine code")
    sass = _run([tool, "-sass", str(plan.library_path)])
    by_arch: dict = {}
    arch = None
    for chunk in re.split(r"(?m)^\s*(?=arch = sm_\d+|Function : )", sass):
        head = re.match(r"arch = (sm_\d+)", chunk)
        if head:
            arch = head.group(1)
            continue
        fn = re.match(r"Function : (\S+)", chunk)
        if fn:
            by_arch.setdefault(arch, {})[fn.group(1)] = chunk
    assert set(by_arch) == SASS_ARCHS
    for arch, functions in by_arch.items():
        _check_kernel_set(functions)
        for mangled, body in functions.items():
            assert ("MUFU.TANH" in body) == _fast_flag(mangled), f"{arch} {mangled}"
