"""What a learner sees around the checks, and the release's guard for exercises/.

* A failed check shows its message, the likely mistake and the learner's own failing
  line, with no traceback through ``andrea_ref.grading``: in a real kernel and in
  ``nbgrader validate``. Outside IPython the exception is an ordinary one.
* A released notebook run top to bottom prints nothing stray, carries exactly the
  metadata the course's kernel reports (so JupyterLab opens it unmodified), marks its
  locked and graded cells as its text says, and says how to hand it in.
* ``scripts/release.py`` refuses to overwrite notebooks edited in exercises/ since the
  last release, says which and what would change, and overwrites them with ``--force``.
  Those tests work on a copy of the course in a temporary folder.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from andrea_ref.grading.course import REPO, graded_cells
from andrea_ref.grading.manifest import load
from classroom.course import snapshot

spec = importlib.util.spec_from_file_location("release", REPO / "scripts" / "release.py")
release = importlib.util.module_from_spec(spec)
spec.loader.exec_module(release)

VENV_BIN = Path(sys.executable).parent
NOTEBOOKS = {p.parent.name: p for p in sorted((REPO / "exercises").glob("*/*.ipynb"))}
GRADING_DIR = str(REPO / "andrea_ref" / "grading")


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = str(VENV_BIN) + os.pathsep + env.get("PATH", "")
    return env


def _run(nb, cwd: Path):
    client = NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=120,
                            resources={"metadata": {"path": str(cwd)}},
                            extra_arguments=["--HistoryManager.hist_file=:memory:"])
    client.execute()
    return nb


def _errors(cell):
    return [o for o in cell.outputs if o.output_type == "error"]


def _assert_clean(error):
    text = "\n".join(error.traceback)
    assert "Traceback" not in text and "core.py" not in text and GRADING_DIR not in text, text
    assert "\x1b[" not in text, text  # plain text: nbgrader's Validate dialog shows it as is
    assert len(error.traceback) <= 12, text


# ---------------------------------------------------------------------------
# A failed check in a kernel, in Validate, and in plain Python.

@pytest.mark.slow
def test_failed_check_in_a_kernel_shows_the_message_not_a_traceback(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        "import torch\nfrom andrea_ref import grading",
        "def gelu(x):\n    return x",
        "grading.check_gelu_values(gelu)",
        "def gelu(x):\n    y = 2 * x\n    return y @ torch.ones(3, 5)",
        "grading.check_gelu_shape(gelu)",
        "def gelu(x):\n    return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))",
        "grading.check_gelu_values(gelu)",
    )]
    _run(nb, tmp_path)
    wrong, raises, right = nb.cells[2], nb.cells[4], nb.cells[6]

    (err,) = _errors(wrong)
    assert err.ename == "GradingError"
    _assert_clean(err)
    assert err.traceback[0].startswith("GradingError: `gelu` does not match"), err.traceback
    assert err.traceback[-1].startswith("\u2717 not met: gelu is the tanh approximation")

    (err,) = _errors(raises)
    _assert_clean(err)
    assert err.traceback[0].startswith("GradingError: `gelu` raised RuntimeError: mat1 and mat2")
    # the learner's own line is shown, the checker's are not
    assert "In your code:" in err.traceback
    assert any("gelu, line 3 of its cell: return y @ torch.ones(3, 5)" in ln for ln in err.traceback)

    assert not _errors(right)
    assert "\u2713 gelu is the tanh approximation" in "".join(o.get("text", "") for o in right.outputs)


@pytest.mark.slow
def test_validate_shows_the_message_not_a_traceback(tmp_path):
    nb = json.loads(NOTEBOOKS["03_gelu"].read_text())
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = "def gelu(x):\n    return x\n"
    (tmp_path / "gelu.ipynb").write_text(json.dumps(nb))
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    proc = subprocess.run([str(VENV_BIN / "nbgrader"), "validate", "gelu.ipynb"], cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=300)
    out = proc.stdout
    assert "GradingError: `gelu` does not match" in out, out + proc.stderr
    assert "Traceback" not in out and "core.py" not in out, out


def _gelu_notebook(folder: Path, body: str) -> Path:
    nb = json.loads(NOTEBOOKS["03_gelu"].read_text())
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = f"def gelu(x):\n{body}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gelu.ipynb").write_text(json.dumps(nb))
    return folder / "gelu.ipynb"


@pytest.mark.slow
def test_andrea_lab_validate_shows_every_message_in_full_and_fails(tmp_path):
    """`andrea-lab validate` (the kit's command) on a wrong answer: exit status 1, and every
    line of the check's message whole (``nbgrader validate``, the control, cuts them at 90
    characters and exits 0); on a right answer: 0; on a path that is no notebook: 2, one line."""
    from andrea_ref import grading
    try:
        grading.check_gelu_values(lambda x: x)
    except AssertionError as exc:
        message = str(exc)
    assert max(len(ln) for ln in message.splitlines()) > 100  # long enough to be cut
    wrong = _gelu_notebook(tmp_path / "wrong", "    return x\n")

    def validate(*args, cwd=tmp_path):
        return subprocess.run([sys.executable, "-m", "andrea_lab", "validate", *args], cwd=cwd,
                              env=_env(), capture_output=True, text=True, timeout=300)

    proc = validate(str(wrong), "--width", "100")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    out = " ".join(proc.stdout.split())
    assert "VALIDATION FAILED" in proc.stdout
    for line in message.splitlines():
        assert " ".join(line.split()) in out, (line, proc.stdout)
    assert max(len(ln) for ln in proc.stdout.splitlines()) <= 100
    assert not [ln for ln in proc.stdout.splitlines() if ln.endswith("...")], proc.stdout

    control = subprocess.run([str(VENV_BIN / "nbgrader"), "validate", str(wrong)], cwd=tmp_path,
                             env=_env(), capture_output=True, text=True, timeout=300)
    assert control.returncode == 0 and any(ln.endswith("...") for ln in control.stdout.splitlines())

    right = _gelu_notebook(tmp_path / "right", "    return 0.5 * x * (1 + torch.tanh("
                           "0.7978845608028654 * (x + 0.044715 * x**3)))\n")
    proc = validate(str(right))
    assert proc.returncode == 0 and "Success! Your notebook passes all the tests." in proc.stdout, \
        proc.stdout + proc.stderr

    proc = validate(str(tmp_path / "missing.ipynb"))
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"andrea-lab validate: NOTEBOOK: {tmp_path / 'missing.ipynb'} is not a notebook file (.ipynb)"]


def test_outside_ipython_a_failed_check_is_an_ordinary_assertion_error():
    code = ("from andrea_ref import grading\n"
            "try:\n"
            "    grading.check_gelu_values(lambda x: x)\n"
            "except AssertionError as exc:\n"
            "    print(type(exc).__mro__[1].__name__, isinstance(exc, grading.GradingError))\n"
            "grading.check_gelu_values(lambda x: x)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1
    assert proc.stdout.strip() == "AssertionError True"
    assert "Traceback (most recent call last)" in proc.stderr  # the normal one, in full
    assert "GradingError: `gelu` does not match" in proc.stderr


# ---------------------------------------------------------------------------
# The released notebooks.

@pytest.mark.slow
@pytest.mark.parametrize("assignment", sorted(NOTEBOOKS))
def test_released_notebook_runs_without_stray_output(assignment, tmp_path):
    """Run as released (the answer not written): the self-check reports, every graded
    cell fails with a clean message, nothing is displayed that nobody printed, and the
    kernel's own metadata is what the notebook already holds."""
    path = NOTEBOOKS[assignment]
    nb = nbformat.read(path, as_version=4)
    _run(nb, tmp_path)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        meta = cell.metadata.get("nbgrader", {})
        assert not [o for o in cell.outputs if o.output_type in ("execute_result", "display_data")], \
            cell.source
        if meta.get("grade"):
            (err,) = _errors(cell)
            _assert_clean(err)
            assert "is not written yet" in err.traceback[0]
        elif not meta.get("solution"):
            assert not _errors(cell), cell.source
    self_checks = [c for c in nb.cells if "grading.report_" in c.source]
    assert len(self_checks) == len(load()[assignment].functions())  # one per function the learner writes
    for self_check in self_checks:
        text = "".join(o.get("text", "") for o in self_check.outputs)
        assert re.search(r"^0 of \d+ properties hold\.$", text, re.M), text
    # what JupyterLab writes when the kernel starts is what the release wrote
    released = json.loads(path.read_text())["metadata"]
    running = dict(nb.metadata["language_info"])
    assert running.pop("version").rsplit(".", 1)[0] == released["language_info"]["version"].rsplit(".", 1)[0]
    assert {k: v for k, v in released["language_info"].items() if k != "version"} == running


