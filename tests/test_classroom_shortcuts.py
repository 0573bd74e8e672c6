"""The rules against shortcuts are decided in the grader, on the answer's source: the
forged classes of ``tests/hostile/shortcuts.py`` (machinery under aliases, worker
threads, other dispatch keys, a replaced reply, PyTorch's Python references, the
grading package's internal helpers, a namespace's members by computed names, code run
from magic lines and other strings, code compiled or unpickled, shortcuts stored in
containers), several variants each, get none of the points the rule governs and are
reported with the line that does it; an instructor's acceptance grants what the checks
give to a held answer that computes GELU itself, never to a shortcut.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hostile.shortcuts import ASSIGNMENT, CLASSES, NOTEBOOK  # noqa: E402
from hostile.submissions import GELU, notebook_with  # noqa: E402
from honest import released  # noqa: E402

from classroom import orchestration  # noqa: E402
from classroom.isolation import bwrap as sandbox  # noqa: E402
from classroom.scoring import review  # noqa: E402
from classroom.scoring.plan import answer_runs, build_plan  # noqa: E402
from classroom.scoring.shortcuts import analyse  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = [(cls, name, src) for cls, variants in CLASSES.items() for name, src in variants.items()]
IDS = [f"{cls}-{name}" for cls, name, _ in VARIANTS]
# classes whose every variant reaches machinery (held for review), not only a forbidden implementation
HELD_CLASSES = {"alias", "thread", "reply", "refs", "namespace", "code"}
# classes whose every variant's function reaches a forbidden implementation the source shows
SHORTCUT_CLASSES = {"dispatch", "refs", "helpers", "strings", "containers"}
# answers that compute GELU themselves but reach for machinery: held, and granted on acceptance
HONEST_BUT_HELD = "alias-importlib_server"
SHORTCUT_ACCEPTED = "alias-core_module_alias"  # machinery and F.gelu: acceptance grants nothing
CONTROL = "zz_honest"


def _notebook(source: str) -> dict:
    return json.loads(notebook_with(released(ASSIGNMENT), source))


@pytest.fixture(scope="module")
def plan():
    inst = json.loads((ROOT / "solutions" / ASSIGNMENT / NOTEBOOK).read_text())
    return build_plan(inst, released(ASSIGNMENT))


def test_every_class_has_several_variants():
    assert set(CLASSES) == {"alias", "thread", "dispatch", "reply", "refs", "helpers", "namespace", "strings", "code",
                            "containers"}
    assert all(len(v) >= 5 for v in CLASSES.values()), {k: len(v) for k, v in CLASSES.items()}


@pytest.mark.parametrize("cls,name,source", VARIANTS, ids=IDS)
def test_the_source_rules_find_each_variant(plan, cls, name, source):
    found = analyse(plan, answer_runs(plan, _notebook(source)))
    evidence = found.machinery + [f for hits in found.shortcuts.values() for f in hits]
    assert evidence, f"{cls}/{name}: nothing found"
    assert all(f.cell > 0 and f.line > 0 and f.code for f in evidence), [f.text() for f in evidence]
    assert all(f.code in source for f in evidence)
    if cls in HELD_CLASSES:
        assert found.machinery, f"{cls}/{name}: not held"
    # a variant whose function calls a forbidden implementation is a shortcut in every graded cell
    if cls in SHORTCUT_CLASSES:
        assert all(found.shortcuts.get(k) for k in range(len(plan["graded"]))), found.shortcuts


def test_the_correct_answer_alone_finds_nothing(plan):
    found = analyse(plan, answer_runs(plan, _notebook(GELU)))
    assert not found.machinery and not found.notes and not any(found.shortcuts.values())


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shortcuts")
    subs, out = tmp / "subs", tmp / "out"
    notebooks = {student: _notebook(src) for student, (_, _, src) in zip(IDS, VARIANTS)}
    notebooks[CONTROL] = _notebook(GELU)
    for student, nb in notebooks.items():
        path = subs / student / ASSIGNMENT / NOTEBOOK
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(nb, indent=1), encoding="utf-8")

    def grade():
        return orchestration.run(subs, workers=2, db_url=f"sqlite:///{tmp / 'course.db'}", out=out, timeout=30,
                                 deadline=120, limits=sandbox.Limits(memory=3 << 30, cpu_seconds=120),
                                 progress=False, log=lambda *_: None)

    first = grade()
    accepted = review.accept(out, [f"{HONEST_BUT_HELD}/{ASSIGNMENT}", f"{SHORTCUT_ACCEPTED}/{ASSIGNMENT}"])
    return {"first": first, "second": grade(), "accepted": accepted, "out": out}


def _row(summary, student):
    rows = [r for r in summary["rows"] if r["student"] == student and r["assignment"] == ASSIGNMENT]
    assert len(rows) == 1, rows
    return rows[0]


def _check(summary, student):
    rec = next(r for r in summary["records"] if r["student"] == student and r["assignment"] == ASSIGNMENT)
    return rec, rec["checks"]["gelu"]


@pytest.mark.parametrize("cls,name,source", VARIANTS, ids=IDS)
def test_forged_variant_gets_no_points_and_is_reported(graded, cls, name, source):
    student = f"{cls}-{name}"
    summary = graded["first"]
    assert summary["scores"][(student, ASSIGNMENT)] == 0.0
    rec, check = _check(summary, student)
    assert sum(rec["notebooks"]["gelu"].values()) == 0.0
    row = _row(summary, student)
    evidence = list(check["review"]) + [h for hits in check["shortcuts"].values() for h in hits]
    assert evidence, check
    # the report names the line that does it
    assert any(line.split("`")[1] in row["problems"] for line in evidence if "`" in line), row["problems"]
    assert "SHORTCUT" in row["problems"] or "HELD FOR REVIEW" in row["problems"]
    if check["review"]:
        assert "held for review" in row["all_statuses"] and check["held"], row
    page = next((graded["out"] / "feedback" / student / ASSIGNMENT).glob("*.html")).read_text(encoding="utf-8")
    # the learner reads why: held for review, or the rule (the grader's words or the server's, which agreed)
    assert "Held for review" in page or "whatever name" in page, student


def test_the_honest_control_is_unchanged(graded):
    for summary in (graded["first"], graded["second"]):
        assert summary["scores"][(CONTROL, ASSIGNMENT)] == 10.0
        row = _row(summary, CONTROL)
        assert row["status"] == "graded" and row["all_statuses"] == "graded", row


def test_acceptance_grants_the_checks_points_to_a_held_answer_only(graded):
    assert len(graded["accepted"]) == 2
    first, second = graded["first"], graded["second"]
    assert first["scores"][(HONEST_BUT_HELD, ASSIGNMENT)] == 0.0
    assert second["scores"][(HONEST_BUT_HELD, ASSIGNMENT)] == 10.0
    row = _row(second, HONEST_BUT_HELD)
    assert row["status"] != "held for review" and "ACCEPTED ON REVIEW" in row["problems"], row
    # accepting a shortcut grants nothing: the rule holds whatever the instructor decides on the rest
    assert second["scores"][(SHORTCUT_ACCEPTED, ASSIGNMENT)] == 0.0
    assert "SHORTCUT" in _row(second, SHORTCUT_ACCEPTED)["problems"]
    # every other held submission stays held on the second run
    for cls, name, _ in VARIANTS:
        student = f"{cls}-{name}"
        if student not in (HONEST_BUT_HELD, SHORTCUT_ACCEPTED):
            assert second["scores"][(student, ASSIGNMENT)] == 0.0, student


def test_an_acceptance_is_refused_for_a_submission_not_held(graded):
    with pytest.raises(ValueError, match="not held for review"):
        review.accept(graded["out"], [f"{CONTROL}/{ASSIGNMENT}"])
    with pytest.raises(ValueError, match="STUDENT/ASSIGNMENT"):
        review.accept(graded["out"], ["no-slash"])


def test_the_learners_own_process_alone_is_fooled(graded):
    """The control: the notebook's own graded cells, run in the learner's kernel (what a
    plain nbgrader run records), give full marks to the library's GELU run in a worker
    thread; the grade, decided on the source, gives nothing."""
    rec, _ = _check(graded["first"], "thread-threading_thread")
    assert sum(rec["kernel_notebooks"]["gelu"].values()) == 10.0
    assert graded["first"]["scores"][("thread-threading_thread", ASSIGNMENT)] == 0.0
