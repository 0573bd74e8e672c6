"""What an instructor runs before grading: the instructor edition and the grading command's
arguments.

- The instructor edition: every solution notebook executed, every graded test shown
  passing, the hidden tests visible, a language menu only where the site has other
  editions -- and a failing solution fails the build. Built with ``--only-solutions``
  (the solutions part alone, same configuration and checks as ``make instructor``) so
  the test does not rebuild every chapter.
- ``python -m classroom.grade``: every option with a bad value is refused before any
  work starts, in one line naming the option and what it needs (exit status 2, no
  traceback); a path that does not exist says so; ``--help`` shows every default.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from andrea_ref.grading.manifest import load
from classroom import instructor_book, scan
from classroom.isolation.bwrap import Limits
from classroom.orchestration import options

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture()
def out_dir(request):
    out = ROOT / "_build_instructor" / f"test-{request.node.name}"
    shutil.rmtree(out, ignore_errors=True)
    yield out
    shutil.rmtree(out, ignore_errors=True)


@pytest.mark.slow
def test_solutions_part_builds_with_tests_passing_and_hidden_tests_shown(out_dir):
    assert instructor_book.build(out_dir, only_solutions=True) == 0
    html_root = out_dir / "_build" / "html"
    hidden = scan.secret_lines(ROOT / "solutions", kinds=("HIDDEN TESTS",))
    solution = scan.secret_lines(ROOT / "solutions", kinds=("SOLUTION",))
    for nb in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        page = html_root / "_build_instructor" / out_dir.name / "solutions" / nb.parent.name / (nb.stem + ".html")
        if not page.is_file():  # jupyter-book names pages after their path in the book
            page = next(html_root.rglob(f"{nb.stem}.html"))
        text = html.unescape(scan.html_text(page.read_text()))
        graded = [c["metadata"]["nbgrader"] for c in json.loads(nb.read_text())["cells"]
                  if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
        assert graded
        for meta in graded:
            assert f"PASSED {meta['grade_id']} ({meta['points']:g} points)" in text, (page, meta["grade_id"])
        src = "".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"])
        assert any(h in scan.normalise(text) for h in hidden if h in src), page
        assert any(s in scan.normalise(text) for s in solution if s in src), page
    # the learner's files are untouched
    assert not (ROOT / "_build" / "html" / "_build_instructor").exists()
    # one edition: no language menu, no link to an edition this site does not have
    for page in html_root.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "andrea-language-menu" not in text and 'hreflang="de"' not in text, page
        assert not re.search(r'href="(\.\./)*(de|ka)/', text), page


@pytest.mark.slow
def test_failing_solution_fails_the_build(out_dir, tmp_path):
    broken = tmp_path / "solutions"
    shutil.copytree(ROOT / "solutions", broken)
    nb_path = broken / "03_gelu" / "gelu.ipynb"
    nb = json.loads(nb_path.read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if "### BEGIN SOLUTION" in src and "def gelu" in src:
            # the exact erf form: the graded value check must fail
            cell["source"] = ("def gelu(x):\n    ### BEGIN SOLUTION\n"
                              "    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2.0)))\n"
                              "    ### END SOLUTION\n")
    nb_path.write_text(json.dumps(nb))
    for other in load().names:
        if other != "03_gelu":
            shutil.rmtree(broken / other)  # one notebook is enough to show it
    assert instructor_book.build(out_dir, solutions=broken, only_solutions=True) != 0


# --------------------------------------------------------------------------- the grading command
def _grade(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "classroom.grade", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture()
def class_folder(tmp_path):
    folder = tmp_path / "class"
    (folder / "alice").mkdir(parents=True)
    (folder / "alice" / "gelu.ipynb").write_text((ROOT / "exercises" / "03_gelu" / "gelu.ipynb").read_text())
    return folder


BAD_VALUES = [
    ("--workers", "0", "positive"), ("--workers", "two", "invalid int"), ("--workers", "600", "at most 499"),
    ("--memory", "1", "did you mean 1G"), ("--memory", "512M", "at least 1G"), ("--memory", "lots", "size"),
    ("--grader-memory", "200M", "at least 1G"), ("--max-output", "1k", "at least 64K"),
    ("--processes", "4", "at least 32"), ("--processes", "-1", "positive"), ("--cpu", "5", "at least 30"),
    ("--deadline", "5", "at least 30"), ("--deadline", "soon", "invalid float"), ("--timeout", "1", "at least 5"),
    ("--uid-base", "0", "between 1000"), ("--lease", "1", "between 5"), ("--lease", "later", "invalid float"),
]


@pytest.mark.parametrize("option,value,expected", BAD_VALUES, ids=[f"{o}={v}" for o, v, _ in BAD_VALUES])
def test_a_bad_value_is_refused_in_one_line_before_any_work(class_folder, tmp_path, option, value, expected):
    out = tmp_path / "out"
    t0 = time.monotonic()
    r = _grade(class_folder, "--out", out, option, value)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert option in lines[0] and expected in lines[0], lines[0]
    assert "Traceback" not in r.stderr + r.stdout and not r.stdout
    assert not out.exists()  # nothing was copied, generated or graded
    assert time.monotonic() - t0 < 60


def test_memory_too_small_names_the_option_not_the_machine(class_folder, tmp_path):
    r = _grade(class_folder, "--out", tmp_path / "out", "--memory", "1")
    assert "--memory" in r.stderr and "cannot isolate" not in r.stderr and "machine" not in r.stderr
    assert f"at least {options.size_text(options.MIN_MEMORY)}" in r.stderr


def test_paths_that_do_not_work_say_why(class_folder, tmp_path):
    missing = tmp_path / "no-such-class"
    r = _grade(missing, "--out", tmp_path / "out")
    assert r.returncode == 2 and r.stderr.strip() == f"error: SUBMISSIONS: no such folder or zip: {missing} (see --help)"
    text = tmp_path / "class.txt"
    text.write_text("not a zip")
    r = _grade(text, "--out", tmp_path / "out")
    assert r.returncode == 2 and "not a folder or a zip file" in r.stderr and len(r.stderr.splitlines()) == 1
    a_file = tmp_path / "out.txt"
    a_file.write_text("")
    r = _grade(class_folder, "--out", a_file)
    assert r.returncode == 2 and "--out" in r.stderr and "is a file" in r.stderr
    r = _grade(class_folder, "--out", class_folder / "graded")
    assert r.returncode == 2 and "--out" in r.stderr and "inside the submissions" in r.stderr
    assert not (class_folder / "graded").exists()
    # a folder that permission allows but the file system refuses (procfs takes no new folder,
    # even from root): refused up front too, not from inside the run
    r = _grade(class_folder, "--out", "/proc/andrea-out")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: --out: "), r.stderr
    assert "/proc takes no new folder" in lines[0] and "expected a folder on a writable file system" in lines[0]
    assert "Traceback" not in r.stderr and not r.stdout
    before = sorted(tmp_path.iterdir())
    assert options.check_out(tmp_path / "new" / "out") == tmp_path / "new" / "out"
    assert sorted(tmp_path.iterdir()) == before  # the check made nothing and left nothing
    good_zip = tmp_path / "class.zip"
    with zipfile.ZipFile(good_zip, "w") as z:
        z.write(class_folder / "alice" / "gelu.ipynb", "alice/gelu.ipynb")
    assert options.check_source(good_zip) == good_zip


def test_run_checks_its_options_too(tmp_path):
    from classroom import orchestration
    with pytest.raises(options.OptionError, match="--memory"):
        orchestration.run(tmp_path, out=tmp_path / "out", limits=Limits(memory=1 << 20), log=lambda *a: None)
    with pytest.raises(options.OptionError, match="no such folder or zip"):
        orchestration.run(tmp_path / "nothing", out=tmp_path / "out", log=lambda *a: None)


def test_help_shows_every_default():
    r = _grade("--help")
    assert r.returncode == 0
    helps = re.split(r"\n  (?=-)", r.stdout.split("options:", 1)[1])
    for option in ("--workers", "--db", "--out", "--timeout", "--deadline", "--memory", "--processes", "--cpu",
                   "--grader-memory", "--max-output", "--uid-base", "--lease", "--force", "--no-zygote",
                   "--no-progress"):
        text = " ".join(next(h for h in helps if h.startswith(option)).split())
        assert "default" in text, text
