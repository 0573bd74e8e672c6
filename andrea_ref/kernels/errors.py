"""The kernel loader's exceptions: a failed build (``require`` mode) and the fallback warning.

Raised and emitted by :mod:`andrea_ref.kernels.loader` and the build modules behind it;
re-exported by :mod:`andrea_ref.kernels`.
"""


class KernelBuildError(RuntimeError):
    """The kernel could not be built or loaded (raised in ``require`` mode)."""


class KernelFallbackWarning(UserWarning):
    """Emitted once when ``auto`` mode falls back to the pure-PyTorch path."""
