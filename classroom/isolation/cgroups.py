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
* a cap on processes and threads (``pids.max``), so a fork bomb stops at the cap;
* where the machine allows it, a CPU share of its own (``cpu.weight`` on v2,
  ``cpu.shares`` on v1), the same for every group: the scheduler shares the cores
  between groups first and between a group's processes second, so a learner who
  starts a hundred spinning processes still gets one group's share, and a learner
  graded beside it is slowed by at most :data:`SLOWDOWN_BOUND` (measured by
  ``tests/test_classroom_fairness.py``). Without the ``cpu`` controller the run goes
  on without a share and says so (:attr:`Tree.cpu_unavailable`).

This module holds the tree (:class:`Tree`, :func:`open_tree`) and the making of its
groups with their caps (:func:`make_group`). A group once made -- processes joining
it, killing them, its memory use, removing it -- is :mod:`.cgroup_group`'s, with the
file writes every change goes through; :meth:`Tree.close` removes every group made
here, so a job leaves nothing running behind it.

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
from pathlib import Path

# Every change to the cgroup file system goes through cgroup_group's write, mkdir and rmdir,
# read there at each call (tests that stand a fake kernel in for them patch them there).
from . import cgroup_group
from .cgroup_group import Group
from .cgroup_layout import (CONTROLLERS, CgroupUnavailable, cpu_dir, cpu_unavailable, detect, layout,
                            unavailable, why, words)

__all__ = ["CONTROLLERS", "CgroupUnavailable", "Group", "SLOWDOWN_BOUND", "Tree", "cpu_unavailable", "detect",
           "make_group", "open_tree"]

# The most a learner's sandbox may slow a learner graded beside it (grading time beside
# a learner keeping every core busy with many processes, over the time without it).
SLOWDOWN_BOUND = 3.0
CPU_WEIGHT = {"v2": ("cpu.weight", "100"), "v1": ("cpu.shares", "1024")}  # the same for every group


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
        self.cpu_unavailable: str | None = "not tried"  # why groups get no CPU share (None: they do)

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
                cgroup_group.rmdir_retry(d)
            except OSError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def _leave_main(self) -> bool:
        tree, own = self.dirs[0], self.own[0]
        off = " ".join("-" + c for c in CONTROLLERS + (() if self.cpu_unavailable else ("cpu",)))
        try:
            cgroup_group.write(tree / "cgroup.subtree_control", off)
            if self.enabled_in_own:
                cgroup_group.write(own / "cgroup.subtree_control", " ".join("-" + c for c in self.enabled_in_own))
            cgroup_group.write(own / "cgroup.procs", str(os.getpid()))
        except OSError:
            return False
        self.moved_to_main = False
        self.enabled_in_own = []
        try:
            cgroup_group.rmdir_retry(tree / "main")
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
            cgroup_group.mkdir(d)
            return d
        except FileExistsError:
            continue
        except OSError as exc:
            raise why(exc, f"create a cgroup under {parent}") from exc
    raise unavailable(f"cannot create a cgroup under {parent}: 100 names taken")


def _enable(d: Path, controllers=CONTROLLERS) -> list[str]:
    """Enable ``controllers`` in ``d``'s cgroup.subtree_control; the ones newly enabled."""
    have = words(d / "cgroup.subtree_control")
    todo = [c for c in controllers if c not in have]
    if todo:
        cgroup_group.write(d / "cgroup.subtree_control", " ".join("+" + c for c in todo))
    return todo


def open_tree(name_prefix: str = "andrea-grading", root="/sys/fs/cgroup", *,
              proc_cgroup: str = "/proc/self/cgroup") -> Tree:
    """Create the grading run's folder under this process's own cgroup, ready for
    :func:`make_group`; raises :class:`CgroupUnavailable` with the reason where the
    machine does not allow it (a missing ``cpu`` controller only leaves
    :attr:`Tree.cpu_unavailable` set)."""
    _check_name(name_prefix)
    version, own = layout(Path(root), proc_cgroup)
    cpu = cpu_dir(Path(root), proc_cgroup)
    if version == "v1":
        made: list[Path] = []
        try:
            for d in own:
                made.append(_make_dir(d, name_prefix))
        except BaseException:
            for d in made:
                cgroup_group.rmdir_retry(d)
            raise
        tree = Tree("v1", made, list(own))
        tree.cpu_unavailable = cpu if isinstance(cpu, str) else None
        if tree.cpu_unavailable is None:
            try:
                tree.dirs.append(_make_dir(cpu, name_prefix))  # its groups' third folder
            except CgroupUnavailable as exc:
                tree.cpu_unavailable = str(exc)
        return tree
    tree = _open_v2(own, name_prefix)
    tree.cpu_unavailable = cpu if isinstance(cpu, str) else None
    if tree.cpu_unavailable is None:
        try:
            tree.enabled_in_own += _enable(own, ("cpu",))
            _enable(tree.dirs[0], ("cpu",))
        except OSError as exc:
            tree.cpu_unavailable = f"cannot enable the cpu controller below {own}: {exc.strerror or exc}"
    return tree


