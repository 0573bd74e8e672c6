"""Memory and process caps for the learner's kernel and the grader's workers (cgroups).

``RLIMIT_AS`` caps a process's address space, and that is all it caps: memory a
learner's code holds outside its own mappings -- a ``memfd`` or a file on a tmpfs
written with ``write()``, pages kept by the kernel on its behalf -- is not counted,
so one notebook can still take the grading machine's memory away from every other.
``RLIMIT_NPROC`` counts per uid, not per job. A control group counts every page
charged to its members, whatever holds it, and every task they start.

A grading run opens one :class:`Tree`: a folder under the grader's *own* cgroup (the
one ``/proc/self/cgroup`` names, so nothing outside what the grader was given is
touched), and makes one :class:`Group` per kernel or worker in it, with

* a memory cap with no way around it through swap: ``memory.max`` and
  ``memory.swap.max = 0`` (v2), ``memory.limit_in_bytes`` and the same value in
  ``memory.memsw.limit_in_bytes`` (v1); on v2 ``memory.oom.group = 1`` makes the
  kernel kill the whole group, not one process of it, when the cap is hit;
* a cap on processes and threads (``pids.max``), so a fork bomb stops at the cap.

A process joins a group by writing its own pid into every file of
:meth:`Group.procs_files` (a launcher with nothing but the standard library can do
that right before it execs the kernel); its children are born inside.
:meth:`Group.kill_all` and :meth:`Tree.close` kill every member and remove the
folders, so a job leaves nothing running behind it.

Both cgroup layouts are handled. On the unified hierarchy (v2) a controller only
reaches a folder if every folder above enables it in ``cgroup.subtree_control``, and
a folder that holds processes itself cannot enable one (EBUSY, the "no internal
processes" rule). The tree enables ``memory`` and ``pids`` on the way down; if the
grader's own cgroup refuses because the grader is in it, the grader moves itself
(only itself) into a leaf ``<tree>/main`` first. On v1 the memory and pids
hierarchies are separate folders and need nothing of the kind. Where neither works
-- no delegated cgroup (run the grader as root, or in a systemd unit or scope with
``Delegate=yes``), a read-only cgroup file system (a container that was not given
its own), a cgroup shared with other processes -- :class:`CgroupUnavailable` says
which, and what the machine must allow.
"""
from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

CONTROLLERS = ("memory", "pids")


class CgroupUnavailable(RuntimeError):
    """The machine gives this process no cgroup it may cap memory and processes in."""


ALLOW_HINT = ("The grading machine must give the grader a cgroup it can write, with the memory and "
              "pids controllers: run it as root on a plain VM or host (cgroup v1 or v2), or in a "
              "systemd unit or scope with Delegate=yes (e.g. `systemd-run --scope -p Delegate=yes "
              "make grade ...`); in a container, one with a writable cgroup namespace of its own.")


# File access goes through these four, so tests can stand a fake kernel in for cgroupfs.
def _read(path: Path) -> str:
    with open(path) as f:
        return f.read()


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _mkdir(path: Path) -> None:
    os.mkdir(path)


def _rmdir(path: Path) -> None:
    os.rmdir(path)


def _unavailable(what: str) -> CgroupUnavailable:
    return CgroupUnavailable(f"{what}. {ALLOW_HINT}")


def _why(exc: OSError, doing: str) -> CgroupUnavailable:
    if exc.errno == errno.EROFS:
        return _unavailable(f"cannot {doing}: the cgroup file system is mounted read-only here")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return _unavailable(f"cannot {doing}: permission denied (not root, and the cgroup was not "
                            f"delegated to this user)")
    return _unavailable(f"cannot {doing}: {exc.strerror or exc}")


# ----------------------------------------------------------------------------- detection
def _own_cgroups(proc_cgroup: str) -> dict[str, str]:
    """controller (or "" for the unified hierarchy) -> our path in that hierarchy."""
    out: dict[str, str] = {}
    try:
        text = _read(Path(proc_cgroup))
    except OSError as exc:
        raise _unavailable(f"cannot read {proc_cgroup}: {exc.strerror}") from exc
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


def _words(path: Path) -> set[str]:
    try:
        return set(_read(path).split())
    except OSError:
        return set()


