"""The independent check's parts on their own: the plan read from the notebooks, the
cells an answer server runs, the wire format's refusal of anything odd, the probe
scan, escaping of learner text, the resume fingerprint, and one notebook checked end
to end through a real sandboxed answer server (zygote and one-sandbox-per-notebook)."""
from __future__ import annotations

import copy
import json
import os
import shutil
import socket
from pathlib import Path

import pytest
import torch

from grading_submissions import ASSIGNMENTS, CASES, make_submission  # noqa: E402
from andrea_ref.grading.manifest import load  # noqa: E402

from classroom import textsafe  # noqa: E402
from classroom.course import snapshot  # noqa: E402
from classroom.isolation import answers, uids, wire  # noqa: E402
from classroom.isolation import bwrap as sandbox  # noqa: E402
from classroom.orchestration import options  # noqa: E402
from classroom.reporting import findings  # noqa: E402
from classroom.scoring import plan, remote, review, verdicts  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _nbs(assignment):
    nb_file = ASSIGNMENTS[assignment][0]
    return (json.loads((ROOT / "solutions" / assignment / nb_file).read_text()),
            json.loads((ROOT / "exercises" / assignment / nb_file).read_text()))


@pytest.fixture(scope="module")
def plans():
    return {a: plan.build_plan(*_nbs(a), where=a) for a in ASSIGNMENTS}


# ----------------------------------------------------------------------------- plan
def test_plan_holds_every_graded_call_with_hidden_seeds(plans):
    for a, (_, _, _, cells) in ASSIGNMENTS.items():
        plan = plans[a]
        assert plan["functions"] == [name for name, _args in load()[a].functions()]
        assert {g["grade_id"]: g["points"] for g in plan["graded"]} == cells
        for g in plan["graded"]:
            seeds = [kw.get("seed") for _, kw in g["calls"]]
            assert None in seeds and 20261130 in seeds, g  # the visible and the hidden call


def test_each_graded_cell_names_its_function_and_the_rule_its_checks_enforce(plans):
    """The capstone checks three functions, each under its own rule; a one-function
    notebook's cells all check that function under its module's rule."""
    from andrea_ref.grading import capstone, gelu
    by_id = {g["grade_id"]: g for g in plans["05_capstone"]["graded"]}
    assert plans["05_capstone"]["functions"] == ["andrea_tiny", "train", "sample_next"]
    for gid, fn, rule in (("tiny_values", "andrea_tiny", capstone.FORBIDDEN),
                          ("train_learns", "train", capstone.FORBIDDEN_TRAIN),
                          ("sample_seed", "sample_next", capstone.FORBIDDEN_SAMPLE)):
        assert by_id[gid]["function"] == fn and by_id[gid]["shortcut"]
        assert by_id[gid]["forbidden"]["what"] == rule.what
        assert by_id[gid]["forbidden"]["ref_files"] == rule.relative_ref_files()
    assert {g["forbidden"]["what"] for g in plans["03_gelu"]["graded"]} == {gelu.FORBIDDEN.what}


def test_only_the_cells_the_kernel_leaves_to_the_grader_go_uncompared(plans):
    """A cell whose checks are all marked left_to_grader (the capstone's 150 training
    steps) has no verdict in the grader's kernel: its kernel score is not compared with
    the independent one, so it can neither accuse nor clear anyone; every other cell is."""
    uncompared = {(a, g["grade_id"]) for a, p in plans.items() for g in p["graded"] if not g["kernel_compared"]}
    assert uncompared == {("05_capstone", "train_learns")}