def test_released_metadata_is_the_course_kernels():
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")  # installed by `make venv`
    assert release.KERNELSPEC == {"name": "python3", "display_name": spec.display_name,
                                  "language": spec.language}
    assert release.LANGUAGE_INFO["version"].startswith("%d.%d." % sys.version_info[:2])
    for path in NOTEBOOKS.values():
        meta = json.loads(path.read_text())["metadata"]
        assert meta == {"kernelspec": release.KERNELSPEC, "language_info": release.LANGUAGE_INFO}, path


def _notebooks():
    return [*NOTEBOOKS.values(), *sorted((REPO / "solutions").glob("*/*.ipynb"))]


LOCK = "[locked]"  # a text marker: an emoji is an empty box where no emoji font is installed


@pytest.mark.parametrize("path", _notebooks(), ids=lambda p: f"{p.parts[-3]}/{p.parent.name}")
def test_locked_and_graded_cells_are_marked_as_the_text_says(path):
    nb = json.loads(path.read_text())
    # the words, wherever the lines of the paragraph break
    text = " ".join(" ".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown").split())
    assert f"first line starts with `{LOCK}` are locked" in text
    assert f"marked `# {LOCK} Graded check` with the points" in text
    assert "\U0001F512" not in path.read_text(encoding="utf-8")
    points = {c["grade_id"]: c["points"] for c in graded_cells(path)}
    assert points
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        meta = cell["metadata"].get("nbgrader", {})
        first = "".join(cell["source"]).splitlines()[0]
        if meta.get("grade"):
            n = points[meta["grade_id"]]
            assert first == f"# {LOCK} Graded check, {n:g} point{'' if n == 1 else 's'}", first
            assert meta["points"] == n and meta["locked"]
        elif meta.get("locked"):
            assert first.startswith(f"# {LOCK} Set-up: "), first
        else:
            assert LOCK not in first, first


def test_self_check_lines_wrap_at_spaces(capsys):
    """The report's lines are at most 78 characters, broken between words only: the
    words of every message are all there, in order, none cut in two."""
    import torch

    from andrea_ref import grading
    from andrea_ref.grading import runner

    def unbiased(x, gamma, beta, eps=1e-5):
        m = x.mean(-1, keepdim=True)
        return gamma * (x - m) / torch.sqrt(x.var(-1, keepdim=True) + eps) + beta

    grading.report_layer_norm(unbiased)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(ln) for ln in lines) <= runner.REPORT_WIDTH, lines
    try:
        grading.check_layer_norm_normalises(unbiased)
    except AssertionError as exc:
        message = str(exc)
    assert message.split() == " ".join(
        ln for ln in lines if ln.startswith("      ") or "\u2717 normalisation" in ln
    ).split(": ", 1)[1].split()
    assert any(len(ln) > 70 for ln in lines) and len(lines) > len(message.splitlines()) + 5


