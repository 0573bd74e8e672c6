"""What a kernel build is configured by: environment variables, the sources and the flags.

The environment variables (``ANDREA_KERNEL``, ``ANDREA_KERNEL_CACHE``,
``ANDREA_KERNEL_BUILD_ONLY``, ``CXX``), where the kernel sources are found (the checkout's
``cuda/`` folder, else the copy packaged in ``kernels/csrc/``), and the compiler flags. Read by
:mod:`~andrea_ref.kernels.buildplan` (the cache key), :mod:`~andrea_ref.kernels.compiler` and
:mod:`~andrea_ref.kernels.loader`.

``SOURCE_DIR`` is read by ``buildplan`` alone, into the plan the compiler builds: a test that
points the build at other sources patches it there.
"""

from __future__ import annotations

import os
from pathlib import Path

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


# --------------------------------------------------------------------------- settings


def choice_from_env(name: str, choices: tuple[str, ...]) -> str:
    """The environment variable ``name``, one of ``choices`` (unset or empty: the first,
    ``auto``); anything else is refused in one line that names the variable."""
    value = os.environ.get(name, choices[0]).strip().lower() or choices[0]
    if value not in choices:
        raise ValueError(
            f"environment variable {name} must be one of {', '.join(choices)}; got {value!r}"
        )
    return value


def mode_from_env() -> str:
    return choice_from_env(ENV_MODE, MODES)


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
