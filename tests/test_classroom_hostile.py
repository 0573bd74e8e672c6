"""Hostile learners, graded by the sandboxed parallel grader: nothing is harmed,
honest grades are what they would be anyway, no forged point is given, and every
attack is reported.

One grading run (module fixture) over a zip holding honest learners and hostile ones
of every class: attacks on the machine (gradebook, solutions, other learners, memory,
processes, network, time), forged verdicts (rebound checks, a swapped module, an
input transformer, a module handed in beside the notebook), channels to later
learners (keyring, the kernel's raw output), output and memory floods, forged report
lines, hidden-test exfiltration, markup in feedback, and odd intake (ids equal after
cleaning, a file named for another learner, a bad zip entry). Then control runs of
attacks through plain ``nbgrader autograde``, which show they are real: without the
sandbox and the independent check they succeed.
"""
from __future__ import annotations

import csv
import hashlib
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from grading_submissions import CASES, make_submission  # noqa: E402
from hostile import submissions as H  # noqa: E402
from hostile.submissions import (ASSIGNMENT, FORK_CAP, GELU, NOTEBOOK, SLOW_CELLS, attacks,  # noqa: E402
                                 notebook_with)

from classroom import orchestration  # noqa: E402
from classroom.course import template  # noqa: E402
from classroom.isolation import uids as uid_range  # noqa: E402
from classroom.isolation import bwrap as sandbox  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

HONEST = {c.student: c for c in CASES if c.student in {"gelu_solution", "gelu_erf", "gelu_untouched"}}
# honest learners graded after the attackers (ids sort last), so a channel an attacker
# left open on a worker would reach them
LATE = {"zz_honest1": "gelu_solution", "zz_honest2": "gelu_erf", "zz_honest3": "gelu_solution"}
CASE = {c.student: c for c in CASES}
VICTIM = "gelu_solution"
NOT_SUBMITTED = "zz_absent"  # on the roster, handed nothing in
LIMIT_PROCS = 200
MEMORY = 3 << 30
MEMFD_CAP = 3 << 29  # 1.5 GiB: room for PyTorch, far below what the memfd attack asks for


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