def _layout(root: Path, proc_cgroup: str):
    """("v2", own dir) or ("v1", (own memory dir, own pids dir)); raises CgroupUnavailable."""
    own = _own_cgroups(proc_cgroup)
    if (root / "cgroup.controllers").exists():
        if "" not in own:
            raise _unavailable(f"{root} is a cgroup v2 hierarchy but {proc_cgroup} names no place "
                               f"in it for this process")
        mine = _join(root, own[""])
        if not mine.is_dir():
            raise _unavailable(f"our cgroup {mine} is not visible under {root} (a cgroup namespace "
                               f"without its own cgroup mount?)")
        missing = [c for c in CONTROLLERS if c not in _words(mine / "cgroup.controllers")]
        if missing:
            them = "them" if len(missing) > 1 else "it"
            why = (f"the folder above does not enable {them} in cgroup.subtree_control: the cgroup was "
                   f"not delegated" if mine != root else
                   f"the kernel lacks {them}, or a cgroup v1 hierarchy holds {them}")
            raise _unavailable(f"the {' and '.join(missing)} controller{'s are' if len(missing) > 1 else ' is'} "
                               f"not available in our cgroup {mine} ({why})")
        if not os.access(mine, os.W_OK):
            raise _unavailable(f"our cgroup {mine} is not writable by uid {os.geteuid()} "
                               f"(not root, and not delegated; or mounted read-only)")
        return "v2", mine
    dirs = []
    for c in CONTROLLERS:
        mount = root / c
        if not (mount / "cgroup.procs").exists():
            raise _unavailable(f"no cgroup v2 hierarchy at {root} and no cgroup v1 `{c}` hierarchy "
                               f"at {mount}")
        if c not in own:
            raise _unavailable(f"{proc_cgroup} names no `{c}` cgroup for this process")
        mine = _join(mount, own[c])
        if not mine.is_dir():
            raise _unavailable(f"our `{c}` cgroup {mine} is not visible under {mount}")
        if not os.access(mine, os.W_OK):
            raise _unavailable(f"our `{c}` cgroup {mine} is not writable by uid {os.geteuid()} "
                               f"(not root, and not delegated; or mounted read-only)")
        dirs.append(mine)
    return "v1", tuple(dirs)


def detect(root="/sys/fs/cgroup", *, proc_cgroup: str = "/proc/self/cgroup") -> str:
    """"v2" or "v1": the layout whose memory and pids controllers this process can use
    (available in its own cgroup and writable); raises :class:`CgroupUnavailable`."""
    return _layout(Path(root), proc_cgroup)[0]