def test_plan_refuses_a_graded_cell_doing_anything_else():
    sol, rel = _nbs("03_gelu")
    bad = copy.deepcopy(sol)
    for cell in bad["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "gelu_values":
            cell["source"] = "import os\ngrading.check_gelu_values(gelu)\n"
    with pytest.raises(ValueError, match="may only call grading.check_"):
        plan.build_plan(bad, rel)


def test_answer_cells_use_the_release_setup_and_skip_graded_and_unchanged_cells(plans):
    sol, rel = _nbs("03_gelu")
    nb = copy.deepcopy(rel)
    for cell in nb["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if gid == "setup":
            cell["source"] = "print('tampered set-up')\n"
        elif gid == "gelu":
            cell["source"] = "def gelu(x):\n    return x\n"
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "source": "after_graded = 1"})
    runs = plan.answer_runs(plans["03_gelu"], nb)
    assert [gid for gid, _ in runs] == [g["grade_id"] for g in plans["03_gelu"]["graded"]]
    cells = [src for _, run in runs for _, src in run]
    # the set-up that runs first is the release's (plan["setup"]), never the submitted one
    assert "tampered" not in "".join(cells) + "".join(plans["03_gelu"]["setup"])
    assert "def gelu(x):\n    return x\n" in cells
    assert not any("grading.check" in c or "grading.report" in c for c in cells)
    assert "after_graded = 1" not in cells
    assert plan.locked_changes(plans["03_gelu"], nb) == [
        "locked cell 'setup' was edited (the release's version was graded)"]
    assert not plan.untouched(plans["03_gelu"], nb)
    assert plan.untouched(plans["03_gelu"], rel)


# ----------------------------------------------------------------------------- wire
def test_wire_round_trip_of_every_value_kind():
    values = {"a": [torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.tensor(1.5, dtype=torch.bfloat16),
                    torch.zeros(0, 4, dtype=torch.float16)],
              "b": ({"n": 3, "x": float("inf")}, None, True, "text")}
    a, b = socket.socketpair()
    wire.send(a, {"op": "t"}, values)
    header, got = wire.recv(b, timeout=5)
    assert header == {"op": "t"}
    assert torch.equal(got["a"][0], values["a"][0]) and got["a"][1].dtype == torch.bfloat16
    assert got["a"][2].shape == (0, 4) and got["b"][0]["x"] == float("inf") and got["b"][1:] == (None, True, "text")


def test_wire_times_out_on_silence():
    a, b = socket.socketpair()
    with pytest.raises(TimeoutError):
        wire.recv(b, timeout=0.2)


def test_results_and_arguments_are_applied_back_in_place():
    local = torch.ones(3)
    remote.apply_back(local, torch.tensor([1.0, 2.0, 3.0]))
    assert local.tolist() == [1.0, 2.0, 3.0]
    params = {"w": torch.zeros(2), "gone": torch.zeros(1)}
    remote.apply_back(params, {"w": torch.ones(2), "new": 5})
    assert set(params) == {"w", "new"} and params["w"].tolist() == [1.0, 1.0]


# ----------------------------------------------------------------------------- text
@pytest.mark.parametrize("raw", ["a\nb", "\x1b[2K\x1b[1Ahidden", "\u202eevil", "x\u2028y", "\x00\x07", "tab\there"])
def test_learner_text_becomes_one_printable_line(raw):
    out = textsafe.line(raw)
    assert "\n" not in out and "\x1b" not in out and "\u202e" not in out and "\u2028" not in out
    assert out.isprintable()


def test_text_keeps_letters_and_guards_spreadsheet_cells():
    assert textsafe.line("ანდრეა ✓ Ärger") == "ანდრეა ✓ Ärger"
    assert textsafe.cell("=HYPERLINK(1)").startswith("'=")
    assert textsafe.line("x" * 500, 20).endswith("…") and len(textsafe.line("x" * 500, 20)) == 21


def test_statuses_of_a_record():
    rec = {"status": "ok", "refused": ["torch.py"], "limits": [], "errors": [],
           "checks": {"gelu": {"differs": [{"grade_id": "gelu_values", "kernel": 6.0, "independent": 0.0}],
                               "probes": ["import ctypes"]}}}
    statuses, lines = findings.notebook_findings(rec, "gelu")
    assert statuses == ["tampering suspected", "files refused", "probe suspected"]
    assert any("possible tampering" in ln for ln in lines)
    rec["checks"]["gelu"]["differs"][0].update(kernel=0.0, independent=6.0)
    statuses, lines = findings.notebook_findings(rec, "gelu")
    assert statuses[0] == "files refused" and "tampering suspected" not in statuses


