"""Build and load a planned library: the warm path, the locked cold build, the sanity check.

:func:`build_and_load` returns the ``torch.ops`` namespace of a :class:`BuildPlan`'s
operators: from this process if they are registered already, from the on-disk cache if the
library is there (a truncated one is rebuilt once), else after compiling it under the build
lock. A few values through the loaded operators check the build before it is used.

Build-only mode (``build_only=True``; ``ANDREA_KERNEL_BUILD_ONLY``, see the doc of
:mod:`andrea_ref.kernels.loader`): the sanity check runs the CPU twin but launches nothing on a
GPU, for a machine with a CUDA toolkit and a CUDA build of torch but no GPU.
"""

from __future__ import annotations

import shutil
from typing import Callable

import torch

from .buildlock import WAIT_FOR_OTHER_BUILDER_S, BuildLock, remove_stale_torch_lock
from .buildplan import BuildPlan
from .compiler import compile_library
from .errors import KernelBuildError
from .settings import cxx_compiler


# --------------------------------------------------------------------------- loading


def _ops_namespace(name: str):
    """torch.ops.<name> if its operators are registered in this process, else None."""
    namespace = getattr(torch.ops, name)
    try:
        namespace.gelu_fwd  # noqa: B018 - resolving the attribute is the check
    except (AttributeError, RuntimeError):
        return None
    return namespace


def _sanity_check(ops, backend: str, launch_gpu: bool = True) -> None:
    """A few values through the freshly loaded operators: a wrong build fails here, not later.

    The CPU twin is in every build and is always checked; a ``cuda`` build also runs its CUDA
    kernel unless ``launch_gpu`` is False (build-only mode: no GPU to launch on)."""
    x = torch.tensor([-3.0, -0.5, 0.0, 0.7, 2.7], dtype=torch.float64)
    expected = 0.5 * x * (1 + torch.tanh((2 / torch.pi) ** 0.5 * (x + 0.044715 * x**3)))
    got = ops.gelu_fwd(x, False)
    if not torch.allclose(got, expected, rtol=1e-12, atol=1e-12):
        raise KernelBuildError(f"the CPU twin returned wrong values: {got.tolist()}")
    if backend == "cuda" and launch_gpu:
        xc = x.to(device="cuda", dtype=torch.float32)
        got_c = ops.gelu_fwd(xc, False).double().cpu()
        torch.cuda.synchronize()
        if not torch.allclose(got_c, expected, rtol=1e-5, atol=1e-6):
            raise KernelBuildError(f"the CUDA kernel returned wrong values: {got_c.tolist()}")


def build_and_load(p: BuildPlan, say: Callable[[str], None] = print, build_only: bool = False) -> tuple:
    """Load ``p``'s library, building it first if needed. Returns (ops namespace, compiled_now).

    ``build_only``: the sanity check launches nothing on a GPU (see the module doc)."""
    ops = _ops_namespace(p.name)
    if ops is not None:  # already loaded in this process (same sources, same settings)
        return ops, False

    if not p.library_path.exists():
        if shutil.which(cxx_compiler()) is None:
            raise KernelBuildError(
                f"the C++ compiler {cxx_compiler()!r} was not found (set CXX or install g++)"
            )
        from torch.utils import cpp_extension

        if not cpp_extension.is_ninja_available():
            raise KernelBuildError("ninja was not found (pip install ninja)")
    compiled_now = False
    p.build_dir.mkdir(parents=True, exist_ok=True)
    if not p.library_path.exists():
        with BuildLock(p.build_dir, say, WAIT_FOR_OTHER_BUILDER_S) as lock:
            if not p.library_path.exists():  # another process may have finished meanwhile
                remove_stale_torch_lock(p.build_dir, lock.exclusive, say)
                what = "CUDA GELU kernels" if p.backend == "cuda" else "GELU CPU twin"
                arch = f" for sm {p.arch_list}" if p.arch_list else ""
                say(f"andrea_ref.kernels: compiling the {what}{arch} (once; cached in {p.build_dir})")
                compile_library(p)
                compiled_now = True
    try:
        torch.ops.load_library(str(p.library_path))
    except OSError as exc:
        if compiled_now:
            raise KernelBuildError(f"the freshly built {p.library_path} does not load: {exc}") from exc
        # A library that exists but does not load was cut short (a build killed while
        # linking): rebuild it once instead of failing in every future process.
        with BuildLock(p.build_dir, say, WAIT_FOR_OTHER_BUILDER_S) as lock:
            say(f"andrea_ref.kernels: the cached {p.library_path.name} does not load ({exc}); rebuilding")
            p.library_path.unlink(missing_ok=True)
            remove_stale_torch_lock(p.build_dir, lock.exclusive, say)
            compile_library(p)
            compiled_now = True
        torch.ops.load_library(str(p.library_path))
    ops = _ops_namespace(p.name)
    if ops is None:
        raise KernelBuildError(f"{p.library_path} loaded but registered no operators")
    _sanity_check(ops, p.backend, launch_gpu=not build_only)
    return ops, compiled_now
