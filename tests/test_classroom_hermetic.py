"""A grading run grades with the copy of the course it takes when it starts: a release, or
a check edited, in the checkout during the run changes nothing about that run, and a
release that changes nothing leaves the resume fingerprint as it was (the run resumed
afterwards grades nothing again)."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grading_submissions import CASES, make_submission  # noqa: E402

from classroom import orchestration  # noqa: E402
from classroom.course import snapshot  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EDITED = "\n\ndef check_gelu_values(*args, **kwargs):\n    raise AssertionError('edited during the run')\n"


def _checkout(dest: Path) -> Path:
    """A checkout of the course of its own (the grader's code stays the repository's)."""
    dest.mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", dest)
    shutil.copy(ROOT / "course.toml", dest)
    for part in ("solutions", "exercises", "andrea_ref"):
        shutil.copytree(ROOT / part, dest / part, ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    for po in ROOT.glob("book/locales/*/LC_MESSAGES/notebooks/*.po"):
        target = dest / po.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(po, target)
    (dest / "scripts").mkdir()
    for script in ("release.py", "release_state.py"):
        shutil.copy(ROOT / "scripts" / script, dest / "scripts")
    return dest


@pytest.mark.slow
def test_a_release_and_an_edited_check_during_a_run_change_nothing_about_it(tmp_path):
    checkout = _checkout(tmp_path / "checkout")
    case = next(c for c in CASES if c.student == "gelu_solution")
    released = json.loads((checkout / "exercises" / "03_gelu" / "gelu.ipynb").read_text())
    solution = json.loads((checkout / "solutions" / "03_gelu" / "gelu.ipynb").read_text())
    subs = tmp_path / "subs" / "alice" / "03_gelu" / "gelu.ipynb"
    subs.parent.mkdir(parents=True)
    subs.write_text(make_submission(case, released, solution))
    check = checkout / "andrea_ref" / "grading" / "gelu.py"
    original = check.read_bytes()
    before = snapshot.code_digest(checkout, snapshot.CODE_ROOT)
    seen = []

    def during(line) -> None:
        seen.append(str(line))
        if "to grade on" in str(line):  # the run has taken its copy; no worker has started yet
            proc = subprocess.run([sys.executable, str(checkout / "scripts" / "release.py")], cwd=checkout,
                                  capture_output=True, text=True, timeout=600)
            seen.append(proc.stdout + proc.stderr)
            check.write_bytes(original + EDITED.encode())  # whatever imports the checkout's check now fails

    out, db = tmp_path / "out", f"sqlite:///{tmp_path / 'course.db'}"
    summary = orchestration.run(tmp_path / "subs", workers=1, db_url=db, out=out, progress=False, log=during,
                                repo=checkout)
    text = "\n".join(seen)
    assert "exercises/ is up to date" in text and "Wrote" not in text, text
    # the workers' checks, and the kernels' (which would then differ), were the copy's
    assert summary["scores"][("alice", "03_gelu")] == case.expected_score() == 10.0, text
    (record,) = summary["records"]
    assert record["checks"]["gelu"]["differs"] == [], record
    assert record["template"].startswith(before), record["template"]
    assert (out / "course" / before[:16] / "andrea_ref" / "grading" / "gelu.py").read_bytes() == original

    check.write_bytes(original)  # the checkout as it was, released once more meanwhile
    assert snapshot.code_digest(checkout, snapshot.CODE_ROOT) == before
    again = orchestration.run(tmp_path / "subs", workers=1, db_url=db, out=out, progress=False, log=seen.append,
                              repo=checkout)
    assert again["graded_now"] == 0, "\n".join(seen)
    assert again["scores"][("alice", "03_gelu")] == 10.0
