"""The grading Job's pod, without privileges, emulated with ``runc`` (no cluster here).

``deploy/k8s/grade-job.yaml``'s pod template is turned into the OCI configuration a kubelet
and containerd would give it (``tests/deploy_oci.py``: user namespace, uid 1000, no
capability, no privilege escalation, unmasked ``/proc``, read-only root, the Localhost seccomp
profile of ``deploy/seccomp/``), and the Job's own arguments run in it behind the image's
ENTRYPOINT (tini), on a small class: the pod takes every submission from the work queue (the
only grader), the right, the wrong and the untouched one get their expected scores, its report
covers the class; the grader says it falls back to rlimits (the pod's cgroup file system is
read-only). Stopped as the kubelet stops a pod (SIGTERM to the container's init, tini, which
hands it to the grader's process group) while it grades, the pod ends within seconds with
exit code 143 and its claim is back in the queue.

The settings that came before, and each requirement taken away on its own, are shown to stop
the grader before it grades anything: a default pod, one with SYS_ADMIN under RuntimeDefault,
the user-namespaced pod under RuntimeDefault (no ``pivot_root``, no namespaces), and the same
pod with a masked ``/proc``.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path

import pytest

import deploy_files  # noqa: E402
import deploy_oci  # noqa: E402
from grading_submissions import write_class  # noqa: E402

from classroom.orchestration import workqueue  # noqa: E402
from classroom.reporting import merge  # noqa: E402

ROOT = deploy_files.ROOT
REASON = deploy_oci.skip_reason()
if REASON is None and Path("/tmp") in ROOT.resolve().parents:
    # the Job's emptyDir at /tmp covers the host's /tmp inside the pod, and with it this
    # checkout, which stands for the image's files and the course's Python environment
    REASON = f"the checkout ({ROOT}) lies below /tmp, which the pod's emptyDir /tmp hides: clone it elsewhere"
needs_runc = pytest.mark.skipif(REASON is not None, reason=REASON or "")

PROFILE = ROOT / "deploy" / "seccomp" / "andrea-grading.json"
# one right, one wrong and one untouched GELU: the points each gets
LEARNERS = {"gelu_solution": 10.0, "gelu_erf": 4.0, "gelu_untouched": 0.0}
INDEX = 0  # JOB_COMPLETION_INDEX of the emulated pod
_host_ranges = iter(range(40, 200))


def _pod_and_container():
    job = deploy_files.grading_job()
    pod = copy.deepcopy(job["spec"]["template"]["spec"])
    return job, pod, pod["containers"][0]


def _profile_name(pod) -> str:
    return pod["securityContext"]["seccompProfile"]["localhostProfile"]


def _args(job, container) -> list[str]:
    """The image's ENTRYPOINT and the Job's arguments, as containerd joins them, with one
    worker instead of the Job's four (this machine is small)."""
    assert "command" not in container, "a Job `command:` would replace the image's ENTRYPOINT"
    args = list(container["args"])
    assert "--workers 4" in args[-1]
    args[-1] = args[-1].replace("--workers 4", "--workers 1")
    return deploy_files.image_entrypoint() + args


def _folder() -> str:
    return f"grader-{INDEX}"  # the pod's working folder on the results volume


def _write_class(dest: Path, names=LEARNERS) -> None:
    write_class(dest, list(names))
    for d in [dest, *dest.rglob("*")]:
        os.chmod(d, 0o755 if d.is_dir() else 0o644)


