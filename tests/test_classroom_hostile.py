"""Hostile learners, graded by the sandboxed parallel grader: nothing is harmed,
honest grades are what they would be anyway, and every attack is reported.

One grading run (module fixture) over three honest learners and eight hostile ones;
then a control run of two of the attacks through plain ``nbgrader autograde``, which
shows they are real: without the sandbox they succeed.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from grading_submissions import CASES, make_submission  # noqa: E402
from hostile.submissions import (ASSIGNMENT, FORK_CAP, GELU, NOTEBOOK, SLOW_CELLS, attacks,  # noqa: E402
                                 notebook_with)

from classroom import grade, sandbox  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

HONEST = {c.student: c for c in CASES if c.student in {"gelu_solution", "gelu_erf", "gelu_untouched"}}
VICTIM = "gelu_solution"
LIMIT_PROCS = 200


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _tree_digest(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(str(p).encode() + p.read_bytes())
    return h.hexdigest()


class Listener:
    """A TCP server on the host's loopback that records every connection."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
                self.connections += 1
                conn.close()
            except OSError:
                continue

    def close(self):
        self.stop = True
        self.thread.join(timeout=2)
        self.sock.close()


def _write(subs: Path, student: str, text: str) -> Path:
    path = subs / student / ASSIGNMENT / NOTEBOOK
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    subs, out, course_db = tmp / "subs", tmp / "out", tmp / "course.db"
    released = json.loads((ROOT / "exercises" / ASSIGNMENT / NOTEBOOK).read_text())
    solution = json.loads((ROOT / "solutions" / ASSIGNMENT / NOTEBOOK).read_text())
    for student, case in HONEST.items():
        _write(subs, student, make_submission(case, released, solution))

    # the course gradebook exists before grading, with the assignments in it
    template_db, _, _ = grade.make_template(out)
    course_db.write_bytes(template_db.read_bytes())

    listener = Listener()
    workers = [out / "workers" / f"w{i}" for i in range(2)]
    victim_files = [subs / VICTIM / ASSIGNMENT / NOTEBOOK,
                    out / "autograded" / VICTIM / ASSIGNMENT / NOTEBOOK,
                    out / "feedback" / VICTIM / ASSIGNMENT / "gelu.html",
                    out / "state" / VICTIM / f"{ASSIGNMENT}.json"]
    victim_files += [w / "autograded" / VICTIM / ASSIGNMENT / NOTEBOOK for w in workers]
    paths = {
        "gradebooks": [str(course_db), str(ROOT / "gradebook.db"), str(template_db)]
                      + [str(w / "gradebook.db") for w in workers],
        "solutions": [str(ROOT / "solutions" / ASSIGNMENT / NOTEBOOK)],
        "victim_files": [str(p) for p in victim_files],
        "victim": VICTIM,
        "port": listener.port,
    }
    for student, source in attacks(paths).items():
        _write(subs, student, notebook_with(released, source))
    _write(subs, SLOW_CELLS[0], notebook_with(released, GELU, SLOW_CELLS[1]))

    protected = {
        "repo solutions": _tree_digest(ROOT / "solutions"),
        "repo gradebook": _digest(ROOT / "gradebook.db"),
        "victim submission": _digest(subs / VICTIM / ASSIGNMENT / NOTEBOOK),
    }
    limits = sandbox.Limits(memory=3 << 30, processes=LIMIT_PROCS, cpu_seconds=120)
    start = time.monotonic()
    summary = grade.run(subs, workers=2, db_url=f"sqlite:///{course_db}", out=out, timeout=5, deadline=45,
                        limits=limits, progress=False, log=lambda *a: None)
    listener.close()
    return {"summary": summary, "out": out, "course_db": course_db, "subs": subs, "listener": listener,
            "protected": protected, "seconds": time.monotonic() - start, "victim_files": victim_files}


def _problems(run, student):
    return run["summary"]["problems"].get((student, ASSIGNMENT), [])


def test_honest_grades_unchanged(hostile_run):
    scores = hostile_run["summary"]["scores"]
    for student, case in HONEST.items():
        assert scores[(student, ASSIGNMENT)] == case.expected_score(), student


def test_every_hostile_submission_is_reported(hostile_run):
    expected = {
        "h_gradebook": "FileNotFoundError",
        "h_solutions": "FileNotFoundError",
        "h_writer": "FileNotFoundError",
        "h_memory": "MemoryError",
        "h_forkbomb": "BlockingIOError",
        "h_network": "ConnectionRefusedError",
        "h_forever": "TIMED OUT",
        "h_stubborn": "TIMED OUT",
        "h_many_cells": "TIMED OUT",
    }
    report = (hostile_run["out"] / "report.txt").read_text()
    for student, needle in expected.items():
        why = " | ".join(_problems(hostile_run, student))
        assert needle in why, (student, why)
        assert f"{student}/{ASSIGNMENT}" in report
    for student in HONEST:
        if student != "gelu_untouched":
            assert not _problems(hostile_run, student), student


