"""The isolation backend of the grading machine itself: bubblewrap, cgroups and seccomp.

:class:`BubblewrapBackend` (the grading command's side, :class:`~.backend.Backend`):

- writes the run's three seccomp filters (:mod:`.seccomp`) and tries the sandbox once
  with exactly the settings the kernels get (:func:`.bwrap.check`);
- opens the run's cgroup tree (:mod:`.cgroups`) where the machine allows one, and says
  what it falls back to otherwise;
- prepares worker K: its scratch and runtime folders, the sandbox of its kernels (uid
  ``UID_BASE + K`` when grading as root) and of its answer servers (``UID_BASE + 500
  + K``), each with its own cgroup, and the kernel spec nbgrader starts kernels from
  (:mod:`.sandbox`, the launcher);
- at the end kills every process of the run's sandbox uids and removes the cgroups.

:class:`BubblewrapWorker` (one grading worker's side, :class:`~.backend.WorkerIsolation`)
keeps a kernel zygote and an answer zygote (:mod:`.zygote`) or, where nested
namespaces are not available, one bubblewrap sandbox per kernel and per answer server.
"""
from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from andrea_ref.grading.runner import GRADER_ENV

from .. import textsafe
from . import bwrap, cgroups, seccomp
from .answers import AnswerHost
from .backend import Backend, SandboxUnavailable, WorkerIsolation, WorkerSetup
from .processes import PARENT_ENV, die_with_parent, join_cgroup, kill_sandbox, kill_uid
from .sandbox import KERNEL_NAME, install_kernelspec
from .uids import ANSWER_UID_OFFSET, PROBE_UID_OFFSET
from .zygote import KERNELS, Zygote


# Every folder of a worker that a sandbox can write to (kernels: their private copies in
# scratch/, their sockets in rt/), or that a zygote keeps (kz/, answer/): made anew when a
# run prepares the worker, so nothing an earlier run's learners left there is reachable.
SANDBOX_DIRS = ("scratch", "rt", "kz", "answer")

# In every sandbox of a run, the checks know that the independent check decides the points
# (andrea_ref.grading.runner): a check marked left_to_grader is not run a second time there.
GRADED_HERE = {GRADER_ENV: "1"}


def kernel_spec(wdir: Path, uid: int | None, limits: bwrap.Limits, repo: Path, course: Path, *,
                seccomp_file: str | None = None, cgroup_procs: list[str] | None = None) -> bwrap.SandboxSpec:
    """The sandbox of worker ``wdir``'s kernels (their scratch and runtime folders made here)."""
    for d in ("scratch", "rt"):
        shutil.rmtree(wdir / d, ignore_errors=True)
        (wdir / d).mkdir(parents=True)
        bwrap.prepare_dir(wdir / d, uid if d == "rt" else None, 0o700 if d == "rt" else 0o711)
    ro, pypath = bwrap.default_ro_paths(repo, course)
    return bwrap.SandboxSpec(scratch_root=str(wdir / "scratch"), runtime_dir=str(wdir / "rt"),
                             pidfile=str(wdir / "sandbox.pid"), uid=uid, ro_paths=ro, pythonpath=pypath,
                             limits=limits, seccomp_file=seccomp_file, cgroup_procs=list(cgroup_procs or []),
                             env=dict(GRADED_HERE))


def answer_spec(wdir: Path, uid: int | None, limits: bwrap.Limits, repo: Path, course: Path, *,
                seccomp_file: str | None = None, cgroup_procs: list[str] | None = None) -> bwrap.SandboxSpec:
    """The sandbox of worker ``wdir``'s answer servers: like its kernels', under its own uid,
    with no host folder to write to at all (their working folder is a tmpfs of their own,
    and they have no runtime folder)."""
    base = wdir / "answer"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    bwrap.prepare_dir(base, uid, 0o711)
    ro, pypath = bwrap.default_ro_paths(repo, course)
    return bwrap.SandboxSpec(scratch_root=str(base), runtime_dir="", private_work=True,
                             pidfile=str(base / "sandbox.pid"), uid=uid, ro_paths=ro, pythonpath=pypath,
                             limits=limits, seccomp_file=seccomp_file, cgroup_procs=list(cgroup_procs or []),
                             env=dict(GRADED_HERE))