def _run_pod(pod, container, job, work: Path, submissions: Path, seed_results: Path | None = None, stop_when=None):
    """Run the pod's container to its end; returns (completed process, results folder)."""
    host_id = deploy_oci.USERNS_SIZE * next(_host_ranges)
    results = work / "results"
    results.mkdir(parents=True)
    for d in [work, *work.parents]:
        if d == Path("/tmp"):
            break
        os.chmod(d, 0o755)
    if seed_results is not None:  # a template the grader may reuse (it checks its digest)
        shutil.copytree(seed_results, results, dirs_exist_ok=True)
    in_pod = (pod.get("securityContext") or {}).get("runAsUser", deploy_files.image_user())
    uid = (host_id if pod.get("hostUsers") is False else 0) + in_pod
    for d in [results, *results.rglob("*")]:
        os.lchown(d, uid, uid)  # as the kubelet's fsGroup handling leaves a volume for the pod
    python = Path(sys.executable)
    venv_bin = python.parent
    env = {
        "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
        "JOB_COMPLETION_INDEX": str(INDEX),
        "HOSTNAME": "andrea-grade-0",
    }
    for e in container.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        elif e["name"] == "NBGRADER_DB_URL":  # the Secret: a SQLite gradebook on the results volume
            env[e["name"]] = "sqlite:////results/gradebook.db"
    # the image: this machine's /usr and /etc, the course's Python, and this checkout as the
    # image's course folder (the Job's workingDir) and at its own path (where its venv points)
    base = os.path.realpath(sys.base_prefix)
    ro = {"/usr": "/usr", "/etc": "/etc", base: base, str(ROOT): str(ROOT), container["workingDir"]: str(ROOT)}
    config = deploy_oci.oci_config(
        pod, container, process_args=_args(job, container), env=env, cwd=container["workingDir"],
        image_user=deploy_files.image_user(),
        volumes={"/submissions": submissions, "/results": results, "/tmp": None},
        ro_binds=ro, localhost_profiles={_profile_name(_pod_and_container()[1]): PROFILE}, host_id=host_id)
    proc = deploy_oci.run(config, work, timeout=900, stop_when=stop_when and (lambda: stop_when(results)))
    return proc, results


@pytest.fixture(scope="module")
def pod_root():
    """A folder the pods' mapped uids can reach (pytest's own is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="andrea-pods-"))
    os.chmod(path, 0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def graded(pod_root):
    work = pod_root
    subs = work / "submissions"
    _write_class(subs)
    job, pod, container = _pod_and_container()
    proc, results = _run_pod(pod, container, job, work / "ok", subs)
    return proc, results, subs


@pytest.mark.slow
@needs_runc
def test_the_job_grades_a_class_in_an_unprivileged_pod(graded):
    proc, results, _ = graded
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "3 submissions found, 0 already graded, 3 to grade" in out, out[-4000:]
    # the pod's cgroup file system is read-only: the grader says what it falls back to
    assert "no cgroup can be used here" in out and "falling back to rlimits" in out, out[-4000:]
    scores = merge.scores(f"sqlite:///{results / 'gradebook.db'}")
    got = {student: sum(v or 0 for v in cells.values()) for (student, _), cells in scores.items()}
    assert got == LEARNERS, out[-4000:]
    report = (results / _folder() / "report.txt").read_text()
    first = report.splitlines()[0]
    assert first.startswith("Grading report: the class as the gradebook holds it, 3 learner(s)"), first
    assert "this run graded 3 submission(s)" in first, first
    assert all(n in report for n in LEARNERS)


def _without(pod, container, what):
    psc, csc = pod.setdefault("securityContext", {}), container.setdefault("securityContext", {})
    if what == "default pod":  # nothing asked for: the image's user, default capabilities, no seccomp
        pod.pop("hostUsers")
        pod["securityContext"] = {}
        container["securityContext"] = {}
    elif what == "SYS_ADMIN under RuntimeDefault":
        pod.pop("hostUsers")
        pod["securityContext"] = {"seccompProfile": {"type": "RuntimeDefault"}}
        container["securityContext"] = {"capabilities": {"add": ["SYS_ADMIN"]}}
    elif what == "user namespace under RuntimeDefault":
        psc["seccompProfile"] = {"type": "RuntimeDefault"}
    elif what == "user namespace with a masked /proc":
        csc.pop("procMount")
    else:
        raise AssertionError(what)


@pytest.mark.slow
@needs_runc
@pytest.mark.parametrize("what", ["default pod", "SYS_ADMIN under RuntimeDefault",
                                  "user namespace under RuntimeDefault", "user namespace with a masked /proc"])
def test_without_each_requirement_the_grader_refuses(graded, pod_root, what):
    _, results_ok, subs = graded
    tmp_path = pod_root / what.replace(" ", "-").replace("/", "")
    job, pod, container = _pod_and_container()
    _without(pod, container, what)
    seed = tmp_path / "seed" / _folder()
    shutil.copytree(results_ok / _folder() / "template", seed / "template")
    proc, results = _run_pod(pod, container, job, tmp_path / "pod", subs, seed_results=seed.parent)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out[-3000:]
    assert "bubblewrap could not create the sandbox" in out, out[-3000:]
    assert "Traceback" not in out, out[-3000:]
    assert _graded(results) == 0, out[-3000:]  # it stopped before grading anything


def _graded(results: Path) -> int:
    """How many submissions the pod's gradebook has graded (0 where it has none yet: the
    grader checks the gradebook first, which may create an empty one)."""
    db = results / "gradebook.db"
    if not db.is_file():
        return 0
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        n = con.execute("SELECT count(*) FROM submitted_assignment").fetchone()[0] if "submitted_assignment" in tables else 0
        if "andrea_grading_queue" in tables:
            n += con.execute("SELECT count(*) FROM andrea_grading_queue WHERE state = 'done'").fetchone()[0]
        return n
    finally:
        con.close()


def _claimed(results: Path) -> bool:
    """Whether the pod's gradebook (the results volume) has a claim in its work queue."""
    db = results / "gradebook.db"
    if not db.is_file():
        return False
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return bool(con.execute("SELECT count(*) FROM andrea_grading_queue WHERE state = 'claimed'").fetchone()[0])
    except sqlite3.Error:  # not there yet
        return False
    finally:
        con.close()