def _write(subs: Path, student: str, text: str, name: str = NOTEBOOK) -> Path:
    path = subs / student / ASSIGNMENT / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _zip(folder: Path, dest: Path) -> Path:
    """The class as one zip, with a few entries no class should contain."""
    import zipfile
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_STORED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, str(p.relative_to(folder)))
        # an entry whose data does not match its CRC, and a file/folder clash
        zf.writestr("h_badcrc/03_gelu/gelu.ipynb", "{ CORRUPTED-LATER }")
        zf.writestr("h_clash/03_gelu", "a file where a folder must be")
        zf.writestr("h_clash/03_gelu/gelu.ipynb", "{}")
    data = bytearray(dest.read_bytes())
    at = data.find(b"{ CORRUPTED-LATER }")
    data[at:at + 3] = b"XXX"
    dest.write_bytes(bytes(data))
    return dest


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    subs, out, course_db = tmp / "subs", tmp / "out", tmp / "course.db"
    released = json.loads((ROOT / "exercises" / ASSIGNMENT / NOTEBOOK).read_text())
    solution = json.loads((ROOT / "solutions" / ASSIGNMENT / NOTEBOOK).read_text())
    for student, case in HONEST.items():
        _write(subs, student, make_submission(case, released, solution))

    # the course gradebook exists before grading, with the assignments in it
    template_db, _, _ = template.make_template(out)
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
    for student, source in H.FORGERIES.items():
        _write(subs, student, notebook_with(released, source))
    untouched = json.dumps(released, indent=1)
    _write(subs, "f_shadow", untouched)
    (subs / "f_shadow" / ASSIGNMENT / "torch.py").write_text(H.SHADOW_TORCH)
    (subs / "f_shadow" / ASSIGNMENT / "andrea_ref").mkdir()
    (subs / "f_shadow" / ASSIGNMENT / "andrea_ref" / "__init__.py").write_text("grading = None\n")
    _write(subs, "k_keyring_a", notebook_with(released, H.KEYRING))
    _write(subs, "k_keyring_b", notebook_with(released, H.KEYRING))
    _write(subs, "o_raw_flood", notebook_with(released, H.RAW_FLOOD))
    _write(subs, "o_output_flood", notebook_with(released, H.OUTPUT_FLOOD))
    _write(subs, "o_one_huge", notebook_with(released, H.OUTPUT_ONE_HUGE))
    _write(subs, "r_forged_line", notebook_with(released, GELU, [H.REPORT_FORGERY]))
    answer, tail = H.exfiltration_cells()
    _write(subs, "r_exfiltrate", H.append_cells(notebook_with(released, answer), tail))
    _write(subs, "r_markup", H.with_markdown(notebook_with(released, H.MARKUP), H.MARKDOWN_SCRIPT))
    for student, case in LATE.items():
        _write(subs, student, make_submission(CASE[case], released, solution))
    # two honest learners whose ids are equal after cleaning, and a file handed in by
    # mallory under zz_honest2's name (mallory's own answer is a correct one)
    _write(subs, "a b", make_submission(CASE["gelu_solution"], released, solution))
    _write(subs, "a_b", make_submission(CASE["gelu_erf"], released, solution))
    (subs / "mallory").mkdir()
    (subs / "mallory" / "zz_honest2_gelu.ipynb").write_text(make_submission(CASE["gelu_solution"], released, solution))
    class_zip = _zip(subs, tmp / "class.zip")

    protected = {
        "repo solutions": _tree_digest(ROOT / "solutions"),
        "repo gradebook": _digest(ROOT / "gradebook.db"),
        "victim submission": _digest(subs / VICTIM / ASSIGNMENT / NOTEBOOK),
    }
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course_db}") as gb:
        gb.add_student(NOT_SUBMITTED)
    limits = sandbox.Limits(memory=MEMORY, processes=LIMIT_PROCS, cpu_seconds=120)
    start = time.monotonic()
    logged = []
    summary = orchestration.run(class_zip, workers=2, db_url=f"sqlite:///{course_db}", out=out, timeout=5, deadline=45,
                        limits=limits, progress=False, log=logged.append)
    listener.close()
    return {"summary": summary, "out": out, "course_db": course_db, "subs": subs, "listener": listener,
            "protected": protected, "seconds": time.monotonic() - start, "victim_files": victim_files,
            "log": "\n".join(map(str, logged))}


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
        "h_network": ("ConnectionRefusedError", "Network is unreachable"),
        "h_forever": "TIMED OUT",
        "h_stubborn": "TIMED OUT",
        "h_many_cells": "TIMED OUT",
    }
    report = (hostile_run["out"] / "report.txt").read_text()
    for student, needle in expected.items():
        why = " | ".join(_problems(hostile_run, student))
        needles = needle if isinstance(needle, tuple) else (needle,)  # a kernel without any network device
        assert any(n in why for n in needles), (student, why)
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
    uids = {uid_range.UID_BASE, uid_range.UID_BASE + 1}
    left = [d for d in os.listdir("/proc") if d.isdigit() and _uid(d) in uids]
    assert not left


def _uid(pid: str):
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _earned_or_held(run, student) -> bool:
    """The answer's GELU is right: it earns its 10 points, or, where its code also reached
    for what no answer needs (a socket, ctypes, raw file descriptors), it is held for
    review with those points withheld until the instructor accepts it."""
    score = run["summary"]["scores"][(student, ASSIGNMENT)]
    return score == 10.0 or (score == 0.0 and "held for review" in _row(run, student)["all_statuses"].split("; "))


def test_no_network(hostile_run):
    assert hostile_run["listener"].connections == 0
    assert _earned_or_held(hostile_run, "h_network")


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
    for rec in hostile_run["summary"]["records"]:
        assert any((out / "feedback" / rec["student"] / ASSIGNMENT).glob("*.html")), rec["student"]


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



# --------------------------------------------------------------------------- forged verdicts
def _record(run, student):
    return {r["student"]: r for r in run["summary"]["records"]}[student]


def _row(run, student):
    rows = [r for r in run["summary"]["rows"] if r["student"] == student and r["assignment"] == ASSIGNMENT]
    assert len(rows) == 1, (student, rows)
    return rows[0]


@pytest.mark.parametrize("student", sorted(H.FORGERIES))
def test_forged_verdicts_get_no_points(hostile_run, student):
    rec = _record(hostile_run, student)
    # the notebook's own graded cells all passed ...
    assert sum(rec["kernel_notebooks"]["gelu"].values()) == 10.0, rec["kernel_notebooks"]
    # ... the points are the independent check's: the answer does nothing
    assert hostile_run["summary"]["scores"][(student, ASSIGNMENT)] == 0.0
    row = _row(hostile_run, student)
    assert row["status"] == "tampering suspected"
    assert "possible tampering" in row["problems"]
    with sqlite3.connect(hostile_run["course_db"]) as con:
        total = con.execute("SELECT sum(coalesce(g.manual_score, g.auto_score)) FROM grade g "
                            "JOIN submitted_notebook n ON g.notebook_id = n.id "
                            "JOIN submitted_assignment a ON n.assignment_id = a.id "
                            "WHERE a.student_id = ?", (student,)).fetchone()[0]
    assert total == 0.0


