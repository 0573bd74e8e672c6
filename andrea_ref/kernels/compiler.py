"""The compiler invocation: ``torch.utils.cpp_extension.load`` on a plan, and its error report.

:func:`compile_library` writes the plan's key next to the build, runs the build with the
plan's architectures and flags, and turns any failure into one :class:`KernelBuildError`
that quotes the most telling line of the compiler output (the full text goes to
``build_error.log`` in the build directory). Callers hold the build lock
(:mod:`~andrea_ref.kernels.buildlock`).
"""

from __future__ import annotations

import json
import os
import re
import warnings

from .buildplan import BuildPlan
from .errors import KernelBuildError


def compile_library(p: BuildPlan) -> None:
    from torch.utils import cpp_extension

    (p.build_dir / "key.json").write_text(json.dumps(p.key, indent=2, sort_keys=True) + "\n")
    define = f"-DANDREA_OPS_NS={p.name}"
    saved_arch = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if p.arch_list:
        os.environ["TORCH_CUDA_ARCH_LIST"] = p.arch_list
    try:
        with warnings.catch_warnings():
            # cpp_extension warns about things this loader already handles (arch list, ABI
            # probe); the one line printed by the caller is the whole story of a cold build.
            warnings.simplefilter("ignore")
            cpp_extension.load(
                name=p.name,
                sources=list(p.sources),
                extra_cflags=[*p.cxx_flags, define],
                extra_cuda_cflags=[*p.nvcc_flags, define] if p.backend == "cuda" else None,
                extra_include_paths=[str(p.include_dir)],
                build_directory=str(p.build_dir),
                is_python_module=False,
                with_cuda=p.backend == "cuda",
                verbose=False,
            )
    except Exception as exc:  # noqa: BLE001 - every build failure becomes one reason
        log = p.build_dir / "build_error.log"
        log.write_text(f"{type(exc).__name__}: {exc}\n")
        raise KernelBuildError(f"{_first_error_line(str(exc))} (full log: {log})") from exc
    finally:
        if p.arch_list:
            if saved_arch is None:
                os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
            else:
                os.environ["TORCH_CUDA_ARCH_LIST"] = saved_arch


def _first_error_line(message: str) -> str:
    """The most telling line of a compiler failure, short enough for one warning."""
    for line in message.splitlines():
        if re.search(r"\berror\b", line, re.IGNORECASE) and "Error building extension" not in line:
            return f"build failed: {line.strip()[:300]}"
    first = message.strip().splitlines()[0] if message.strip() else "unknown error"
    return f"build failed: {first[:300]}"