def _open_v2(own: Path, prefix: str) -> Tree:
    tree_dir = _make_dir(own, prefix)
    tree = Tree("v2", [tree_dir], [own])
    try:
        try:
            tree.enabled_in_own = _enable(own)
        except OSError as exc:
            if exc.errno != errno.EBUSY:
                raise why(exc, f"enable the memory and pids controllers in {own}/cgroup.subtree_control") from exc
            # Our own cgroup holds processes (us, at least): move only this process into
            # a leaf of the tree, then try again.
            main = tree_dir / "main"
            try:
                cgroup_group.mkdir(main)
                cgroup_group.write(main / "cgroup.procs", str(os.getpid()))
            except OSError as exc2:
                raise why(exc2, f"move the grader into {main}") from exc2
            tree.moved_to_main = True
            try:
                tree.enabled_in_own = _enable(own)
            except OSError as exc2:
                if exc2.errno != errno.EBUSY:
                    raise why(exc2, f"enable the memory and pids controllers in {own}") from exc2
                others = sorted(int(w) for w in words(own / "cgroup.procs") if w.isdigit())
                raise unavailable(
                    f"our cgroup {own} holds other processes ({', '.join(map(str, others[:10])) or 'unknown'}"
                    f"{', ...' if len(others) > 10 else ''}), so it cannot pass the memory and pids "
                    f"controllers down (cgroup v2's no-internal-processes rule): open the cgroup tree "
                    f"before starting any worker, and give the grader a cgroup of its own") from exc2
        try:
            _enable(tree_dir)
        except OSError as exc:
            raise why(exc, f"enable the memory and pids controllers in {tree_dir}") from exc
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
                cgroup_group.write(own / "cgroup.subtree_control", " ".join("-" + c for c in tree.enabled_in_own))
            cgroup_group.write(own / "cgroup.procs", str(os.getpid()))
            tree.moved_to_main = False
            cgroup_group.rmdir(tree_dir / "main")
        except OSError:
            return
    try:
        cgroup_group.rmdir(tree_dir)
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
                cgroup_group.mkdir(g)
            except FileExistsError:
                raise
            except OSError as exc:
                raise why(exc, f"create the cgroup {g}") from exc
            dirs.append(g)
        group = Group(parent.version, dirs, name)
        if parent.version == "v2":
            g = dirs[0]
            cgroup_group.write(g / "memory.max", str(memory))
            if (g / "memory.swap.max").exists():
                cgroup_group.write(g / "memory.swap.max", "0")
            if (g / "memory.oom.group").exists():
                cgroup_group.write(g / "memory.oom.group", "1")
            cgroup_group.write(g / "pids.max", str(processes))
            if parent.cpu_unavailable is None and (g / CPU_WEIGHT["v2"][0]).exists():
                cgroup_group.write(g / CPU_WEIGHT["v2"][0], CPU_WEIGHT["v2"][1])
        else:
            mem, pids = dirs[:2]
            # memsw (memory + swap) may never be below the memory limit: memory first.
            cgroup_group.write(mem / "memory.limit_in_bytes", str(memory))
            if (mem / "memory.memsw.limit_in_bytes").exists():
                cgroup_group.write(mem / "memory.memsw.limit_in_bytes", str(memory))
            cgroup_group.write(pids / "pids.max", str(processes))
            if len(dirs) > 2:  # the cpu hierarchy's folder
                cgroup_group.write(dirs[2] / CPU_WEIGHT["v1"][0], CPU_WEIGHT["v1"][1])
    except BaseException:
        for d in dirs:
            try:
                cgroup_group.rmdir(d)
            except OSError:
                pass
        raise
    parent.groups.append(group)
    return group