@pytest.mark.parametrize("assignment", sorted(NOTEBOOKS))
def test_each_notebook_says_how_to_hand_in(assignment):
    nb = json.loads(NOTEBOOKS[assignment].read_text())
    last = "".join(nb["cells"][-1]["source"])
    assert last.startswith("## Hand in")
    for words in ("Restart Kernel and Run All Cells", "**Validate**", "Assignment List",
                  f"**Submit** next to `{assignment}`", "your instructor"):
        assert words in last, words
    guide = (REPO / "book" / "guide_learner.md").read_text()
    assert "Assignment List" in guide and "**Submit**" in guide


# ---------------------------------------------------------------------------
# The release's guard.

def test_committed_exercises_match_the_release_manifest():
    assert release.read_manifest(REPO) is not None
    assert release.edited_since_release(REPO) == []
    assert sorted(release.read_manifest(REPO)) == sorted(release.released_files(REPO))


@pytest.fixture
def course(tmp_path):
    """A copy of the course's release inputs and outputs, with the release script."""
    shutil.copy(REPO / "nbgrader_config.py", tmp_path)
    shutil.copy(REPO / "course.toml", tmp_path)
    shutil.copytree(REPO / "solutions", tmp_path / "solutions")
    shutil.copytree(REPO / "exercises", tmp_path / "exercises",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (tmp_path / "scripts").mkdir()
    for script in ("release.py", "release_state.py"):
        shutil.copy(REPO / "scripts" / script, tmp_path / "scripts")
    return tmp_path


def _release(course: Path, *args: str):
    return subprocess.run([sys.executable, str(course / "scripts" / "release.py"), *args], cwd=course,
                          env=_env(), capture_output=True, text=True, timeout=600)


def _edit_answer(path: Path) -> bytes:
    """Write an answer into the notebook and save it with outputs, as JupyterLab would."""
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = ["def gelu(x):\n", "    return x  # my answer\n"]
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["hi\n"]}]
    data = json.dumps(nb, indent=1).encode()
    path.write_bytes(data)
    return data