def test_files_beside_the_notebook_never_reach_the_kernel(hostile_run):
    rec = _record(hostile_run, "f_shadow")
    assert set(rec["refused"]) == {"torch.py", "andrea_ref/__init__.py"}
    assert hostile_run["summary"]["scores"][("f_shadow", ASSIGNMENT)] == 0.0
    assert sum(rec["kernel_notebooks"]["gelu"].values()) == 0.0  # the shadow never ran
    row = _row(hostile_run, "f_shadow")
    assert "files refused" in row["all_statuses"] and "untouched" in row["all_statuses"]
    assert "torch.py" in row["problems"]
    assert not (hostile_run["out"] / "autograded" / "f_shadow" / ASSIGNMENT / "torch.py").exists()


# --------------------------------------------------------------------------- channels
def _outputs(run, student) -> str:
    nb = json.loads((run["out"] / "autograded" / student / ASSIGNMENT / NOTEBOOK).read_text())
    return "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                   for o in c.get("outputs", []) if o.get("output_type") == "stream")


def test_no_keyring_channel_between_learners(hostile_run):
    for student in ("k_keyring_a", "k_keyring_b"):
        text = _outputs(hostile_run, student)
        assert "add_key: Operation not permitted" in text, text[-500:]
        assert H.KEY_PAYLOAD not in text.split("add_key")[-1].split("found:")[-1]
        assert _earned_or_held(hostile_run, student)


def test_raw_output_flood_harms_no_later_learner(hostile_run):
    # 2 x 300 MiB written to the kernel's own stdout/stderr: drained and dropped
    assert _earned_or_held(hostile_run, "o_raw_flood")
    for student, case in LATE.items():
        assert hostile_run["summary"]["scores"][(student, ASSIGNMENT)] == CASE[case].expected_score(), student
    big = [p for p in hostile_run["out"].rglob("*") if p.is_file() and p.stat().st_size > 16 << 20]
    assert not big, big


def test_output_floods_are_capped_and_reported(hostile_run):
    out = hostile_run["out"]
    for student in ("o_output_flood", "o_one_huge"):
        nb = out / "autograded" / student / ASSIGNMENT / NOTEBOOK
        if nb.exists():
            assert nb.stat().st_size < 4 << 20, nb.stat().st_size
        for html in (out / "feedback" / student / ASSIGNMENT).glob("*.html"):
            assert html.stat().st_size < 6 << 20
        row = _row(hostile_run, student)
        assert "limit hit: output" in row["all_statuses"] or row["status"] == "failed", row
    assert hostile_run["summary"]["scores"][("o_output_flood", ASSIGNMENT)] == 10.0


@pytest.fixture(scope="module")
def memfd_run(tmp_path_factory):
    """Memory held outside the address space, graded on its own under a small cap and a
    long cell time limit, so the cap (not the clock) is what stops it however slowly
    this machine hands out memory; an honest learner follows on the same worker."""
    tmp = tmp_path_factory.mktemp("memfd")
    subs, out = tmp / "subs", tmp / "out"
    released = json.loads((ROOT / "exercises" / ASSIGNMENT / NOTEBOOK).read_text())
    solution = json.loads((ROOT / "solutions" / ASSIGNMENT / NOTEBOOK).read_text())
    _write(subs, "o_memfd", notebook_with(released, H.MEMFD))
    _write(subs, "zz_honest1", make_submission(CASE["gelu_solution"], released, solution))
    limits = sandbox.Limits(memory=MEMFD_CAP, processes=LIMIT_PROCS, cpu_seconds=300)
    summary = orchestration.run(subs, workers=1, db_url=f"sqlite:///{tmp / 'course.db'}", out=out, timeout=120,
                        deadline=240, limits=limits, progress=False, log=lambda *_: None)
    return {"summary": summary, "out": out}


