"""The build plan: everything that decides a build, worked out before anything is compiled.

:func:`plan` probes the toolchain (torch's CUDA version, nvcc and its version, the target
architectures from ``TORCH_CUDA_ARCH_LIST`` or the visible GPUs), refuses what cannot work
(a CPU-only torch asked for CUDA, no nvcc, mismatched CUDA majors, missing sources) and
returns a :class:`BuildPlan` whose build directory is keyed on everything that changes the
binary (see the doc of :mod:`andrea_ref.kernels.loader`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import torch

from .errors import KernelBuildError
from .settings import (
    CPU_SOURCES,
    CUDA_SOURCES,
    CXX_FLAGS,
    HEADERS,
    NVCC_FLAGS,
    SOURCE_DIR,
    cache_root,
    cxx_compiler,
)


@dataclasses.dataclass(frozen=True)
class BuildPlan:
    """Everything that decides a build: computed before anything is compiled."""

    backend: str  # "cuda" or "cpu-twin"
    name: str  # extension name == operator namespace (torch.ops.<name>)
    build_dir: Path
    sources: tuple
    include_dir: Path  # the sources' folder, where their headers are
    cxx_flags: tuple
    nvcc_flags: tuple
    arch_list: Optional[str]
    nvcc_version: Optional[str]
    key: dict

    @property
    def library_path(self) -> Path:
        return self.build_dir / f"{self.name}.so"


# --------------------------------------------------------------------------- the toolchain and the sources


def visible_arch_list() -> Optional[str]:
    """``TORCH_CUDA_ARCH_LIST`` if set, else the compute capabilities of the visible GPUs."""
    explicit = os.environ.get("TORCH_CUDA_ARCH_LIST")
    if explicit:
        return explicit.strip()
    if not torch.cuda.is_available():
        return None
    caps = sorted({torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())})
    return ";".join(f"{major}.{minor}" for major, minor in caps) or None


def nvcc_path() -> Optional[str]:
    from torch.utils import cpp_extension

    home = cpp_extension.CUDA_HOME
    if home:
        candidate = Path(home) / "bin" / "nvcc"
        if candidate.exists():
            return str(candidate)
    return shutil.which("nvcc")


def nvcc_version(nvcc: str) -> str:
    """'13.0' from ``nvcc --version`` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    match = re.search(r"release (\d+)\.(\d+)", out)
    if not match:
        raise KernelBuildError(f"could not read the CUDA version from `{nvcc} --version`")
    return f"{match.group(1)}.{match.group(2)}"


def sources_digest(names) -> str:
    digest = hashlib.sha256()
    for name in sorted(set(names) | set(HEADERS)):
        path = SOURCE_DIR / name
        digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-") or "none"


# --------------------------------------------------------------------------- planning


def plan(backend: str) -> BuildPlan:
    """Work out what a build of ``backend`` ("cuda" or "cpu-twin") would be; raise
    :class:`KernelBuildError` if it cannot happen on this machine. Compiles nothing."""
    sources = CUDA_SOURCES if backend == "cuda" else CPU_SOURCES
    missing = [s for s in sources + HEADERS if not (SOURCE_DIR / s).is_file()]
    if missing:
        raise KernelBuildError(f"kernel sources not found in {SOURCE_DIR}: {', '.join(missing)}")

    arch_list = None
    nvcc_ver = None
    if backend == "cuda":
        if torch.version.cuda is None:
            raise KernelBuildError(
                f"this torch ({torch.__version__}) is a CPU-only build: it cannot build CUDA code"
            )
        nvcc = nvcc_path()
        if nvcc is None:
            raise KernelBuildError(
                "nvcc was not found (set CUDA_HOME to a CUDA toolkit or put nvcc on PATH)"
            )
        nvcc_ver = nvcc_version(nvcc)
        torch_major = torch.version.cuda.split(".")[0]
        if nvcc_ver.split(".")[0] != torch_major:
            raise KernelBuildError(
                f"nvcc is CUDA {nvcc_ver} but this torch was built with CUDA {torch.version.cuda}: "
                f"the major versions must match (set CUDA_HOME to a CUDA {torch_major}.x toolkit)"
            )
        arch_list = visible_arch_list()
        if not arch_list:
            raise KernelBuildError("no GPU is visible and TORCH_CUDA_ARCH_LIST is unset")

    key = {
        "backend": backend,
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "nvcc": nvcc_ver,
        "arch": arch_list,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "cxx": cxx_compiler(),
        "cxx_flags": list(CXX_FLAGS),
        "nvcc_flags": list(NVCC_FLAGS) if backend == "cuda" else [],
        "sources": sources_digest(sources),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    name = f"andrea_gelu_{digest}"
    folder = "_".join(
        [
            backend,
            "torch-" + _slug(torch.__version__),
            "cuda-" + _slug(torch.version.cuda or "none"),
            "arch-" + _slug(arch_list or "cpu"),
            digest,
        ]
    )
    return BuildPlan(
        backend=backend,
        name=name,
        build_dir=cache_root() / folder,
        sources=tuple(str(SOURCE_DIR / s) for s in sources),
        include_dir=SOURCE_DIR,
        cxx_flags=CXX_FLAGS,
        nvcc_flags=NVCC_FLAGS,
        arch_list=arch_list,
        nvcc_version=nvcc_ver,
        key=key,
    )
