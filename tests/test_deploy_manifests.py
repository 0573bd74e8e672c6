"""The Kubernetes manifests in deploy/k8s/: valid, and saying what they must.

- every manifest passes ``kubernetes-validate --strict`` (unknown fields rejected) against
  Kubernetes 1.28 and every later version the validator knows; a misspelt field is rejected;
- the grading Job: every pod takes its work from the queue (no part of the class fixed per
  pod), the image's ENTRYPOINT kept (``args``, no ``command``), the gradebook from its Secret, the submissions read-only, no privilege (user namespace, uid
  1000, no capability, no escalation, read-only root, the Localhost seccomp profile that
  seccomp-profile.yaml installs), a distinct sandbox uid range per pod, spread over nodes;
- the NetworkPolicies: the gradebook's port for instructors' servers and grading pods only.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import deploy_files  # noqa: E402

from classroom.isolation import uids  # noqa: E402

ROOT = deploy_files.ROOT
K8S = deploy_files.K8S
FILES = sorted(K8S.glob("*.yaml"))


def _versions() -> list[str]:
    import importlib.resources
    base = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    found = sorted({p.name.split("-")[0].lstrip("v") for p in base.iterdir() if p.name.endswith("-local-strict")},
                   key=lambda v: tuple(int(x) for x in v.split(".")))
    return [v for v in found if tuple(int(x) for x in v.split("."))[:2] >= (1, 28)]


def test_every_manifest_is_valid_on_kubernetes_1_28_and_later():
    import kubernetes_validate
    versions = _versions()
    assert versions[0] == "1.28.0" and len(versions) >= 10, versions
    checked = 0
    for path in FILES:
        for doc in deploy_files.manifests(path):
            for v in versions:
                kubernetes_validate.validate(doc, v, strict=True)  # raises on the first error
                checked += 1
    assert checked >= 11 * len(versions)


def test_the_command_line_validator_rejects_a_misspelt_field(tmp_path):
    good = subprocess.run([str(Path(sys.executable).parent / "kubernetes-validate"), "--strict", "--quiet",
                           "-k", "1.28.0", *map(str, FILES)], capture_output=True, text=True)
    assert good.returncode == 0, good.stdout + good.stderr
    text = (K8S / "grade-job.yaml").read_text().replace("procMount: Unmasked", "procMout: Unmasked")
    bad = tmp_path / "grade-job.yaml"
    bad.write_text(text)
    proc = subprocess.run([str(Path(sys.executable).parent / "kubernetes-validate"), "--strict", "--quiet",
                           "-k", "1.28.0", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "'procMout' was unexpected" in proc.stdout + proc.stderr


def _job():
    job = deploy_files.grading_job()
    pod = job["spec"]["template"]["spec"]
    return job, pod, pod["containers"][0]


def test_every_pod_takes_its_work_from_the_queue():
    job, pod, container = _job()
    spec = job["spec"]
    # an elastic Indexed Job: the index names a pod's folder and uid range, not a part of the class
    assert spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == spec["completions"]
    script = container["args"][-1]
    assert "classroom.grade" in script
    assert "--shard" not in script and "JOB_COMPLETION_INDEX+1" not in script, script
    assert "--db" not in script, script  # the URL holds the password: never on a command line
    assert "--out /results/grader-$JOB_COMPLETION_INDEX" in script, script
    env = {e["name"]: e for e in container["env"]}
    assert env["NBGRADER_DB_URL"]["valueFrom"]["secretKeyRef"] == {"name": "andrea-gradebook", "key": "url"}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/submissions"].get("readOnly") is True
    # a pod removed mid-run stops within its grace period (the grader needs seconds)
    assert pod["terminationGracePeriodSeconds"] >= 30


def test_tini_stays_pid_1():
    _, _, container = _job()
    assert "command" not in container  # a command would replace the image's ENTRYPOINT
    assert deploy_files.image_entrypoint()[0] == "tini"
    assert container["args"][:2] == ["/bin/sh", "-c"] and container["args"][-1].split("&&")[-1].strip().startswith("exec ")


def test_the_pod_asks_for_no_privilege():
    _, pod, container = _job()
    psc, csc = pod["securityContext"], container["securityContext"]
    assert pod["hostUsers"] is False
    assert pod["automountServiceAccountToken"] is False
    assert psc["runAsUser"] == 1000 and psc["runAsNonRoot"] is True
    assert "privileged" not in csc
    assert csc["allowPrivilegeEscalation"] is False
    assert csc["capabilities"] == {"drop": ["ALL"]}
    assert csc["readOnlyRootFilesystem"] is True
    assert csc["procMount"] == "Unmasked"
    profile = psc["seccompProfile"]
    assert profile["type"] == "Localhost"
    # the DaemonSet puts the repository's profile exactly there
    folder, name = profile["localhostProfile"].split("/")
    assert (ROOT / "deploy" / "seccomp" / name).is_file()
    ds = deploy_files.manifests(K8S / "seccomp-profile.yaml")[0]
    install = ds["spec"]["template"]["spec"]["initContainers"][0]["args"][-1]
    assert f"/host-seccomp/{folder}/{name}" in install
    hostpath = ds["spec"]["template"]["spec"]["volumes"][1]["hostPath"]["path"]
    assert hostpath == "/var/lib/kubelet/seccomp"


def test_each_pod_has_its_own_sandbox_uids():
    job, pod, container = _job()
    script = container["args"][-1]
    export = script.split("&&")[0].strip()
    assert export.startswith("export ANDREA_UID_BASE=")
    bases = []
    for index in range(job["spec"]["completions"]):
        out = subprocess.run(["sh", "-c", f"{export} && echo $ANDREA_UID_BASE"], capture_output=True, text=True,
                             env={"JOB_COMPLETION_INDEX": str(index), "PATH": "/usr/bin:/bin"}, check=True)
        bases.append(int(out.stdout))
    # the grader takes it (its own check) and a run uses BASE .. BASE+PROBE_UID_OFFSET
    env_check = subprocess.run([sys.executable, "-c", "import classroom.grade as g; print(g.UID_BASE)"],
                               capture_output=True, text=True, cwd=ROOT,
                               env={"ANDREA_UID_BASE": str(bases[-1]), "PATH": "/usr/bin:/bin"})
    assert env_check.stdout.strip() == str(bases[-1]), env_check.stderr
    spans = sorted((b, b + uids.PROBE_UID_OFFSET) for b in bases)
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:])), spans
    # and the graders spread over the nodes
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    labels = job["spec"]["template"]["metadata"]["labels"]
    assert all(labels[k] == v for k, v in term["labelSelector"]["matchLabels"].items())


def _policies() -> dict[str, dict]:
    docs = deploy_files.manifests(K8S / "network-policies.yaml") + deploy_files.manifests(K8S / "ngshare.yaml")
    return {d["metadata"]["name"]: d["spec"] for d in docs if d["kind"] == "NetworkPolicy"}


POSTGRES = {"app.kubernetes.io/name": "postgresql"}


def test_only_instructors_and_graders_reach_the_gradebook():
    pol = _policies()
    inst = pol["andrea-instructors-to-gradebook"]
    assert inst["podSelector"]["matchLabels"] == {"component": "singleuser-server", "andrea-block-lab/role": "instructor"}
    assert inst["policyTypes"] == ["Egress"]
    assert inst["egress"] == [{"to": [{"podSelector": {"matchLabels": POSTGRES}}],
                               "ports": [{"protocol": "TCP", "port": 5432}]}]
    graders = pol["andrea-grading"]
    job_labels = deploy_files.grading_job()["spec"]["template"]["metadata"]["labels"]
    assert all(job_labels[k] == v for k, v in graders["podSelector"]["matchLabels"].items())
    assert graders["ingress"] == []
    ports = {(p["protocol"], p["port"]) for rule in graders["egress"] for p in rule["ports"]}
    assert ports == {("TCP", 5432), ("UDP", 53), ("TCP", 53)}
    db = pol["andrea-gradebook-clients"]
    assert db["podSelector"]["matchLabels"] == POSTGRES
    (rule,) = db["ingress"]
    assert [p["podSelector"]["matchLabels"] for p in rule["from"]] == [inst["podSelector"]["matchLabels"],
                                                                       graders["podSelector"]["matchLabels"]]
    assert rule["ports"] == [{"protocol": "TCP", "port": 5432}]
    # ngshare talks to the hub's API only (and DNS); only people's servers and the proxy reach it
    ng = pol["ngshare"]
    assert {r["to"][0].get("podSelector", {}).get("matchLabels", {}).get("component") for r in ng["egress"]} == {"hub", None}
    assert {f["podSelector"]["matchLabels"]["component"] for f in ng["ingress"][0]["from"]} == {"singleuser-server", "proxy"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_no_manifest_is_privileged(path):
    for doc in deploy_files.manifests(path):
        text = str(doc)
        assert "'privileged': True" not in text and "SYS_ADMIN" not in text, path.name