# ----------------------------------------------------------------------------- groups
class Group:
    """One leaf cgroup with a memory cap and a cap on processes and threads.

    ``path`` is the folder (v2) or the pair (memory folder, pids folder) (v1)."""

    def __init__(self, version: str, dirs: list[Path], name: str):
        self.version = version
        self.name = name
        self.dirs = list(dirs)
        self.path = self.dirs[0] if version == "v2" else tuple(self.dirs)

    def __repr__(self) -> str:
        return f"Group({self.version}, {self.path!r})"

    @property
    def _mem(self) -> Path:
        return self.dirs[0]

    def procs_files(self) -> list[str]:
        """The files a process writes its own pid into to join (one per hierarchy)."""
        return [str(d / "cgroup.procs") for d in self.dirs]

    def join(self, pid: int) -> None:
        for f in self.procs_files():
            _write(Path(f), str(int(pid)))

    def pids(self) -> list[int]:
        out: set[int] = set()
        for f in self.procs_files():
            try:
                out.update(int(w) for w in _read(Path(f)).split())
            except FileNotFoundError:
                pass
        return sorted(out)

    def kill_all(self, timeout: float = 10.0) -> None:
        """SIGKILL every member, again and again until none is left (a member may be
        forking while it is killed). Raises OSError(EBUSY) if members outlive ``timeout``."""
        kill_file = self._mem / "cgroup.kill"
        if self.version == "v2" and kill_file.exists():
            try:
                _write(kill_file, "1")
            except FileNotFoundError:
                return
            except OSError:
                pass
        deadline = time.monotonic() + timeout
        while True:
            members = self.pids()
            if not members:
                return
            if time.monotonic() > deadline:
                raise OSError(errno.EBUSY, f"processes {members} of {self.path} survived SIGKILL "
                                           f"for {timeout:.0f} s")
            for pid in members:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.02)

    def memory_peak(self) -> int | None:
        """The most memory the group has held, in bytes (None where the kernel does not say)."""
        name = "memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes"
        try:
            return int(_read(self._mem / name).split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def oom_kills(self) -> int:
        """How many of the group's processes the kernel has killed for hitting the cap."""
        if self.version == "v2":
            files = [("memory.events", "oom_kill")]
        else:
            files = [("memory.oom_control", "oom_kill"), ("memory.failcnt", None)]
        for name, key in files:
            try:
                text = _read(self._mem / name)
            except OSError:
                continue
            if key is None:
                return int(text.split()[0]) if text.split() else 0
            for line in text.splitlines():
                words = line.split()
                if len(words) == 2 and words[0] == key:
                    return int(words[1])
        return 0

    def remove(self, timeout: float = 10.0) -> None:
        """Kill every member, then remove the folder(s); a folder already gone is fine.

        A process may still join after the members were killed (a sandbox launcher
        whose worker died while it was starting): while the kernel answers EBUSY, the
        group is emptied again, until ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            self.kill_all()
            try:
                for d in self.dirs:
                    _rmdir_retry(d, timeout=0.5)
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise


def _rmdir_retry(d: Path, timeout: float = 5.0) -> None:
    # rmdir answers EBUSY for a moment after the last member was killed.
    deadline = time.monotonic() + timeout
    while True:
        try:
            _rmdir(d)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


# ----------------------------------------------------------------------------- tree
class Tree:
    """The grading run's folder of groups, under this process's own cgroup."""

    def __init__(self, version: str, dirs: list[Path], own: list[Path]):
        self.version = version
        self.dirs = list(dirs)
        self.own = list(own)
        self.path = self.dirs[0] if version == "v2" else tuple(self.dirs)
        self.groups: list[Group] = []
        self.moved_to_main = False        # v2: the grader itself now sits in <tree>/main
        self.enabled_in_own: list[str] = []   # v2: controllers we enabled in our own cgroup

    def __repr__(self) -> str:
        return f"Tree({self.version}, {self.path!r})"

    def __enter__(self) -> "Tree":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def group(self, name: str, memory: int, processes: int) -> Group:
        return make_group(self, name, memory, processes)

    def close(self) -> None:
        """Remove every group made here (killing its members), then the tree's folder.

        On v2, where the grader moved itself into ``<tree>/main``, it moves back to its
        own cgroup when it can; where the kernel refuses (another folder beside ours
        uses the controllers) it stays in ``main``, and ``main`` and the tree's folder
        stay too (empty of anything but the grader, and harmless)."""
        errors = []
        for g in list(self.groups):
            try:
                g.remove()
                self.groups.remove(g)
            except OSError as exc:
                errors.append(exc)
        if self.moved_to_main and not self._leave_main():
            if errors:
                raise errors[0]
            return
        for d in self.dirs:
            try:
                _rmdir_retry(d)
            except OSError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def _leave_main(self) -> bool:
        tree, own = self.dirs[0], self.own[0]
        off = " ".join("-" + c for c in CONTROLLERS)
        try:
            _write(tree / "cgroup.subtree_control", off)
            if self.enabled_in_own:
                _write(own / "cgroup.subtree_control", " ".join("-" + c for c in self.enabled_in_own))
            _write(own / "cgroup.procs", str(os.getpid()))
        except OSError:
            return False
        self.moved_to_main = False
        self.enabled_in_own = []
        try:
            _rmdir_retry(tree / "main")
        except OSError:
            return False
        return True


def _check_name(name: str) -> str:
    if not name or name in (".", "..", "main") or "/" in name or "\0" in name:
        raise ValueError(f"not a usable cgroup name: {name!r}")
    return name


def _make_dir(parent: Path, prefix: str) -> Path:
    for n in range(100):
        d = parent / f"{prefix}-{os.getpid()}-{n}"
        try:
            _mkdir(d)
            return d
        except FileExistsError:
            continue
        except OSError as exc:
            raise _why(exc, f"create a cgroup under {parent}") from exc
    raise _unavailable(f"cannot create a cgroup under {parent}: 100 names taken")


def _enable(d: Path, controllers=CONTROLLERS) -> list[str]:
    """Enable ``controllers`` in ``d``'s cgroup.subtree_control; the ones newly enabled."""
    have = _words(d / "cgroup.subtree_control")
    todo = [c for c in controllers if c not in have]
    if todo:
        _write(d / "cgroup.subtree_control", " ".join("+" + c for c in todo))
    return todo


def open_tree(name_prefix: str = "andrea-grading", root="/sys/fs/cgroup", *,
              proc_cgroup: str = "/proc/self/cgroup") -> Tree:
    """Create the grading run's folder under this process's own cgroup, ready for
    :func:`make_group`; raises :class:`CgroupUnavailable` with the reason where the
    machine does not allow it."""
    _check_name(name_prefix)
    version, own = _layout(Path(root), proc_cgroup)
    if version == "v1":
        made: list[Path] = []
        try:
            for d in own:
                made.append(_make_dir(d, name_prefix))
        except BaseException:
            for d in made:
                _rmdir_retry(d)
            raise
        return Tree("v1", made, list(own))
    return _open_v2(own, name_prefix)


def _open_v2(own: Path, prefix: str) -> Tree:
    tree_dir = _make_dir(own, prefix)
    tree = Tree("v2", [tree_dir], [own])
    try:
        try:
            tree.enabled_in_own = _enable(own)
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise _why(exc, f"enable the memory and pids controllers in {own}/cgroup.subtree_control") from exc
            # Our own cgroup holds processes (us, at least): move only this process into
            # a leaf of the tree, then try again.
            main = tree_dir / "main"
            try:
                _mkdir(main)
                _write(main / "cgroup.procs", str(os.getpid()))
            except OSError as exc2:
                raise _why(exc2, f"move the grader into {main}") from exc2
            tree.moved_to_main = True
            try:
                tree.enabled_in_own = _enable(own)
            except OSError as exc2:
                if exc2.errno != errno.EBUSY:
                    raise _why(exc2, f"enable the memory and pids controllers in {own}") from exc2
                others = sorted(int(w) for w in _words(own / "cgroup.procs") if w.isdigit())
                raise _unavailable(
                    f"our cgroup {own} holds other processes ({', '.join(map(str, others[:10])) or 'unknown'}"
                    f"{', ...' if len(others) > 10 else ''}), so it cannot pass the memory and pids "
                    f"controllers down (cgroup v2's no-internal-processes rule): open the cgroup tree "
                    f"before starting any worker, and give the grader a cgroup of its own") from exc2
        try:
            _enable(tree_dir)
        except OSError as exc:
            raise _why(exc, f"enable the memory and pids controllers in {tree_dir}") from exc
    except BaseException:
        _undo_v2(tree)
        raise
    return tree


def _undo_v2(tree: Tree) -> None:
    """Best effort: put everything back as it was before a failed :func:`open_tree`."""
    tree_dir, own = tree.dirs[0], tree.own[0]
    if tree.moved_to_main:
        try:
            if tree.enabled_in_own:
                _write(own / "cgroup.subtree_control", " ".join("-" + c for c in tree.enabled_in_own))
            _write(own / "cgroup.procs", str(os.getpid()))
            tree.moved_to_main = False
            _rmdir(tree_dir / "main")
        except OSError:
            return
    try:
        _rmdir(tree_dir)
    except OSError:
        pass


def make_group(parent: Tree, name: str, memory: int, processes: int) -> Group:
    """A new group ``name`` in ``parent`` capped at ``memory`` bytes (no swap) and
    ``processes`` tasks (processes and threads together)."""
    _check_name(name)
    memory, processes = int(memory), int(processes)
    if memory <= 0 or processes <= 0:
        raise ValueError("memory and processes must be positive")
    dirs = []
    try:
        for d in parent.dirs:
            g = d / name
            try:
                _mkdir(g)
            except FileExistsError:
                raise
            except OSError as exc:
                raise _why(exc, f"create the cgroup {g}") from exc
            dirs.append(g)
        group = Group(parent.version, dirs, name)
        if parent.version == "v2":
            g = dirs[0]
            _write(g / "memory.max", str(memory))
            if (g / "memory.swap.max").exists():
                _write(g / "memory.swap.max", "0")
            if (g / "memory.oom.group").exists():
                _write(g / "memory.oom.group", "1")
            _write(g / "pids.max", str(processes))
        else:
            mem, pids = dirs
            # memsw (memory + swap) may never be below the memory limit: memory first.
            _write(mem / "memory.limit_in_bytes", str(memory))
            if (mem / "memory.memsw.limit_in_bytes").exists():
                _write(mem / "memory.memsw.limit_in_bytes", str(memory))
            _write(pids / "pids.max", str(processes))
    except BaseException:
        for d in dirs:
            try:
                _rmdir(d)
            except OSError:
                pass
        raise
    parent.groups.append(group)
    return group
