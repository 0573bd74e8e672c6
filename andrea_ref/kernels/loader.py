"""Build and load the handwritten GELU kernels with ``torch.utils.cpp_extension.load``.

What this module adds around ``cpp_extension.load`` (each point is a trap of the plain call):

* **A build directory keyed on everything that changes the binary**: backend, torch version,
  CUDA version of torch, nvcc version, target architectures, Python version, compiler,
  flags and a hash of the sources. It lives under ``$ANDREA_KERNEL_CACHE`` (default
  ``$XDG_CACHE_HOME/andrea_ref`` or ``~/.cache/andrea_ref``), so a library built for
  another torch is never picked up (``TORCH_EXTENSIONS_DIR`` alone does not prevent that).
* **A warm load that skips the build system**: when the keyed directory already holds the
  library, it is loaded directly (a few milliseconds).
* **No silent hang on a stale lock**: ``cpp_extension`` (up to torch 2.13; later versions take
  an flock on it) waits forever on a ``lock`` file left by a killed build. Builders here first take an operating-system file lock
  (``fcntl.flock`` on ``.andrea-build.lock``), which the kernel releases when its owner dies.
  Whoever holds it is the only process that may be building in that directory, so a ``lock``
  file found at that point is stale by construction: it is removed, with a message. Other
  processes (pytest workers, several notebooks) wait for the holder, and say so.
* **``TORCH_CUDA_ARCH_LIST`` from the visible GPUs** when it is unset (the plain call crashes
  with an IndexError when no GPU is visible and guesses a long list otherwise).
* **nvcc vs torch CUDA versions**: a different major version is reported before compiling.
* **One line on a cold build**, one warning on a fallback, a clear error in ``require`` mode.

Modes (environment variable ``ANDREA_KERNEL``): ``auto`` (default: build, fall back to the
pure-PyTorch path with one warning if the build cannot happen), ``off`` (never build),
``require`` (raise :class:`KernelBuildError` if the kernel cannot be built and loaded).

**Build-only** (``ANDREA_KERNEL_BUILD_ONLY=1``, or ``KernelLoader(build_only=True)``): for a
machine with a CUDA toolkit and a CUDA build of torch but no GPU (CI). The CUDA library is
built (``TORCH_CUDA_ARCH_LIST`` must then be set, since no GPU can be asked), loaded and its
operators registered; the sanity check after loading runs the library's CPU twin but launches
nothing on a GPU, where it would otherwise also run the CUDA kernel and fail with "no NVIDIA
driver". The backend defaults to ``cuda`` even though no GPU is visible. On a GPU machine it
only skips that one launch: leave it unset there.

On a machine with a CUDA GPU the build contains the CUDA kernels and the CPU twin; without one
it contains the CPU twin only (``gelu_cpu.cpp``), which runs the same scalar arithmetic
(``cuda/gelu_math.h``) on CPU tensors.

Where the parts live (this module is the loader itself and re-exports the rest, so
``andrea_ref.kernels.loader.X`` works for every name below; a test that patches a name
patches it in the module that reads it):

* :mod:`~andrea_ref.kernels.settings`: the environment variables, the sources and the flags;
* :mod:`~andrea_ref.kernels.errors`: :class:`KernelBuildError`, :class:`KernelFallbackWarning`;
* :mod:`~andrea_ref.kernels.buildplan`: the toolchain probes and :func:`plan` (the cache key);
* :mod:`~andrea_ref.kernels.buildlock`: the OS build lock and the stale-lock rule;
* :mod:`~andrea_ref.kernels.compiler`: the ``cpp_extension.load`` call and its error report;
* :mod:`~andrea_ref.kernels.build`: :func:`build_and_load` (warm load, locked cold build,
  sanity check);
* here: :class:`KernelStatus` and :class:`KernelLoader` (modes, fallback, one load per process).
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import warnings
from typing import Any, Optional, TextIO

import torch

from .build import build_and_load
from .buildlock import (
    LOCK_NAME,
    STALE_LOCK_AGE_S,
    TORCH_LOCK_NAME,
    WAIT_FOR_OTHER_BUILDER_S,
    BuildLock,
    remove_stale_torch_lock,
)
from .buildplan import BuildPlan, nvcc_path, nvcc_version, plan, sources_digest, visible_arch_list
from .compiler import compile_library
from .errors import KernelBuildError, KernelFallbackWarning
from .settings import (
    BACKENDS,
    CPU_SOURCES,
    CUDA_SOURCES,
    CXX_FLAGS,
    ENV_BUILD_ONLY,
    ENV_CACHE,
    ENV_MODE,
    HEADERS,
    MODES,
    NVCC_FLAGS,
    SOURCE_DIR,
    build_only_from_env,
    cache_root,
    cxx_compiler,
    mode_from_env,
)

__all__ = [
    "BACKENDS",
    "CPU_SOURCES",
    "CUDA_SOURCES",
    "CXX_FLAGS",
    "ENV_BUILD_ONLY",
    "ENV_CACHE",
    "ENV_MODE",
    "HEADERS",
    "LOCK_NAME",
    "MODES",
    "NVCC_FLAGS",
    "SOURCE_DIR",
    "STALE_LOCK_AGE_S",
    "TORCH_LOCK_NAME",
    "WAIT_FOR_OTHER_BUILDER_S",
    "BuildLock",
    "BuildPlan",
    "KernelBuildError",
    "KernelFallbackWarning",
    "KernelLoader",
    "KernelStatus",
    "build_and_load",
    "build_only_from_env",
    "cache_root",
    "compile_library",
    "cxx_compiler",
    "mode_from_env",
    "nvcc_path",
    "nvcc_version",
    "plan",
    "remove_stale_torch_lock",
    "sources_digest",
    "visible_arch_list",
]


@dataclasses.dataclass(frozen=True)
class KernelStatus:
    """Which GELU implementation runs, and why.

    backend: ``"cuda"`` (the handwritten CUDA kernels; CPU tensors use the twin),
        ``"cpu-twin"`` (the C++ twin for CPU tensors; no CUDA build on this machine) or
        ``"torch"`` (pure PyTorch: mode ``off``, a failed build, or not loaded yet).
    mode: ``auto``, ``off`` or ``require``.
    variant: the tanh variant asked for: ``auto``, ``precise`` or ``fast``.
    reason: one sentence a person can act on.
    build_dir: where the library lives (None when nothing was built or loaded).
    compiled_now: True if this call compiled the library (a cold build); a later call in
        the same process finds it loaded and says False.
    """

    backend: str
    mode: str
    variant: str
    reason: str
    build_dir: Optional[str] = None
    compiled_now: bool = False


# --------------------------------------------------------------------------- the loader


class KernelLoader:
    """Loads the kernels once per process and remembers the outcome.

    ``mode``/``variant`` default to the environment variables ``ANDREA_KERNEL`` and
    ``ANDREA_GELU_VARIANT``; ``backend`` ("cuda" or "cpu-twin") defaults to "cuda" when a GPU
    is visible or ``build_only`` is set. ``build_only`` (default: ``ANDREA_KERNEL_BUILD_ONLY``)
    builds and loads without launching a kernel on a GPU (see the module doc). ``out`` receives the one-line messages (stdout by default, so notebooks and
    graded cells, which treat stderr as failure, stay clean).
    """

    def __init__(
        self,
        mode: Optional[str] = None,
        backend: Optional[str] = None,
        variant: str = "auto",
        out: Optional[TextIO] = None,
        build_only: Optional[bool] = None,
    ):
        self.mode = mode if mode is not None else mode_from_env()
        self.build_only = build_only_from_env() if build_only is None else bool(build_only)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}; got {self.mode!r}")
        if backend not in (None, "cuda", "cpu-twin"):
            raise ValueError(f"backend must be 'cuda', 'cpu-twin' or None; got {backend!r}")
        self.backend = backend
        self.variant = variant
        self.out = out
        self._lock = threading.RLock()
        self._status: Optional[KernelStatus] = None
        self._ops: Any = None

    def _say(self, message: str) -> None:
        stream = self.out if self.out is not None else sys.stdout
        print(message, file=stream, flush=True)

    @property
    def ops(self):
        """torch.ops namespace of the loaded operators, or None."""
        return self._ops

    def peek(self) -> KernelStatus:
        """The status without loading anything."""
        if self._status is not None:
            return self._status
        if self.mode == "off":
            return KernelStatus("torch", self.mode, self.variant, f"{ENV_MODE}=off: never built")
        return KernelStatus(
            "torch",
            self.mode,
            self.variant,
            "not loaded yet: the kernel is built or loaded on first use "
            "(or call andrea_ref.kernels.load())",
        )

    def load(self) -> KernelStatus:
        with self._lock:
            if self._status is None:
                self._status = self._load()
                return self._status
            # the library is loaded already: this call compiled nothing (the status the
            # first call returned, as it is, unless that call compiled)
            if self._status.compiled_now:
                self._status = dataclasses.replace(self._status, compiled_now=False)
            return self._status

    def _load(self) -> KernelStatus:
        if self.mode == "off":
            return KernelStatus("torch", "off", self.variant, f"{ENV_MODE}=off: never built")
        backend = self.backend or (
            "cuda" if self.build_only or torch.cuda.is_available() else "cpu-twin"
        )
        p = None
        try:
            p = plan(backend)
            self._ops, compiled_now = build_and_load(p, self._say, build_only=self.build_only)
        except Exception as exc:  # noqa: BLE001 - auto mode turns any failure into a fallback
            reason = str(exc) if isinstance(exc, KernelBuildError) else f"{type(exc).__name__}: {exc}"
            if self.mode == "require":
                raise KernelBuildError(
                    f"{ENV_MODE}=require but the {backend} kernel is unavailable: {reason}"
                ) from exc
            warnings.warn(
                f"andrea_ref.kernels: using the pure-PyTorch GELU because the {backend} kernel "
                f"is unavailable: {reason}. Set {ENV_MODE}=off to skip the kernel, or "
                f"{ENV_MODE}=require to make this an error.",
                KernelFallbackWarning,
                stacklevel=4,
            )
            return KernelStatus(
                "torch",
                self.mode,
                self.variant,
                f"{backend} kernel unavailable: {reason}",
                str(p.build_dir) if p is not None else None,
            )
        if backend == "cuda":
            how = "compiled now" if compiled_now else "loaded from the cache"
            reason = (
                f"CUDA kernels for sm {p.arch_list} (nvcc {p.nvcc_version}, torch "
                f"{torch.__version__}), {how}"
            )
            if self.build_only:
                reason += f"; {ENV_BUILD_ONLY}: loaded and CPU-checked, no kernel launched on a GPU"
        else:
            why = (
                "no CUDA GPU is visible"
                if self.backend is None
                else "the CPU twin was asked for"
            )
            how = "compiled now" if compiled_now else "loaded from the cache"
            reason = f"{why}: C++ CPU twin of the kernel for CPU tensors, {how}"
        return KernelStatus(backend, self.mode, self.variant, reason, str(p.build_dir), compiled_now)