@pytest.mark.slow
def test_a_release_that_changes_nothing_touches_nothing_and_says_up_to_date(course):
    before = release.released_files(course)
    manifest = (course / "exercises" / release.MANIFEST).read_bytes()
    first = _release(course)  # records the assignments in the copy's own gradebook
    assert first.returncode == 0 and "exercises/ is up to date" in first.stdout, first.stdout + first.stderr
    # the released files, byte for byte, as they were
    assert release.released_files(course) == before
    assert (course / "exercises" / release.MANIFEST).read_bytes() == manifest
    files = sorted(p for p in course.rglob("*") if p.is_file())
    mtimes = {p: p.stat().st_mtime_ns for p in files}
    fingerprint = snapshot.code_digest(course)
    proc = _release(course)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "exercises/ is up to date" in proc.stdout and "Wrote" not in proc.stdout, proc.stdout
    assert sorted(p for p in course.rglob("*") if p.is_file()) == files  # nothing added or removed
    assert {p: p.stat().st_mtime_ns for p in files} == mtimes  # nothing rewritten, the gradebook included
    assert snapshot.code_digest(course) == fingerprint


@pytest.mark.slow
def test_a_release_replaces_only_what_changed(course):
    solution = course / "solutions" / "03_gelu" / "gelu.ipynb"
    nb = json.loads(solution.read_text())
    cell = next(c for c in nb["cells"] if c["cell_type"] == "markdown")
    cell["source"] = "".join(cell["source"]) + "\nOne more sentence.\n"
    solution.write_text(json.dumps(nb, indent=1))
    others = {p: p.stat().st_mtime_ns for p in (course / "exercises").rglob("*.ipynb") if p.parent.name != "03_gelu"}
    proc = _release(course)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"Wrote 1 of {len(load())} file(s) in exercises/ (03_gelu/gelu.ipynb)" in proc.stdout, proc.stdout
    assert "One more sentence." in (course / "exercises" / "03_gelu" / "gelu.ipynb").read_text()
    assert {p: p.stat().st_mtime_ns for p in others} == others
    assert release.edited_since_release(course) == []