@pytest.mark.parametrize("problem,status", [("answer stopped", "failed"), ("timed out", "timed out")])
def test_an_unfinished_check_accuses_nobody(problem, status):
    # the answer server died or ran out of time (a machine under load, a kill at a limit): the
    # notebook's higher score is unconfirmed and earns nothing, but nobody is accused ...
    rec = {"status": "ok", "refused": [], "limits": [], "errors": [],
           "checks": {"gelu": {"problem": problem, "review": [],
                               "differs": [{"grade_id": "gelu_values", "kernel": 6.0, "independent": 0.0}]}}}
    statuses, lines = findings.notebook_findings(rec, "gelu")
    assert statuses[0] == status and "tampering suspected" not in statuses, statuses
    assert any(ln.startswith("CHECK INCOMPLETE: cell gelu_values") for ln in lines), lines
    assert not any("tampering" in ln for ln in lines), lines
    # ... unless the server's guards saw the answer at work on the grader's machinery
    rec["checks"]["gelu"]["review"] = ["the answer server's guards: a forged reply"]
    statuses, lines = findings.notebook_findings(rec, "gelu")
    assert "tampering suspected" in statuses and any("possible tampering" in ln for ln in lines)


def test_a_grader_fault_holds_the_cell_and_accuses_nobody():
    # the kernel passed the cell (10 points); the independent check broke on the grader's side
    rec = {"status": "ok", "refused": [], "limits": [], "errors": [], "student": "s1", "assignment": "03_gelu",
           "checks": {"gelu": {"review": [], "held": True, "faults": {"gelu_values": "FileNotFoundError at x.py:3: y"},
                               "differs": [{"grade_id": "gelu_values", "kernel": 6.0, "independent": 0.0}]}}}
    statuses, lines = findings.notebook_findings(rec, "gelu")
    assert statuses[0] == "held for review" and "tampering suspected" not in statuses, statuses
    assert any(ln.startswith("GRADER FAULT: cell gelu_values") and "FileNotFoundError" in ln for ln in lines)
    assert not any("tamper" in ln.lower() for ln in lines), lines
    assert review.held(rec) and review.stale(rec, {})  # never kept: the next run grades it again
    del rec["checks"]["gelu"]["faults"]
    assert not review.stale(rec, {})


# ----------------------------------------------------------------------------- fingerprint
def test_changing_a_check_changes_the_resume_fingerprint(tmp_path):
    repo = tmp_path / "repo"
    for part in ("solutions", "exercises", "andrea_ref", "classroom"):
        shutil.copytree(ROOT / part, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "nbgrader_config.py", repo / "nbgrader_config.py")
    before = snapshot.code_digest(repo)
    assert snapshot.code_digest(repo) == before
    check = repo / "andrea_ref" / "grading" / "gelu.py"
    check.write_text(check.read_text() + "\n# a changed check\n")
    assert snapshot.code_digest(repo) != before
    (repo / "andrea_ref" / "grading" / "__pycache__").mkdir(exist_ok=True)
    (repo / "andrea_ref" / "grading" / "__pycache__" / "x.pyc").write_bytes(b"cache")
    assert snapshot.code_digest(repo) == snapshot.code_digest(repo)


def test_grading_options_are_part_of_the_fingerprint():
    base = options.options_digest(sandbox.Limits(), None, 600, 2 << 20, 3 << 30)
    assert base == options.options_digest(sandbox.Limits(), None, 600.0, 2 << 20, 3 << 30)
    assert base != options.options_digest(sandbox.Limits(memory=1 << 30), None, 600, 2 << 20, 3 << 30)
    assert base != options.options_digest(sandbox.Limits(), 5, 600, 2 << 20, 3 << 30)


# ----------------------------------------------------------------------------- end to end
@pytest.mark.slow
@pytest.mark.parametrize("student", ["gelu_solution", "gelu_erf", "gelu_untouched", "gelu_library_alias",
                                     "gelu_custom_eq", "gelu_warns", "gelu_float64_result"])
def test_independent_verdicts_equal_the_catalogue(plans, host, student):
    case = next(c for c in CASES if c.student == student)
    sol, rel = _nbs(case.assignment)
    nb = json.loads(make_submission(case, rel, sol))
    v = verdicts.check_notebook(plans[case.assignment], nb, host, cell_timeout=20)
    assert {g for g, c in v.cells.items() if not c.passed} == case.lost_cells()
    assert v.score == case.expected_score()
    if case.feedback:
        assert any(case.feedback in c.message for c in v.cells.values())


