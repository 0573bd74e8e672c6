"""The build directory's locks: an OS file lock for builders, and the stale-lock rule.

``cpp_extension`` (up to torch 2.13) waits forever on a ``lock`` file left by a killed build.
Builders here first take :class:`BuildLock` (``fcntl.flock`` on ``.andrea-build.lock``, released
by the kernel when its owner dies); whoever holds it is the only builder in that directory, so
:func:`remove_stale_torch_lock` may then remove any ``lock`` file it finds.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from .errors import KernelBuildError

LOCK_NAME = ".andrea-build.lock"  # our OS-level lock
TORCH_LOCK_NAME = "lock"  # cpp_extension's own lock file
#: Without fcntl (Windows) a ``lock`` file older than this is treated as stale.
STALE_LOCK_AGE_S = 600.0
#: How long to wait for another live process that is building the same directory.
WAIT_FOR_OTHER_BUILDER_S = 900.0


# --------------------------------------------------------------------------- locking


class BuildLock:
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

    def __enter__(self) -> "BuildLock":
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
