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
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Optional, TextIO

import torch

ENV_MODE = "ANDREA_KERNEL"
ENV_CACHE = "ANDREA_KERNEL_CACHE"
ENV_BUILD_ONLY = "ANDREA_KERNEL_BUILD_ONLY"
MODES = ("auto", "off", "require")
BACKENDS = ("cuda", "cpu-twin", "torch")

#: The repository's ``cuda/`` folder, next to the ``andrea_ref`` package; in an installed
#: package (a wheel, where no checkout is around it), the copy shipped in ``kernels/csrc/``.
_CHECKOUT_SOURCES = Path(__file__).resolve().parents[2] / "cuda"
_PACKAGED_SOURCES = Path(__file__).resolve().parent / "csrc"
SOURCE_DIR = (_CHECKOUT_SOURCES if (_CHECKOUT_SOURCES / "gelu_math.h").is_file()
              else _PACKAGED_SOURCES)
CPU_SOURCES = ("gelu_cpu.cpp",)
CUDA_SOURCES = ("gelu_cpu.cpp", "gelu_binding.cpp", "gelu_kernels.cu")
HEADERS = ("gelu_math.h", "gelu_ops.h", "gelu_kernels.h")

CXX_FLAGS = ("-O3",)
NVCC_FLAGS = ("-O3",)

LOCK_NAME = ".andrea-build.lock"  # our OS-level lock
TORCH_LOCK_NAME = "lock"  # cpp_extension's own lock file
#: Without fcntl (Windows) a ``lock`` file older than this is treated as stale.
STALE_LOCK_AGE_S = 600.0
#: How long to wait for another live process that is building the same directory.
WAIT_FOR_OTHER_BUILDER_S = 900.0


class KernelBuildError(RuntimeError):
    """The kernel could not be built or loaded (raised in ``require`` mode)."""


class KernelFallbackWarning(UserWarning):
    """Emitted once when ``auto`` mode falls back to the pure-PyTorch path."""


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


@dataclasses.dataclass(frozen=True)
class BuildPlan:
    """Everything that decides a build: computed before anything is compiled."""

    backend: str  # "cuda" or "cpu-twin"
    name: str  # extension name == operator namespace (torch.ops.<name>)
    build_dir: Path
    sources: tuple
    cxx_flags: tuple
    nvcc_flags: tuple
    arch_list: Optional[str]
    nvcc_version: Optional[str]
    key: dict

    @property
    def library_path(self) -> Path:
        return self.build_dir / f"{self.name}.so"


# --------------------------------------------------------------------------- settings