def clean_sandbox_dirs(wdir: Path, keep_logs: bool = False) -> None:
    """Empty what worker ``wdir``'s kernels could write to: their sockets folder and their
    private copies (``keep_logs``: each kernel's captured output, written by the launcher
    and never writable by the kernel, stays for the job's log)."""
    bwrap.empty_dir(wdir / "rt")
    scratch = wdir / "scratch"
    if not keep_logs:
        bwrap.empty_dir(scratch)
        return
    for job in scratch.glob("k-*"):
        if job.is_dir() and not job.is_symlink():
            bwrap.empty_dir(job, keep={"kernel.log"})
    bwrap.empty_dir(scratch, keep={job.name for job in scratch.glob("k-*")})


class BubblewrapBackend(Backend):
    """See the module docstring. ``uid_base`` None: grade as the calling user (no root)."""

    def __init__(self, out: Path, *, limits: bwrap.Limits, uid_base: int | None, grader_memory: int,
                 repo: Path, course: Path, zygote: bool = True, log=print):
        self.out, self.limits, self.uid_base, self.grader_memory = Path(out), limits, uid_base, grader_memory
        self.repo, self.course, self.zygote, self.log = Path(repo), Path(course), zygote, log
        self.programs: dict[str, str] = {}
        self.tree: cgroups.Tree | None = None
        self.workers = 0
        self.wdirs: list[Path] = []

    def _write_filters(self) -> None:
        """The three filters; raises SandboxUnavailable where they cannot be built."""
        why = seccomp.available()
        if why is not None:
            raise SandboxUnavailable(f"seccomp filters cannot be built here ({why}); install the Debian "
                                     "package libseccomp2 and the Python package pyseccomp")
        d = self.out / "workers" / "seccomp"
        d.mkdir(parents=True, exist_ok=True)
        self.programs = {
            "kernel": str(seccomp.write_program(d / "kernel.bpf", seccomp.SANDBOX_DENY + seccomp.NEST_DENY)),
            "answer": str(seccomp.write_program(d / "answer.bpf", seccomp.SANDBOX_DENY)),
            "nest": str(seccomp.write_program(d / "nest.bpf", seccomp.NEST_DENY))}

    def check(self) -> None:
        self._write_filters()
        probe_dir = self.out / "workers" / "probe"
        shutil.rmtree(probe_dir, ignore_errors=True)
        probe_dir.mkdir(parents=True)
        os.chmod(probe_dir, 0o711)
        uid = None if self.uid_base is None else self.uid_base + PROBE_UID_OFFSET
        try:
            bwrap.check(kernel_spec(probe_dir, uid, self.limits, self.repo, self.course,
                                    seccomp_file=self.programs["kernel"]))
        finally:
            shutil.rmtree(probe_dir, ignore_errors=True)

    def open(self) -> None:
        try:
            self.tree = cgroups.open_tree()
        except cgroups.CgroupUnavailable as exc:
            self.log(f"note: no cgroup can be used here ({textsafe.line(exc, 400)}); falling back to rlimits: "
                     "a kernel's address space is capped, but memory it holds outside it (shared memory, "
                     "memfd) is not, and the grading workers have no memory cap")
        if self.tree is None or self.tree.cpu_unavailable:
            why = self.tree.cpu_unavailable if self.tree is not None else "no cgroup"
            self.log(f"note: no CPU share per sandbox ({textsafe.line(why, 300)}): a learner who keeps every core "
                     "busy slows the learners graded beside it until the notebook's deadline")

    def prepare_worker(self, index: int, wdir: Path) -> WorkerSetup:
        wdir.mkdir(parents=True, exist_ok=True)
        os.chmod(wdir, 0o711)
        for d in SANDBOX_DIRS:  # whatever an earlier run left where sandboxes write
            shutil.rmtree(wdir / d, ignore_errors=True)
        self.wdirs.append(wdir)
        kuid = None if self.uid_base is None else self.uid_base + index
        auid = None if self.uid_base is None else self.uid_base + ANSWER_UID_OFFSET + index
        groups = {}
        if self.tree is not None:
            groups = {"kernel": self.tree.group(f"w{index}-kernel", self.limits.memory, self.limits.processes),
                      "answer": self.tree.group(f"w{index}-answer", self.limits.memory, self.limits.processes),
                      "grader": self.tree.group(f"w{index}-grader", self.grader_memory, 4096)}
        procs = {k: g.procs_files() for k, g in groups.items()}
        spec = kernel_spec(wdir, kuid, self.limits, self.repo, self.course, seccomp_file=self.programs["kernel"],
                           cgroup_procs=procs.get("kernel"))
        spec.save(wdir / "sandbox.json")
        install_kernelspec(wdir / "jupyter", wdir / "sandbox.json")
        answer_spec(wdir, auid, self.limits, self.repo, self.course, seccomp_file=self.programs["answer"],
                    cgroup_procs=procs.get("answer")).save(wdir / "answer.json")
        self.workers = max(self.workers, index + 1)
        return WorkerSetup(index=index, wdir=wdir, isolation=BubblewrapWorker, settings={
            "parent": os.getpid(), "zygote": self.zygote, "answer_uid": auid,
            "nest_filter": self.programs["nest"], "zygote_filter": self.programs["answer"],
            "grader_procs": procs.get("grader", []),
            "cgroup_version": self.tree.version if self.tree is not None else None,
            "groups": {k: [str(d) for d in g.dirs] for k, g in groups.items() if k != "grader"}})

    def confine_worker(self, setup: WorkerSetup, pid: int) -> None:
        try:  # capped from its first instruction on, not only once it has started up
            join_cgroup(setup.settings.get("grader_procs") or [], pid)
        except OSError:
            pass  # the worker joins by itself (and says so if it cannot)

    def close(self) -> None:
        if self.uid_base is not None:
            for i in range(self.workers):
                kill_uid(self.uid_base + i)  # nothing of the learners' code outlives the run
                kill_uid(self.uid_base + ANSWER_UID_OFFSET + i)
        for wdir in self.wdirs:  # a worker killed hard did not clean up after its last job
            clean_sandbox_dirs(wdir)
        if self.tree is not None:
            try:
                self.tree.close()
            except OSError as exc:  # the grades are kept; only the cleaning up failed
                self.log(f"warning: a cgroup of this run could not be removed ({textsafe.line(exc, 400)}); "
                         "its processes were killed")
            self.tree = None


