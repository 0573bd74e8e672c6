"""The graders, proved through the real nbgrader pipeline: every submission of
grading_submissions.py graded by plain ``nbgrader autograde`` and ``generate_feedback``
in a temporary course per assignment (tests/plain_class.py, graded once per test run),
its scores read per graded cell from the gradebook.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import grading_submissions as S
from andrea_ref.grading.course import REPO, run_nbgrader

pytestmark = pytest.mark.slow

FAILING = {"invalid_json", "kernel_dies"}  # nbgrader cannot grade these: they must be reported


@pytest.fixture(scope="module")
def graded(plain_class):
    return plain_class


def _id(case):
    return case.student


GRADED = [c for c in S.CASES if c.damage not in FAILING]


@pytest.mark.parametrize("case", GRADED, ids=_id)
def test_points_per_cell(graded, case):
    """Each submission loses exactly the cells of the property it breaks."""
    got = graded[case.assignment]["scores"].get((case.student, case.assignment))
    assert got is not None, f"{case.student} has no grades"
    cells = S.ASSIGNMENTS[case.assignment][3]
    want = {g: (0.0 if g in case.lost_cells() else float(p)) for g, p in cells.items()}
    assert got == want


@pytest.mark.parametrize("case", [c for c in GRADED if c.feedback], ids=_id)
def test_feedback_names_the_mistake(graded, case):
    course = graded[case.assignment]["course"]
    html = (course / "feedback" / case.student / case.assignment /
            S.ASSIGNMENTS[case.assignment][0].replace(".ipynb", ".html")).read_text()
    text = re.sub(r"<[^>]+>", "", html).replace("&#39;", "'").replace("&quot;", '"').replace("&amp;", "&")
    assert case.feedback in text


@pytest.mark.parametrize("case", [c for c in S.CASES if c.damage in FAILING], ids=_id)
def test_ungradable_submission_is_reported(graded, case):
    """A notebook nbgrader cannot run is named in the log, scores nothing, and the rest
    of the batch is graded (checked by test_points_per_cell for every other student)."""
    result = graded[case.assignment]
    log = result["autograde"].stdout + result["autograde"].stderr
    assert result["autograde"].returncode != 0
    assert f"/submitted/{case.student}/{case.assignment}" in log
    got = result["scores"].get((case.student, case.assignment), {})
    assert sum(v or 0 for v in got.values()) == 0


def test_every_other_submission_was_autograded(graded):
    for assignment, result in graded.items():
        for case in S.CASES:
            if case.assignment == assignment and case.damage not in FAILING:
                nb = result["course"] / "autograded" / case.student / assignment / S.ASSIGNMENTS[assignment][0]
                assert nb.exists(), case.student


def test_deleted_test_cell_is_restored_with_hidden_tests(graded):
    course = graded["02_layernorm"]["course"]
    nb = json.loads((course / "autograded" / "ln_deleted_test_cell" / "02_layernorm" / "layernorm.ipynb").read_text())
    ids = [c["metadata"].get("nbgrader", {}).get("grade_id") for c in nb["cells"]]
    assert "ln_shape" in ids
    source = "".join(nb["cells"][ids.index("ln_shape")]["source"])
    assert "check_layer_norm_shape" in source and "seed=" in source  # the hidden test ran too


def test_edited_test_cells_are_restored(graded):
    course = graded["03_gelu"]["course"]
    nb = json.loads((course / "autograded" / "gelu_edited_test_cell" / "03_gelu" / "gelu.ipynb").read_text())
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id", "")
        if grade_id in S.ASSIGNMENTS["03_gelu"][3]:
            assert "grading.check_gelu" in "".join(cell["source"])


def test_endless_loop_at_top_level_is_interrupted(graded):
    """The cell times out, is interrupted, and the notebook is still graded (0 points)."""
    course = graded["01_block"]["course"]
    nb = json.loads((course / "autograded" / "block_loop_at_top" / "01_block" / "block.ipynb").read_text())
    outputs = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    assert "CellTimeoutError" in outputs or "KeyboardInterrupt" in outputs


def test_torch_warning_reaches_no_test_cell(graded):
    course = graded["03_gelu"]["course"]
    nb = json.loads((course / "autograded" / "gelu_warns" / "03_gelu" / "gelu.ipynb").read_text())
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade"):
            assert all(o.get("name") != "stderr" for o in cell.get("outputs", []))


# --------------------------------------------------------------------------- validate
def _finished_notebook(tmp_path, assignment, source=None):
    nb_name, _, cell_id, _ = S.ASSIGNMENTS[assignment]
    released = json.loads((REPO / "exercises" / assignment / nb_name).read_text())
    solution = json.loads((REPO / "solutions" / assignment / nb_name).read_text())
    case = S.Case(assignment, "me", source)
    path = tmp_path / assignment / nb_name
    path.parent.mkdir(parents=True)
    path.write_text(S.make_submission(case, released, solution))
    return path


@pytest.mark.parametrize("assignment", list(S.ASSIGNMENTS))
def test_validate_passes_a_finished_notebook(tmp_path, assignment):
    path = _finished_notebook(tmp_path, assignment)
    proc = run_nbgrader(path.parent, "validate", path.name)
    assert "Success! Your notebook passes all the tests." in proc.stdout, proc.stdout + proc.stderr


def test_validate_reports_a_mistake(tmp_path):
    case = next(c for c in S.CASES if c.student == "ln_unbiased")
    path = _finished_notebook(tmp_path, case.assignment, case.source)
    proc = run_nbgrader(path.parent, "validate", path.name)
    out = proc.stdout + proc.stderr
    assert "Success!" not in out
    assert "unbiased" in out


# --------------------------------------------------------------------------- JupyterLab
def test_lab_validate_button(tmp_path):
    """What the Validate button in JupyterLab does: the nbgrader server extension,
    configured from nbgrader_config.py in the server's working directory (as `make lab`
    starts it), validates a finished notebook; an untouched one does not pass."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.parse
    import urllib.request

    from andrea_ref.grading.course import nbgrader_env

    shutil.copy(REPO / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    done = _finished_notebook(tmp_path / "exercises", "03_gelu")
    untouched = tmp_path / "exercises" / "untouched" / "gelu.ipynb"
    untouched.parent.mkdir(parents=True)
    shutil.copy(REPO / "exercises" / "03_gelu" / "gelu.ipynb", untouched)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "validate-test"
    jupyter = str(Path(sys.executable).parent / "jupyter")
    server = subprocess.Popen(
        [jupyter, "lab", "--no-browser", "--allow-root", f"--port={port}", "--ip=127.0.0.1",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}"],
        cwd=tmp_path, env=nbgrader_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"token {token}"}
        for _ in range(120):
            assert server.poll() is None, "jupyter lab exited at start-up"
            try:
                urllib.request.urlopen(urllib.request.Request(base + "/api/status", headers=headers), timeout=2)
                break
            except OSError:
                time.sleep(0.5)

        def validate(path):
            url = base + "/assignments/validate?" + urllib.parse.urlencode({"path": path})
            req = urllib.request.Request(url, data=b"", headers=headers, method="POST")
            return json.loads(urllib.request.urlopen(req, timeout=120).read())

        ok = validate(str(done.relative_to(tmp_path)))
        assert ok["success"] is True, ok
        assert "failed" not in ok["value"], ok["value"]
        bad = validate(str(untouched.relative_to(tmp_path)))
        assert bad["success"] is True and bad["value"].get("failed"), bad
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_lab_has_the_nbgrader_extension():
    import subprocess
    import sys

    jupyter = str(Path(sys.executable).parent / "jupyter")
    out = subprocess.run([jupyter, "labextension", "list"], capture_output=True, text=True)
    assert "@jupyter/nbgrader" in out.stdout + out.stderr