def mode_from_env() -> str:
    value = os.environ.get(ENV_MODE, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise ValueError(
            f"environment variable {ENV_MODE} must be one of {', '.join(MODES)}; got {value!r}"
        )
    return value


def build_only_from_env() -> bool:
    """``ANDREA_KERNEL_BUILD_ONLY``: 1/true/yes/on builds and loads without launching on a GPU."""
    value = os.environ.get(ENV_BUILD_ONLY, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return False
    if value in ("1", "true", "yes", "on"):
        return True
    raise ValueError(f"environment variable {ENV_BUILD_ONLY} must be 0 or 1; got {value!r}")


def cache_root() -> Path:
    """``$ANDREA_KERNEL_CACHE``, else ``$XDG_CACHE_HOME/andrea_ref``, else ``~/.cache/andrea_ref``."""
    explicit = os.environ.get(ENV_CACHE)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "andrea_ref"


def cxx_compiler() -> str:
    """The C++ compiler cpp_extension will call (``$CXX`` or ``c++`` on Linux and macOS)."""
    return os.environ.get("CXX", "c++")


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
        cxx_flags=CXX_FLAGS,
        nvcc_flags=NVCC_FLAGS,
        arch_list=arch_list,
        nvcc_version=nvcc_ver,
        key=key,
    )


# --------------------------------------------------------------------------- locking


class _BuildLock:
    """An exclusive OS file lock on ``<build_dir>/.andrea-build.lock``.

    ``fcntl.flock`` locks belong to the open file and vanish when the process dies, so a
    killed build can never leave this lock behind. Where fcntl is missing (Windows) the lock
    degrades to "no lock"; the stale-lock rule then falls back to the file's age.
    """

    def __init__(self, directory: Path, say: Callable[[str], None], wait_s: float):
        self.path = directory / LOCK_NAME
        self.say = say
        self.wait_s = wait_s
        self._fh = None
        self.exclusive = False

    def __enter__(self) -> "_BuildLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return self
        self._fh = open(self.path, "a+")
        deadline = time.monotonic() + self.wait_s
        announced = False
        while True:
            try:
                fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.exclusive = True
                return self
            except BlockingIOError:
                if not announced:
                    self.say(
                        f"andrea_ref.kernels: another process is building in {self.path.parent}; "
                        "waiting for it"
                    )
                    announced = True
                if time.monotonic() > deadline:
                    self._fh.close()
                    self._fh = None
                    raise KernelBuildError(
                        f"gave up after {self.wait_s:.0f} s waiting for another process that "
                        f"holds {self.path}"
                    )
                time.sleep(0.2)

    def __exit__(self, *exc) -> None:
        if self._fh is not None:
            import fcntl

            fcntl.flock(self._fh.fileno(), fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def remove_stale_torch_lock(build_dir: Path, have_exclusive_lock: bool, say) -> bool:
    """Remove cpp_extension's ``lock`` file if it is stale. Returns True if one was removed.

    Rule: while we hold the OS lock no other builder can be running, so any ``lock`` file is a
    leftover of a killed build. Without an OS lock, a ``lock`` older than STALE_LOCK_AGE_S is.
    """
    path = build_dir / TORCH_LOCK_NAME
    if not path.exists():
        return False
    if not have_exclusive_lock:
        age = time.time() - path.stat().st_mtime
        if age < STALE_LOCK_AGE_S:
            return False
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    say(
        f"andrea_ref.kernels: removed a stale build lock left by an interrupted build: {path}"
    )
    return True


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
        with _BuildLock(p.build_dir, say, WAIT_FOR_OTHER_BUILDER_S) as lock:
            if not p.library_path.exists():  # another process may have finished meanwhile
                remove_stale_torch_lock(p.build_dir, lock.exclusive, say)
                what = "CUDA GELU kernels" if p.backend == "cuda" else "GELU CPU twin"
                arch = f" for sm {p.arch_list}" if p.arch_list else ""
                say(f"andrea_ref.kernels: compiling the {what}{arch} (once; cached in {p.build_dir})")
                _compile(p)
                compiled_now = True
    try:
        torch.ops.load_library(str(p.library_path))
    except OSError as exc:
        if compiled_now:
            raise KernelBuildError(f"the freshly built {p.library_path} does not load: {exc}") from exc
        # A library that exists but does not load was cut short (a build killed while
        # linking): rebuild it once instead of failing in every future process.
        with _BuildLock(p.build_dir, say, WAIT_FOR_OTHER_BUILDER_S) as lock:
            say(f"andrea_ref.kernels: the cached {p.library_path.name} does not load ({exc}); rebuilding")
            p.library_path.unlink(missing_ok=True)
            remove_stale_torch_lock(p.build_dir, lock.exclusive, say)
            _compile(p)
            compiled_now = True
        torch.ops.load_library(str(p.library_path))
    ops = _ops_namespace(p.name)
    if ops is None:
        raise KernelBuildError(f"{p.library_path} loaded but registered no operators")
    _sanity_check(ops, p.backend, launch_gpu=not build_only)
    return ops, compiled_now


def _compile(p: BuildPlan) -> None:
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
                extra_include_paths=[str(SOURCE_DIR)],
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