def _oom(group) -> int:
    try:
        return group.oom_kills() if group is not None else 0
    except OSError:
        return 0


class BubblewrapWorker(WorkerIsolation):
    """See the module docstring."""

    kernel_name = KERNEL_NAME
    LIMIT_TEXT = {"kernel": "memory (the notebook's kernel was killed at its cap)",
                  "answer": "memory (the answer server was killed at its cap)"}

    def __init__(self, setup: WorkerSetup):
        self.setup, self.wdir, self.settings = setup, Path(setup.wdir), setup.settings
        self.spec = bwrap.SandboxSpec.load(self.wdir / "sandbox.json")
        self.groups = {k: cgroups.Group(self.settings["cgroup_version"], [Path(d) for d in dirs], k)
                       for k, dirs in (self.settings.get("groups") or {}).items()}
        self.kernels: Zygote | None = None
        self.answers = None
        self._lost = threading.Event()  # the kernel zygote stopped answering during the job
        self._oom_before: dict[str, int] = {}

    def start(self) -> dict:
        # a grading run killed hard takes its workers (and sandboxes) with it
        die_with_parent(self.settings.get("parent"))
        join_cgroup(self.settings.get("grader_procs") or [])
        if self.spec.uid is not None:
            kill_uid(self.spec.uid)  # leftovers of a run that was killed hard
        if self.settings.get("answer_uid") is not None:
            kill_uid(self.settings["answer_uid"])
        os.environ.update({  # where nbgrader finds the kernel spec, and the launchers their worker
            PARENT_ENV: str(os.getpid()),
            "JUPYTER_PATH": str(self.wdir / "jupyter"),
            "JUPYTER_RUNTIME_DIR": str(self.wdir / "rt"),
            "JUPYTER_CONFIG_DIR": str(self.wdir / "jupyter_config"),
            "JUPYTER_DATA_DIR": str(self.wdir / "jupyter_data"),
            "JUPYTER_PLATFORM_DIRS": "1",
        })
        zygote = self.settings.get("zygote", True)
        if zygote:
            self.kernels = Zygote(self.spec, self.wdir / "kz", mode=KERNELS, nest_filter=self.settings["nest_filter"],
                                  zygote_filter=self.settings["zygote_filter"], anchor=self.wdir / "autograded")
            try:
                self.kernels.launch()  # it imports PyTorch while the answer server's zygote starts below
            except (SandboxUnavailable, OSError):
                self.kernels = None
        host = AnswerHost(bwrap.SandboxSpec.load(self.wdir / "answer.json"), self.wdir / "answer" / "work",
                          nest_filter=self.settings["nest_filter"], zygote=zygote)
        try:
            host.start()
        except Exception as exc:  # noqa: BLE001 - reported for every job
            ready = {"answer_mode": None, "why": f"{exc}"[:300]}
        else:
            self.answers = host
            ready = {"answer_mode": host.mode, "why": host.why_not_zygote}
        if self.kernels is not None:
            try:
                self.kernels.wait_ready()
                self.kernels.launcher_spec().save(self.wdir / "sandbox.json")  # the launcher asks the zygote now
            except (SandboxUnavailable, OSError):
                self.kernels = None  # one bubblewrap sandbox per kernel, as the launcher does by itself
        return ready

    def kernel_settings(self) -> dict[str, object]:
        # one kernel at a time per worker: its connection file and ipc sockets live in rt/
        return {"Execute.kernel_name": KERNEL_NAME, "KernelManager.transport": "ipc",
                "KernelManager.connection_file": str(self.wdir / "rt" / "kernel.json")}

    def begin_job(self) -> None:
        clean_sandbox_dirs(self.wdir)
        self._lost.clear()
        self._oom_before = {k: _oom(g) for k, g in self.groups.items()}

    def stop_kernel(self) -> None:
        kill_sandbox(self.spec.pidfile)
        if self.kernels is not None and not self.kernels.reset():
            self._lost.set()

    def end_job(self) -> None:
        if self.groups.get("kernel") is not None and (self.kernels is None or self._lost.is_set()):
            self.groups["kernel"].kill_all()  # whatever the kernel left running (with a zygote: reset did)
        clean_sandbox_dirs(self.wdir, keep_logs=True)  # nothing the kernels wrote outlives them
        if self._lost.is_set():
            try:  # a zygote that stopped answering is replaced; until then kernels get bwrap each
                self.kernels.start()
            except (SandboxUnavailable, OSError):
                pass

    def limits_hit(self) -> list[str]:
        return [self.LIMIT_TEXT.get(k, f"memory ({k})") for k, g in self.groups.items()
                if _oom(g) > self._oom_before.get(k, 0)]

    def reset(self) -> None:
        if self.answers is not None:
            self.answers.reset()

    def close(self) -> None:
        if self.answers is not None:
            self.answers.close()
        if self.kernels is not None:
            self.kernels.close()
        clean_sandbox_dirs(self.wdir)
