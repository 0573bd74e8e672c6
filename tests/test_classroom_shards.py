"""Grading a class across machines: ``python -m classroom.grade --shard K/N``.

- the shards of N are disjoint and cover every learner, for several N;
- two shards graded by two separate grading commands running at the same time, both
  merging into one real PostgreSQL gradebook, give the same scores as one unsharded run
  into SQLite, with nothing duplicated; a shard's report holds only its own learners;
- a bad ``--shard`` is refused with a message naming it (exit code 2);
- the Kubernetes files in ``deploy/`` parse, and the grading Job runs one shard per pod.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).parent))
from grading_submissions import ASSIGNMENTS, CASES, make_submission  # noqa: E402
from test_classroom_parallel import postgres  # noqa: E402,F401 - the throwaway PostgreSQL server

from classroom import grade, merge  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# two learners in each shard of 2 (checked below), with different scores
LEARNERS = ["gelu_solution", "gelu_untouched", "gelu_erf", "gelu_custom_eq"]


# --------------------------------------------------------------------------- the partition
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_shards_are_disjoint_and_cover_the_class(n):
    ids = [f"learner{i:03d}" for i in range(300)] + ["a_b-c8687a", "ünï", "x@example.org", "A.B"]
    owners = {sid: [k for k in range(1, n + 1) if grade.in_shard(sid, (k, n))] for sid in ids}
    assert all(len(ks) == 1 for ks in owners.values()), {s: ks for s, ks in owners.items() if len(ks) != 1}
    assert all(owners[sid] == [grade.shard_of(sid, n)] for sid in ids)
    # every shard gets learners, and no shard gets far more than its share
    sizes = [sum(owners[s] == [k] for s in ids) for k in range(1, n + 1)]
    assert min(sizes) > 0 and max(sizes) < 2.5 * len(ids) / n, sizes
    assert all(grade.in_shard(sid, None) for sid in ids)


def test_shard_is_stable_across_processes():
    code = "from classroom import grade; print([grade.shard_of(s, 7) for s in ('alice', 'bob', 'a_b-c8687a')])"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "123"})
    assert out.stdout.strip() == str([grade.shard_of(s, 7) for s in ("alice", "bob", "a_b-c8687a")])


@pytest.mark.parametrize("value", ["0/2", "3/2", "2", "1/0", "a/b", "1/2/3", "-1/2", ""])
def test_bad_shard_is_refused(tmp_path, value):
    r = subprocess.run([sys.executable, "-m", "classroom.grade", str(tmp_path), "--shard", value,
                        "--out", str(tmp_path / "out"), "--db", f"sqlite:///{tmp_path / 'g.db'}"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r
    assert "--shard" in r.stderr and "K/N" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- two shards, one gradebook
def _write_submissions(dest: Path) -> None:
    by_name = {c.student: c for c in CASES}
    for name in LEARNERS:
        case = by_name[name]
        nb_file = ASSIGNMENTS[case.assignment][0]
        released = json.loads((ROOT / "exercises" / case.assignment / nb_file).read_text())
        solution = json.loads((ROOT / "solutions" / case.assignment / nb_file).read_text())
        path = dest / name / case.assignment / nb_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make_submission(case, released, solution))


def _report_students(out: Path) -> set[str]:
    import csv
    with open(out / "report.csv", encoding="utf-8") as f:
        return {row["student"] for row in csv.DictReader(f)}


@pytest.mark.slow
def test_two_concurrent_shards_equal_one_run(tmp_path, postgres):  # noqa: F811
    assert sorted(grade.shard_of(s, 2) for s in LEARNERS) == [1, 1, 2, 2]
    subs = tmp_path / "submitted"
    _write_submissions(subs)

    # the reference: one unsharded run into SQLite
    sqlite_url = f"sqlite:///{tmp_path / 'one.db'}"
    whole = subprocess.run([sys.executable, "-m", "classroom.grade", str(subs), "--workers", "2",
                            "--out", str(tmp_path / "out-all"), "--db", sqlite_url, "--no-progress"],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    reference = merge.scores(sqlite_url)
    assert len(reference) == len(LEARNERS)

    # two shards at once, as two machines would, into one PostgreSQL gradebook; as root
    # the kernels of each run get their own uids (on separate machines they could share)
    procs = {}
    for k in (1, 2):
        procs[k] = subprocess.Popen(
            [sys.executable, "-m", "classroom.grade", str(subs), "--shard", f"{k}/2", "--workers", "1",
             "--uid-base", str(grade.UID_BASE + 1000 * k), "--out", str(tmp_path / f"out-{k}"),
             "--db", postgres, "--no-progress"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    outputs = {k: p.communicate(timeout=600)[0] for k, p in procs.items()}
    for k, p in procs.items():
        assert p.returncode == 0, outputs[k]
        assert f"Shard {k}/2: 2 learner(s)" in outputs[k], outputs[k]
        assert "2 submissions found" in outputs[k], outputs[k]

    assert merge.scores(postgres) == reference
    import sqlalchemy
    eng = sqlalchemy.create_engine(postgres)
    with eng.connect() as con:
        n_subs = con.execute(sqlalchemy.text("SELECT count(*) FROM submitted_assignment")).scalar()
        n_students = con.execute(sqlalchemy.text("SELECT count(*) FROM student")).scalar()
    eng.dispose()
    assert (n_subs, n_students) == (len(LEARNERS), len(LEARNERS))

    # each shard reports its own learners only, even now that the gradebook holds all four
    again = grade.run(subs, workers=1, db_url=postgres, out=tmp_path / "out-1", progress=False,
                      log=lambda *a: None, shard=(1, 2))
    assert again["graded_now"] == 0
    mine = {s for s in LEARNERS if grade.shard_of(s, 2) == 1}
    assert _report_students(tmp_path / "out-1") == mine
    assert _report_students(tmp_path / "out-2") == set(LEARNERS) - mine
    text = (tmp_path / "out-1" / "report.txt").read_text()
    assert text.startswith("Shard 1/2: 2 learner(s)")
    assert not [s for s in set(LEARNERS) - mine if s in text]  # not even as "not submitted"


# --------------------------------------------------------------------------- deploy/
def test_deploy_files_parse_and_the_job_shards():
    values = yaml.safe_load((ROOT / "deploy" / "z2jh" / "values.yaml").read_text())
    assert values["singleuser"]["image"]["name"]
    docs = [d for d in yaml.safe_load_all((ROOT / "deploy" / "k8s" / "grade-job.yaml").read_text()) if d]
    job = next(d for d in docs if d["kind"] == "Job")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    n = spec["completions"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    command = " ".join(container.get("command", []) + container.get("args", []))
    assert "classroom.grade" in command
    assert f"--shard $((JOB_COMPLETION_INDEX+1))/{n}" in command, command
    assert "$GRADEBOOK_URL" in command
    env = {e["name"]: e for e in container["env"]}
    assert "secretKeyRef" in env["GRADEBOOK_URL"]["valueFrom"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/submissions"].get("readOnly") is True