@pytest.mark.slow
def test_release_refuses_to_overwrite_an_edited_notebook_and_force_overwrites_it(course):
    gelu = course / "exercises" / "03_gelu" / "gelu.ipynb"
    original = gelu.read_bytes()
    edited = _edit_answer(gelu)
    others = {n: d for n, d in release.released_files(course).items() if n != "03_gelu/gelu.ipynb"}
    manifest = (course / "exercises" / release.MANIFEST).read_bytes()

    proc = _release(course)
    assert proc.returncode == 1
    out = proc.stdout
    assert "exercises/03_gelu/gelu.ipynb" in out and "layernorm" not in out, out
    assert "cell gelu: -1 +" in out, out                 # which cell, how much
    assert "-    return x  # my answer" in out, out       # what would be lost
    assert "outputs of 1 cell(s) would be cleared" in out, out
    assert "FORCE=1" in out and "Nothing was written" in out, out
    assert gelu.read_bytes() == edited                   # nothing was touched
    assert {n: d for n, d in release.released_files(course).items() if n != "03_gelu/gelu.ipynb"} == others
    assert (course / "exercises" / release.MANIFEST).read_bytes() == manifest
    assert not (course / "gradebook.db").exists()

    proc = _release(course, "--force")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert gelu.read_bytes() == original
    assert release.edited_since_release(course) == []


def test_a_notebook_without_a_record_counts_as_edited(course):
    (course / "exercises" / "03_gelu" / "notes.ipynb").write_text("{}")
    assert release.edited_since_release(course) == ["03_gelu/notes.ipynb"]
    (course / "exercises" / release.MANIFEST).unlink()
    assert len(release.edited_since_release(course)) == len(NOTEBOOKS) + 1
    assert release.change_summary(b"{}", None) == [
        "not a notebook made from solutions/: the release would delete it"]


def test_make_release_passes_force():
    def dry(*args):
        return subprocess.run(["make", "-n", "release", *args], cwd=REPO,
                              capture_output=True, text=True, timeout=60).stdout

    assert "scripts/release.py --force" in dry("FORCE=1")
    plain = dry()
    assert "scripts/release.py" in plain and "--force" not in plain


# ---------------------------------------------------------------------------
# andrea_lab's small parts (the browser tests use them whole).

def test_chapter_links_move_to_an_edition_and_only_chapter_links():
    import andrea_lab
    link = andrea_lab.chapter_link("book/05_mlp_and_gelu", anchor="#gelu")
    assert link == "/hub/user-redirect/andrea-book/book/05_mlp_and_gelu.html#gelu"
    text = f"see [the chapter]({link}) and [a site](https://example.org/book/x.html)"
    de = andrea_lab.edition_links(text, "de")
    assert de == text.replace("/andrea-book/book/", "/andrea-book/de/book/")
    assert andrea_lab.edition_links(de, "ka") == text.replace("/andrea-book/book/", "/andrea-book/ka/book/")
    m = andrea_lab.CHAPTER_LINK.fullmatch(andrea_lab.chapter_link("book/01_welcome", "ka"))
    assert (m.group("lang"), m.group("page"), m.group("anchor")) == ("ka", "book/01_welcome", None)


def test_news_setting_is_written_once_and_the_learners_own_kept(tmp_path):
    from andrea_lab import launch
    launch.quiet_settings(tmp_path)
    path = tmp_path / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
    assert json.loads(path.read_text()) == {"fetchNews": "false", "checkForUpdates": False}
    path.write_text('{"fetchNews": "true"}')
    launch.quiet_settings(tmp_path)
    assert path.read_text() == '{"fetchNews": "true"}'


def test_root_gets_allow_root_and_a_warning(monkeypatch, capsys):
    from andrea_lab import launch
    monkeypatch.setattr(launch.os, "geteuid", lambda: 0)
    assert launch.root_arguments() == ["--allow-root"]
    assert capsys.readouterr().err.startswith("warning: running as root")
    monkeypatch.setattr(launch.os, "geteuid", lambda: 1000)
    assert launch.root_arguments() == [] and capsys.readouterr().err == ""


def test_validate_wraps_at_spaces_and_cuts_nothing():
    from andrea_lab.validate import wrap
    line = "Likely mistake: " + " ".join(f"word{i}" for i in range(40)) + " " + "x" * 70
    out = wrap(line + "\n  indented " + "y " * 30, 50, "    ")
    assert " ".join(out.split()) == " ".join((line + " indented " + "y " * 30).split())
    lines = out.splitlines()
    assert all(len(ln) <= 50 for ln in lines if "x" * 70 not in ln)
    assert all(ln.startswith("    ") for ln in lines)
