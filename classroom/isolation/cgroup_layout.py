"""Which cgroup layout the grading machine has, and whether this process may use it.

:func:`detect` and :func:`layout` find this process's own cgroup(s) -- on the unified
hierarchy (v2) the folder ``/proc/self/cgroup`` names, on v1 one folder per controller
-- and check that the memory and pids controllers reach it and that it is writable.
Where not, :class:`CgroupUnavailable` says which and what the machine must allow
(:mod:`classroom.isolation.cgroups` makes the groups).
"""
from __future__ import annotations

import errno
import os
from pathlib import Path

CONTROLLERS = ("memory", "pids")


class CgroupUnavailable(RuntimeError):
    """The machine gives this process no cgroup it may cap memory and processes in."""


ALLOW_HINT = ("The grading machine must give the grader a cgroup it can write, with the memory and "
              "pids controllers: run it as root on a plain VM or host (cgroup v1 or v2), or in a "
              "systemd unit or scope with Delegate=yes (e.g. `systemd-run --scope -p Delegate=yes "
              "make grade ...`); in a container, one with a writable cgroup namespace of its own.")


def read(path: Path) -> str:
    with open(path) as f:
        return f.read()


def unavailable(what: str) -> CgroupUnavailable:
    return CgroupUnavailable(f"{what}. {ALLOW_HINT}")


def why(exc: OSError, doing: str) -> CgroupUnavailable:
    if exc.errno == errno.EROFS:
        return unavailable(f"cannot {doing}: the cgroup file system is mounted read-only here")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return unavailable(f"cannot {doing}: permission denied (not root, and the cgroup was not "
                            f"delegated to this user)")
    return unavailable(f"cannot {doing}: {exc.strerror or exc}")


# ----------------------------------------------------------------------------- detection
def _own_cgroups(proc_cgroup: str) -> dict[str, str]:
    """controller (or "" for the unified hierarchy) -> our path in that hierarchy."""
    out: dict[str, str] = {}
    try:
        text = read(Path(proc_cgroup))
    except OSError as exc:
        raise unavailable(f"cannot read {proc_cgroup}: {exc.strerror}") from exc
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, names, path = parts
        if not names:
            out[""] = path
        for name in names.split(","):
            if name:
                out[name] = path
    return out


def _join(root: Path, rel: str) -> Path:
    return root / rel.strip("/") if rel.strip("/") else root


def words(path: Path) -> set[str]:
    try:
        return set(read(path).split())
    except OSError:
        return set()


def layout(root: Path, proc_cgroup: str):
    """("v2", own dir) or ("v1", (own memory dir, own pids dir)); raises CgroupUnavailable."""
    own = _own_cgroups(proc_cgroup)
    if (root / "cgroup.controllers").exists():
        if "" not in own:
            raise unavailable(f"{root} is a cgroup v2 hierarchy but {proc_cgroup} names no place "
                               f"in it for this process")
        mine = _join(root, own[""])
        if not mine.is_dir():
            raise unavailable(f"our cgroup {mine} is not visible under {root} (a cgroup namespace "
                               f"without its own cgroup mount?)")
        missing = [c for c in CONTROLLERS if c not in words(mine / "cgroup.controllers")]
        if missing:
            them = "them" if len(missing) > 1 else "it"
            why = (f"the folder above does not enable {them} in cgroup.subtree_control: the cgroup was "
                   f"not delegated" if mine != root else
                   f"the kernel lacks {them}, or a cgroup v1 hierarchy holds {them}")
            raise unavailable(f"the {' and '.join(missing)} controller{'s are' if len(missing) > 1 else ' is'} "
                               f"not available in our cgroup {mine} ({why})")
        if not os.access(mine, os.W_OK):
            raise unavailable(f"our cgroup {mine} is not writable by uid {os.geteuid()} "
                               f"(not root, and not delegated; or mounted read-only)")
        return "v2", mine
    dirs = []
    for c in CONTROLLERS:
        mount = root / c
        if not (mount / "cgroup.procs").exists():
            raise unavailable(f"no cgroup v2 hierarchy at {root} and no cgroup v1 `{c}` hierarchy "
                               f"at {mount}")
        if c not in own:
            raise unavailable(f"{proc_cgroup} names no `{c}` cgroup for this process")
        mine = _join(mount, own[c])
        if not mine.is_dir():
            raise unavailable(f"our `{c}` cgroup {mine} is not visible under {mount}")
        if not os.access(mine, os.W_OK):
            raise unavailable(f"our `{c}` cgroup {mine} is not writable by uid {os.geteuid()} "
                               f"(not root, and not delegated; or mounted read-only)")
        dirs.append(mine)
    return "v1", tuple(dirs)


def cpu_dir(root: Path, proc_cgroup: str) -> Path | str:
    """This process's own cgroup in which a CPU share can be set, or why there is none.

    On v2 the ``cpu`` controller must reach our cgroup (the tree enables it below); on
    v1 the ``cpu`` hierarchy must be mounted and our folder in it writable."""
    try:
        own = _own_cgroups(proc_cgroup)
    except CgroupUnavailable as exc:
        return str(exc)
    if (root / "cgroup.controllers").exists():
        mine = _join(root, own.get("", "/"))
        if "cpu" not in words(mine / "cgroup.controllers"):
            return f"the cpu controller is not available in our cgroup {mine}"
        return mine
    mount = root / "cpu"
    if not (mount / "cgroup.procs").exists() or "cpu" not in own:
        return f"no cgroup v1 `cpu` hierarchy at {mount} holds this process"
    mine = _join(mount, own["cpu"])
    if not mine.is_dir() or not os.access(mine, os.W_OK):
        return f"our `cpu` cgroup {mine} is not writable by uid {os.geteuid()}"
    return mine


def cpu_unavailable(root="/sys/fs/cgroup", *, proc_cgroup: str = "/proc/self/cgroup") -> str | None:
    """Why no CPU share per sandbox can be set here; None where one can."""
    found = cpu_dir(Path(root), proc_cgroup)
    return found if isinstance(found, str) else None


def detect(root="/sys/fs/cgroup", *, proc_cgroup: str = "/proc/self/cgroup") -> str:
    """"v2" or "v1": the layout whose memory and pids controllers this process can use
    (available in its own cgroup and writable); raises :class:`CgroupUnavailable`."""
    return layout(Path(root), proc_cgroup)[0]