def test_gradebooks_not_rewritten(hostile_run):
    out = hostile_run["out"]
    dbs = [hostile_run["course_db"]] + sorted(out.glob("workers/*/gradebook.db")) + [out / "template/gradebook.db"]
    for db in dbs:
        con = sqlite3.connect(db)
        assert con.execute("SELECT count(*) FROM grade WHERE manual_score = 1000").fetchone()[0] == 0, db
        con.close()
    assert _digest(ROOT / "gradebook.db") == hostile_run["protected"]["repo gradebook"]
    # the attacker got the marks of its (correct) gelu and nothing more
    assert hostile_run["summary"]["scores"][("h_gradebook", ASSIGNMENT)] == 10.0


def test_solutions_not_readable(hostile_run):
    assert hostile_run["summary"]["scores"][("h_solutions", ASSIGNMENT)] == 0.0
    assert _tree_digest(ROOT / "solutions") == hostile_run["protected"]["repo solutions"]


def test_other_learner_untouched(hostile_run):
    out, subs = hostile_run["out"], hostile_run["subs"]
    assert _digest(subs / VICTIM / ASSIGNMENT / NOTEBOOK) == hostile_run["protected"]["victim submission"]
    for path in hostile_run["victim_files"]:
        if path.is_file():
            assert "overwritten by another learner" not in path.read_text(errors="replace"), path
    assert (out / "feedback" / VICTIM / ASSIGNMENT / "gelu.html").is_file()


def test_memory_limit_bites(hostile_run):
    assert any("MemoryError" in w for w in _problems(hostile_run, "h_memory"))
    assert hostile_run["summary"]["scores"][("h_memory", ASSIGNMENT)] == 10.0


def test_fork_bomb_bounded(hostile_run):
    nb = json.loads((hostile_run["out"] / "autograded" / "h_forkbomb" / ASSIGNMENT / NOTEBOOK).read_text())
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                   for o in c.get("outputs", []) if o.get("output_type") == "stream")
    started = int(text.split("processes started:")[1].split()[0])
    assert started < LIMIT_PROCS < FORK_CAP
    # nothing of the sandboxes survives them
    uids = {grade.UID_BASE, grade.UID_BASE + 1}
    left = [d for d in os.listdir("/proc") if d.isdigit() and _uid(d) in uids]
    assert not left


def _uid(pid: str):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def test_no_network(hostile_run):
    assert hostile_run["listener"].connections == 0
    assert hostile_run["summary"]["scores"][("h_network", ASSIGNMENT)] == 10.0


def test_endless_code_is_stopped(hostile_run):
    recs = {(r["student"]): r for r in hostile_run["summary"]["records"]}
    assert recs["h_forever"]["status"] == "timed out"
    assert recs["h_stubborn"]["status"] == "timed out"
    # 200 cells of 4 s each: nbgrader's per-cell limit never fires, the deadline does
    assert recs["h_many_cells"]["status"] == "timed out"
    assert "sandbox was killed" in recs["h_many_cells"]["reason"]
    assert recs["h_many_cells"]["seconds"] < 45 + 30


def test_feedback_exists_for_everyone(hostile_run):
    out = hostile_run["out"]
    students = {p.name for p in hostile_run["subs"].iterdir()}
    for s in students:
        assert any((out / "feedback" / s / ASSIGNMENT).glob("*.html")), s


# --------------------------------------------------------------------------- control
def test_attacks_are_real_without_the_sandbox(tmp_path):
    """The same gradebook and solutions attacks through plain nbgrader succeed."""
    from andrea_ref.grading.course import make_course, run_nbgrader, submit

    course = make_course(tmp_path / "course")
    released = json.loads((ROOT / "exercises" / ASSIGNMENT / NOTEBOOK).read_text())
    src = attacks({"gradebooks": [], "solutions": [], "victim_files": [], "victim": "nobody", "port": 9})
    for student in ("h_gradebook", "h_solutions"):
        submit(course, student, ASSIGNMENT, NOTEBOOK, notebook_with(released, src[student]))
    run_nbgrader(course, "autograde", ASSIGNMENT)
    con = sqlite3.connect(course / "gradebook.db")
    rewritten = con.execute("SELECT count(*) FROM grade WHERE manual_score = 1000").fetchone()[0]
    con.close()
    assert rewritten > 0
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        sub = gb.find_submission(ASSIGNMENT, "h_solutions")
        assert sub.score == 10.0