@pytest.mark.slow
def test_a_check_broken_on_the_grader_side_is_held_not_scored(plans, host, monkeypatch):
    """A check that raises in the grader (a missing data file, a bug) gives no verdict on the
    answer: that cell is held, with where it broke, and the others are graded as ever."""
    from andrea_ref import grading

    def broken(fn, seed=0):
        raise FileNotFoundError("andrea_ref/data/missing.txt")

    monkeypatch.setattr(grading, "check_gelu_values", broken)
    case = next(c for c in CASES if c.student == "gelu_solution")
    sol, rel = _nbs(case.assignment)
    v = verdicts.check_notebook(plans[case.assignment], json.loads(make_submission(case, rel, sol)), host,
                                cell_timeout=20)
    assert set(v.faults) == {"gelu_values"} and "FileNotFoundError" in v.faults["gelu_values"]
    assert "test_classroom_independent.py" in v.faults["gelu_values"]  # where it broke
    assert v.held and not v.review and v.cells["gelu_values"].score == 0.0
    assert "says nothing about your code" in v.cells["gelu_values"].message
    assert all(c.passed for g, c in v.cells.items() if g != "gelu_values")
    assert v.score == case.expected_score() - v.cells["gelu_values"].points
    v.accepted = True  # an acceptance grants what the checks gave: nothing for a broken check
    assert v.held and v.cells["gelu_values"].score == 0.0


@pytest.mark.slow
def test_a_course_below_tmp_stays_visible_and_read_only_in_forked_servers(tmp_path, plans, monkeypatch):
    """The fresh /tmp of each forked answer server hides what other jobs wrote there, not
    the course: a checkout below /tmp still imports, and stays read-only."""
    import shutil

    from hostile.submissions import GELU, notebook_with
    course = tmp_path / "course"
    for pkg in ("andrea_ref", "classroom"):
        shutil.copytree(ROOT / pkg, course / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    # a module no zygote has imported yet: it must be found after the fork
    (course / "andrea_ref" / "first_used_late.py").write_text("READY = True\n")
    for d in [tmp_path, course, *course.rglob("*")]:
        os.chmod(d, 0o755 if d.is_dir() else 0o644)
    work = tmp_path / "answer"
    work.mkdir(mode=0o755)
    os.chmod(work, 0o755)
    ro, pypath = sandbox.default_ro_paths(course)
    assert any(p.startswith(str(tmp_path)) for p in ro)
    monkeypatch.setattr(answers, "SERVER", course / "classroom" / "isolation" / "answer_server.py")  # the copy's own
    uid = uids.UID_BASE + 981 if os.geteuid() == 0 else None
    spec = sandbox.SandboxSpec(scratch_root=str(work), runtime_dir=str(work), pidfile=str(work / "pid"), uid=uid,
                               ro_paths=ro, pythonpath=pypath,
                               limits=sandbox.Limits(memory=3 << 30, processes=128, cpu_seconds=120))
    h = answers.AnswerHost(spec, work / "server", zygote=True)
    h.start()
    try:
        if h.mode != "zygote":
            pytest.skip(f"no nested namespaces here: {h.why_not_zygote}")
        target = course / "andrea_ref" / "planted.py"
        # right only where the course cannot be written to (and really imported from below /tmp)
        # (the cell stops at its first error, before gelu is defined)
        answer = (
            "import andrea_ref as _a\n"
            "from andrea_ref.first_used_late import READY\n"
            f"assert READY and _a.__file__.startswith({str(course)!r})\n"
            + GELU +
            "try:\n"
            f"    open({str(target)!r}, 'w').write('x')\n"
            "    gelu = lambda x: x\n"
            "except OSError:\n"
            "    pass\n")
        released = _nbs("03_gelu")[1]
        v = verdicts.check_notebook(plans["03_gelu"], json.loads(notebook_with(released, answer)), h,
                                       cell_timeout=20)
        assert all(c.passed for c in v.cells.values()), {g: c.message for g, c in v.cells.items()}
        assert not target.exists()
    finally:
        h.close()