def test_memory_outside_the_address_space_is_capped(memfd_run):
    assert H.MEMFD_GIB << 30 > 2 * MEMFD_CAP  # the payload asks for far more than the cap
    text = _outputs(memfd_run, "o_memfd") if (memfd_run["out"] / "autograded" / "o_memfd").exists() else ""
    assert f"held {H.MEMFD_GIB * 4 * 240} MiB" not in text
    row = _row(memfd_run, "o_memfd")
    assert "limit hit: memory" in row["all_statuses"], row
    assert "timed out" not in row["all_statuses"], row
    assert memfd_run["summary"]["scores"][("zz_honest1", ASSIGNMENT)] == CASE["gelu_solution"].expected_score()


# --------------------------------------------------------------------------- reports and feedback
def test_learner_text_cannot_forge_report_lines(hostile_run):
    out = hostile_run["out"]
    text = (out / "report.txt").read_text()
    assert "\x1b" not in text and "\u202e" not in text
    assert not any(line.startswith(H.FORGED_LINE) for line in text.splitlines())
    assert "r_forged_line" in text and "\\x1b[2K" in text  # reported, escaped
    with open(out / "report.csv", newline="") as f:
        for row in csv.DictReader(f):
            for value in row.values():
                assert "\n" not in value and "\x1b" not in value
                assert value[:1] not in ("=", "+", "@"), value
    assert "\x1b" not in hostile_run["log"]


def _hidden_forms() -> list[str]:
    import base64
    import codecs
    nb = json.loads((ROOT / "solutions" / ASSIGNMENT / NOTEBOOK).read_text())
    hidden = [line.strip() for cell in nb["cells"] for line in "".join(cell["source"]).splitlines()
              if H.HIDDEN_MARK in line]
    forms = [H.HIDDEN_MARK, H.HIDDEN_MARK.encode().hex(), codecs.encode("seed=" + H.HIDDEN_MARK, "rot13")]
    for line in hidden:
        forms.append(line)
        for shift in range(3):  # base64 of the line at any alignment in a longer text
            forms.append(base64.b64encode(("x" * shift + line).encode()).decode()[4:-4])
    return forms


def test_hidden_tests_never_reach_feedback(hostile_run):
    pages = list((hostile_run["out"] / "feedback").rglob("*.html"))
    assert pages
    forms = _hidden_forms()
    for page in pages:
        text = page.read_text(errors="replace")
        for form in forms:
            assert form not in text, (page, form)
    # the exfiltration really tried: the notebook the instructor keeps shows it
    kept = (hostile_run["out"] / "autograded" / "r_exfiltrate" / ASSIGNMENT / NOTEBOOK).read_text()
    assert any(form in kept for form in forms[3:])


def test_learner_markup_is_inert_in_feedback(hostile_run):
    from html.parser import HTMLParser

    class Scripts(HTMLParser):
        def __init__(self):
            super().__init__()
            self.inside, self.bad = None, []

        def handle_starttag(self, tag, attrs):
            self.inside = tag
            for name, value in attrs:
                if name.startswith("on") or "javascript:" in (value or ""):
                    self.bad.append((tag, name, value))

        def handle_data(self, data):
            if self.inside == "script" and "pwned" in data:
                self.bad.append(("script", data[:80]))

    page = next((hostile_run["out"] / "feedback" / "r_markup" / ASSIGNMENT).glob("*.html"))
    parser = Scripts()
    parser.feed(page.read_text())
    assert not parser.bad
    assert hostile_run["summary"]["scores"][("r_markup", ASSIGNMENT)] == 10.0


def test_feedback_shows_the_independent_verdicts(hostile_run):
    page = next((hostile_run["out"] / "feedback" / "f_rebind" / ASSIGNMENT).glob("*.html")).read_text()
    assert "\u2713 looks fine" not in page  # what the forged checks printed in the kernel
    assert "not written yet" in page  # what the independent check found


# --------------------------------------------------------------------------- intake and silence
def test_every_learner_and_notebook_has_a_status(hostile_run):
    rows = hostile_run["summary"]["rows"]
    assert {r["status"] for r in rows} <= {"not submitted", "failed", "timed out", "tampering suspected",
                                           "held for review", "files refused", "untouched", "graded"} | {
        r["status"] for r in rows if r["status"].startswith("limit hit:")}
    absent = [r for r in rows if r["student"] == NOT_SUBMITTED]
    assert absent and all(r["status"] == "not submitted" for r in absent)
    assert _row(hostile_run, "gelu_untouched")["status"] == "untouched"
    assert _row(hostile_run, "gelu_solution")["status"] == "graded"
    report = (hostile_run["out"] / "report.txt").read_text()
    for student in (NOT_SUBMITTED, "gelu_untouched", *H.FORGERIES):
        assert student in report


