"""The parallel grader grades exactly like plain nbgrader, resumes after an interrupt,
regrades nothing on a second run, and merges into SQLite and PostgreSQL alike.

One set of 24 submissions (the graders' own test submissions: solutions, untouched
exercises, classic mistakes, damaged notebooks) is graded

1. by plain ``nbgrader autograde`` (the reference: the catalogue as plain nbgrader grades
   it, tests/plain_class.py, once per test run);
2. by ``python -m classroom.grade`` with 2 workers, interrupted with SIGINT part-way
   and started again (it must finish only what was missing);
and the two gradebooks must agree cell by cell.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pg_server  # noqa: E402
from grading_submissions import ASSIGNMENTS, CASES, make_submission  # noqa: E402

from classroom import orchestration  # noqa: E402
from classroom.isolation import uids  # noqa: E402
from classroom.orchestration import state  # noqa: E402
from classroom.reporting import merge  # noqa: E402
from classroom.reporting.notebook import BEGIN, PLACEHOLDER  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

PICK = {
    "02_layernorm": ["ln_solution", "ln_untouched", "ln_unbiased", "ln_eps_outside", "ln_library_alias",
                     "ln_deleted_test_cell"],
    "03_gelu": ["gelu_solution", "gelu_untouched", "gelu_erf", "gelu_custom_eq", "gelu_warns",
                "gelu_edited_test_cell"],
    "04_mlp": ["mlp_solution", "mlp_untouched", "mlp_transposed", "mlp_alt_einsum", "mlp_patched_allclose",
               "mlp_invalid_json"],
    "01_block": ["block_solution", "block_untouched", "block_post_norm", "block_no_residual",
                 "block_alt_in_place", "block_kernel_dies"],
}


def _cases():
    by_name = {c.student: c for c in CASES}
    return [by_name[name] for names in PICK.values() for name in names if name in by_name]


def _write_submissions(dest: Path) -> list:
    cases = _cases()
    for case in cases:
        nb_file = ASSIGNMENTS[case.assignment][0]
        released = json.loads((ROOT / "exercises" / case.assignment / nb_file).read_text())
        solution = json.loads((ROOT / "solutions" / case.assignment / nb_file).read_text())
        path = dest / case.student / case.assignment / nb_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make_submission(case, released, solution))
    return cases


def _normalise(scores: dict) -> dict:
    """{(student, assignment): {grade cell: score}} whatever the source."""
    return {k: {cell.split("/")[-1]: s for cell, s in v.items()} for k, v in scores.items()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, plain_class):
    tmp = tmp_path_factory.mktemp("parallel")
    subs = tmp / "subs" / "submitted"
    cases = _write_submissions(subs)
    assert len(cases) >= 20

    # 1. the reference: plain nbgrader's scores of these submissions (conftest's plain_class,
    # the whole catalogue graded by plain `nbgrader autograde`, once per test run)
    keys = {(c.student, c.assignment) for c in cases}
    reference = {k: v for course in plain_class.values() for k, v in _normalise(course["scores"]).items()
                 if k in keys}

    # 2. the parallel grader, interrupted part-way with SIGINT ...
    out, db = tmp / "out", tmp / "course.db"
    cmd = [sys.executable, "-m", "classroom.grade", str(subs.parent), "--workers", "2", "--out", str(out),
           "--db", f"sqlite:///{db}", "--no-progress"]
    # Ctrl-C at a terminal: SIGINT as a foreground process gets it (a run of the tests started in
    # the background, `make test &`, would hand the grader SIGINT ignored, and Python keeps it so)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and len(list(out.glob("state/*/*.json"))) < 4:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    interrupted_output, _ = proc.communicate(timeout=120)
    done_before = len(list(out.glob("state/*/*.json")))

    # ... and started again
    t0 = time.monotonic()
    resumed = orchestration.run(subs.parent, workers=2, db_url=f"sqlite:///{db}", out=out, progress=False,
                        log=lambda *a: None)
    resumed_s = time.monotonic() - t0
    # 3. a second run over the same files
    again = orchestration.run(subs.parent, workers=2, db_url=f"sqlite:///{db}", out=out, progress=False,
                      log=lambda *a: None)
    return {"cases": cases, "reference": reference, "out": out, "db": db, "subs": subs,
            "interrupted_rc": proc.returncode, "interrupted_output": interrupted_output,
            "done_before": done_before, "resumed": resumed, "again": again,
            "resumed_s": resumed_s}


def test_interrupt_then_resume(graded):
    n = len(graded["cases"])
    assert graded["interrupted_rc"] == 130, graded["interrupted_output"]
    assert "run the same command again" in graded["interrupted_output"]
    assert 4 <= graded["done_before"] < n
    # the rerun graded only what the interrupted run had not finished
    assert graded["resumed"]["graded_now"] == n - graded["done_before"]
    assert len(graded["resumed"]["records"]) == n


def _sandbox_processes(out: Path) -> list[str]:
    """Processes still running learner code of this run (by uid or by path)."""
    left = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            uid = os.stat(f"/proc/{d}").st_uid
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ours = range(uids.UID_BASE, uids.UID_BASE + 8), range(uids.UID_BASE + uids.ANSWER_UID_OFFSET,
                                                                  uids.UID_BASE + uids.ANSWER_UID_OFFSET + 8)
        if (os.geteuid() == 0 and any(uid in r for r in ours)) or str(out) in cmd:
            left.append(f"{d}: {cmd[:120]}")
    return left


def test_interrupt_leaves_no_sandbox_behind(graded):
    assert _sandbox_processes(graded["out"]) == []


def test_killed_run_takes_its_sandboxes_with_it(tmp_path):
    """SIGKILL of the grading command (no chance to clean up): workers, bwrap and the
    kernels inside all die with it."""
    from hostile.submissions import GELU, notebook_with

    subs = tmp_path / "subs"
    released = json.loads((ROOT / "exercises" / "03_gelu" / "gelu.ipynb").read_text())
    for k in range(2):  # kernels that would live for a minute
        path = subs / f"learner{k}" / "03_gelu" / "gelu.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(notebook_with(released, GELU + "import time\ntime.sleep(60)\n"))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "classroom.grade", str(subs), "--workers", "2", "--out", str(out),
                             "--db", f"sqlite:///{tmp_path / 'db.db'}", "--no-progress"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    # a kernel runs once its launcher does (bubblewrap per kernel, or forked by a zygote)
    while time.monotonic() < deadline and not any("sandbox.py launch" in p for p in _sandbox_processes(out)):
        time.sleep(0.1)
    assert any("sandbox.py launch" in p for p in _sandbox_processes(out)), "no kernel started"
    time.sleep(2)
    proc.kill()
    proc.wait()
    time.sleep(5)
    assert _sandbox_processes(out) == []


def _record(out, student, assignment):
    """What the grader recorded about one submission (to tell why a score differs)."""
    f = state.state_path(out, student, assignment)
    if not f.is_file():
        return None
    rec = json.loads(f.read_text())
    return {k: rec.get(k) for k in ("status", "reason", "worker", "errors", "limits", "checks", "timing")}


def test_parallel_equals_sequential_nbgrader(graded):
    parallel = _normalise(merge.scores(f"sqlite:///{graded['db']}"))
    differ = {k for k in parallel.keys() | graded["reference"].keys()
              if parallel.get(k) != graded["reference"].get(k)}
    assert not differ, {k: (parallel.get(k), graded["reference"].get(k), _record(graded["out"], *k)) for k in differ}
    # and both are what the graders' own tests expect of these submissions
    for case in graded["cases"]:
        if case.damage in (None, "edit_test_cell", "delete_test_cell"):
            got = sum(v or 0 for v in parallel[(case.student, case.assignment)].values())
            assert got == case.expected_score(), case.student


def test_second_run_grades_nothing(graded):
    again = graded["again"]
    assert again["graded_now"] == 0
    assert again["scores"] == graded["resumed"]["scores"]
    con = sqlite3.connect(graded["db"])
    n_subs = con.execute("SELECT count(*) FROM submitted_assignment").fetchone()[0]
    n_students = con.execute("SELECT count(*) FROM student").fetchone()[0]
    con.close()
    assert n_subs == len(graded["cases"])
    assert n_students == len({c.student for c in graded["cases"]})


def test_failures_are_reported_not_silent(graded):
    problems = graded["again"]["problems"]
    assert any(w.startswith("FAILED") for w in problems[("mlp_invalid_json", "04_mlp")])
    assert any(w.startswith("FAILED") for w in problems[("block_kernel_dies", "01_block")])
    csv_text = (graded["out"] / "grades.csv").read_text()
    assert csv_text.splitlines()[0].startswith("assignment,duedate,timestamp,student_id")
    # nbgrader's export: one row per student and assignment of the course (a missing one scores 0)
    rows = csv_text.strip().splitlines()[1:]
    assert len(rows) == len({c.student for c in graded["cases"]}) * len(ASSIGNMENTS)
    assert "04_mlp,,,mlp_solution,,,,10.0,0.0,10.0,10.0" in rows
    report = (graded["out"] / "report.txt").read_text()
    assert "mlp_invalid_json/04_mlp" in report and "block_kernel_dies/01_block" in report


def _hidden_lines() -> set[str]:
    lines = set()
    for path in (ROOT / "solutions").rglob("*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            inside = False
            for line in "".join(cell["source"]).splitlines():
                s = line.strip()
                if s.startswith("### BEGIN HIDDEN TESTS"):
                    inside = True
                elif s.startswith("### END HIDDEN TESTS"):
                    inside = False
                elif inside and len(s) > 3:
                    lines.add(s)
    return lines


def test_feedback_hides_hidden_tests_keeps_messages(graded):
    import html as html_mod

    hidden = _hidden_lines()
    assert hidden
    pages = sorted((graded["out"] / "feedback").rglob("*.html"))
    assert len(pages) >= len(graded["cases"])
    for page in pages:
        text = html_mod.unescape(page.read_text())
        assert BEGIN not in text, page
        for line in hidden:
            assert line not in text, (page, line)
    # a failed hidden check still tells the learner what went wrong
    for case in graded["cases"]:
        if case.feedback and case.damage is None:
            nb_file = ASSIGNMENTS[case.assignment][0]
            page = graded["out"] / "feedback" / case.student / case.assignment / nb_file.replace(".ipynb", ".html")
            text = html_mod.unescape(page.read_text())
            assert case.feedback in text, case.student
            assert PLACEHOLDER in text


# --------------------------------------------------------------------------- PostgreSQL
@pytest.fixture(scope="module")
def postgres():
    with pg_server.server() as server:
        yield server.socket_url


def test_postgresql_gradebook(graded, postgres):
    # the grading command merges every graded submission into PostgreSQL ...
    first = orchestration.run(graded["subs"].parent, workers=2, db_url=postgres, out=graded["out"], progress=False,
                      log=lambda *a: None)
    assert first["graded_now"] == 0
    assert first["merged"] == len(graded["cases"])  # the results it holds, written, not graded again
    # ... and a second run writes nothing again and duplicates nothing
    second = orchestration.run(graded["subs"].parent, workers=2, db_url=postgres, out=graded["out"], progress=False,
                       log=lambda *a: None)
    assert (second["merged"], second["graded_now"]) == (0, 0)
    pg = _normalise(merge.scores(postgres))
    assert pg == graded["reference"]
    import sqlalchemy
    eng = sqlalchemy.create_engine(postgres)
    with eng.connect() as con:
        n = con.execute(sqlalchemy.text("SELECT count(*) FROM submitted_assignment")).scalar()
    eng.dispose()
    assert n == len(graded["cases"])