@pytest.mark.slow
@needs_runc
def test_a_pod_stopped_mid_run_ends_in_seconds_and_gives_its_claim_back(graded, pod_root):
    _, results_ok, _ = graded
    from hostile.submissions import GELU, notebook_with
    subs = pod_root / "slow-submissions"
    released = json.loads((ROOT / "exercises" / "03_gelu" / "gelu.ipynb").read_text())
    path = subs / "slow_learner" / "03_gelu" / "gelu.ipynb"
    path.parent.mkdir(parents=True)
    path.write_text(notebook_with(released, GELU + "import time\ntime.sleep(40)\n"))
    for d in [subs, *subs.rglob("*")]:
        os.chmod(d, 0o755 if d.is_dir() else 0o644)
    job, pod, container = _pod_and_container()
    seed = pod_root / "stop-seed" / _folder()
    shutil.copytree(results_ok / _folder() / "template", seed / "template")
    proc, results = _run_pod(pod, container, job, pod_root / "stopped", subs, seed_results=seed.parent,
                             stop_when=_claimed)
    out = proc.stdout + proc.stderr
    assert proc.stop_seconds is not None, out[-3000:]
    assert proc.returncode == 143, out[-3000:]
    assert proc.stop_seconds < pod["terminationGracePeriodSeconds"] / 2, proc.stop_seconds
    assert "stopped (SIGTERM)" in out and "Traceback" not in out, out[-3000:]
    con = sqlite3.connect(results / "gradebook.db")
    rows = con.execute("SELECT state, claimed_by, attempts FROM andrea_grading_queue").fetchall()
    con.close()
    assert rows == [(workqueue.TODO, None, 0)], rows  # back in the queue, the attempt not counted


def test_the_profile_is_runtime_default_plus_what_bubblewrap_needs():
    from deploy.seccomp import containerd_default, make_profile
    assert make_profile.main(["--check"]) == 0
    shipped = json.loads(PROFILE.read_text())
    default = containerd_default.runtime_default((), arches=make_profile.NODE_ARCHES)

    def allowed(p):
        return {n for r in p["syscalls"] if r["action"] == "SCMP_ACT_ALLOW" for n in r["names"]}
    assert allowed(shipped) - allowed(default) == {"unshare", "mount", "umount2", "pivot_root", "chroot",
                                                   "sethostname"}
    assert allowed(default) <= allowed(shipped)
    # clone: RuntimeDefault allows it only without namespace flags; the profile without condition
    assert [r for r in shipped["syscalls"] if "clone" in r["names"]][0].get("args") == []
    for name in ("setns", "bpf", "keyctl", "add_key", "perf_event_open", "open_tree", "init_module"):
        assert name not in allowed(shipped), name
    assert shipped["defaultAction"] == "SCMP_ACT_ERRNO"