def test_odd_intake_is_skipped_and_the_class_graded(hostile_run):
    scores = hostile_run["summary"]["scores"]
    # ids equal after cleaning: both graded, each with their own answer
    ab = {k[0]: v for k, v in scores.items() if k[0].startswith("a_b")}
    assert sorted(ab.values()) == [4.0, 10.0] and len(ab) == 2
    report = (hostile_run["out"] / "report.txt").read_text()
    assert "'a b'" in report and "'a_b'" in report
    # a file under another learner's name takes nobody's place
    assert scores[("zz_honest2", ASSIGNMENT)] == 4.0
    assert "mallory" in report
    # bad zip entries are skipped and listed
    assert not any(k[0] in ("h_badcrc", "h_clash") for k in scores)
    assert "h_badcrc" in report and "h_clash" in report



def test_forgery_works_without_the_independent_check(tmp_path):
    """The forgeries and the shadowing module get full marks from plain nbgrader: the
    tests above can fail."""
    from andrea_ref.grading.course import make_course, run_nbgrader, submit

    course = make_course(tmp_path / "course", assignments=(ASSIGNMENT,))
    released = json.loads((ROOT / "exercises" / ASSIGNMENT / NOTEBOOK).read_text())
    for student, source in H.FORGERIES.items():
        submit(course, student, ASSIGNMENT, NOTEBOOK, notebook_with(released, source))
    path = submit(course, "f_shadow", ASSIGNMENT, NOTEBOOK, json.dumps(released))
    (path.parent / "torch.py").write_text(H.SHADOW_TORCH)
    run_nbgrader(course, "autograde", ASSIGNMENT)
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in (*H.FORGERIES, "f_shadow"):
            assert gb.find_submission(ASSIGNMENT, student).score == 10.0, student


def _memory_cap(pid: int) -> int | None:
    """The memory limit of the cgroup process ``pid`` is in (v1 or v2), if any."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        hid, controllers, path = line.split(":", 2)
        for base, name in ((f"/sys/fs/cgroup/memory{path}", "memory.limit_in_bytes"),
                           (f"/sys/fs/cgroup{path}", "memory.max")):
            if ("memory" in controllers.split(",") or (hid == "0" and name == "memory.max")) \
                    and Path(base, name).is_file():
                text = Path(base, name).read_text().strip()
                return None if text == "max" else int(text)
    return None


def test_workers_kernels_and_answer_servers_are_capped(tmp_path):
    """While a class is graded, every grading worker, kernel and answer server sits in a
    cgroup whose memory cap is the one the command states."""
    from classroom.isolation import cgroups
    try:
        cgroups.open_tree().close()
    except cgroups.CgroupUnavailable as exc:
        pytest.skip(f"no cgroup here: {exc}")
    released = json.loads((ROOT / "exercises" / ASSIGNMENT / NOTEBOOK).read_text())
    subs = tmp_path / "subs"
    for k in range(2):
        _write(subs, f"slow{k}", notebook_with(released, GELU + "import time\ntime.sleep(20)\n"))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "classroom.grade", str(subs), "--workers", "2", "--out", str(out),
                             "--db", f"sqlite:///{tmp_path / 'db.db'}", "--no-progress", "--memory", "2G",
                             "--grader-memory", "1G"], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        seen = {"worker": set(), "kernel": set(), "answer": set()}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(seen.values()):
            for d in os.listdir("/proc"):
                if not d.isdigit():
                    continue
                try:
                    uid = os.stat(f"/proc/{d}").st_uid
                    ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
                    cap = _memory_cap(int(d))
                except (OSError, ValueError):
                    continue
                if ppid == proc.pid:
                    # the workers, not the grader's own helpers (gradebook migrations, resource tracker)
                    if b"spawn_main" in Path(f"/proc/{d}/cmdline").read_bytes():
                        seen["worker"].add(cap)
                elif uid in (uid_range.UID_BASE, uid_range.UID_BASE + 1):
                    seen["kernel"].add(cap)
                elif uid in (uid_range.UID_BASE + uid_range.ANSWER_UID_OFFSET, uid_range.UID_BASE + uid_range.ANSWER_UID_OFFSET + 1):
                    seen["answer"].add(cap)
            time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait()
    assert seen["worker"] == {1 << 30}, seen
    assert seen["kernel"] == {2 << 30}, seen
    assert seen["answer"] == {2 << 30}, seen
