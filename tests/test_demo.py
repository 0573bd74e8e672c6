"""`make demo`, as the README and the instructor guide tell an instructor to run it first,
in a clean clone of the repository: a small class written from the released notebooks and
graded by the real grader, with every learner's outcome as the demo's docstring
(classroom/demo.py) promises, and the pages it tells the instructor to open present.

The clone is ``git clone`` of this checkout's HEAD, so nothing git ignores (``_build/``,
``book/_vendor/``, ``gradebook.db``) comes from the working checkout: what the demo needs
of those, ``make demo`` makes itself (MathJax for Node, through npm, as on a fresh
machine). Two things are taken as they are, and ``make`` is told so (``-o``): the course's
virtual environment, a symlink ``.venv`` to this checkout's (installing it again would
install into this checkout's environment through the link), and the machine's Debian
packages (``make sysdeps``: the machine's, not the checkout's). The environment's ``.pth``
file points at this checkout, but ``python -m`` and ``python -c``, run from the clone's
root, put the clone first: the test checks that the clone's ``classroom`` and
``andrea_ref`` are the ones imported.

The clone lies in a folder of its own below /tmp, mode 755 (pytest's temporary folders
are root's only), where the sandbox's unprivileged uids reach the grader code it shows
them. The demo grades into a temporary folder (``OUT=``); its sandboxes run under uids
from ``ANDREA_UID_BASE`` like every grading test.
"""
from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def clone():
    """A clean clone of this checkout's HEAD, with this checkout's virtual environment."""
    base = Path(tempfile.mkdtemp(prefix="andrea-demo-clone-"))
    os.chmod(base, 0o755)
    try:
        head = _git("rev-parse", "HEAD")
        repo = base / "andrea-block-lab"
        _git("clone", "--quiet", "--no-checkout", str(ROOT), str(repo), cwd=base)
        _git("checkout", "--quiet", "--detach", head, cwd=repo)
        assert not _git("status", "--porcelain", "--ignored", cwd=repo), "the clone is not clean"
        (repo / ".venv").symlink_to(ROOT / ".venv")
        yield repo
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def demo(clone, tmp_path_factory):
    where = subprocess.run([".venv/bin/python", "-c", "import classroom, andrea_ref; "
                            "print(classroom.__file__); print(andrea_ref.__file__)"],
                           cwd=clone, capture_output=True, text=True, check=True).stdout.split()
    assert all(Path(p).is_relative_to(clone) for p in where), where  # the clone's code, not this checkout's
    out = tmp_path_factory.mktemp("demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDREA_LANG")}
    r = subprocess.run(["make", "-s", "-o", ".venv/.installed", "-o", "sysdeps", "demo", f"OUT={out}"],
                       cwd=clone, env=env, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (clone / "book" / "_vendor" / "node" / "node_modules" / "mathjax-full").is_dir()  # made by make demo
    rows = {}
    with open(out / "grading" / "report.csv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            rows[row["student"], row["assignment"]] = row
    return {"out": out, "stdout": r.stdout, "rows": rows, "clone": clone}


def test_every_learner_gets_what_the_demo_promises(demo):
    rows = demo["rows"]
    score = {k: float(r["score"]) for k, r in rows.items()}
    assert score["ada", "02_layernorm"] == score["ada", "03_gelu"] == 10.0
    assert 0 < score["ben", "02_layernorm"] < 10 and 0 < score["ben", "03_gelu"] < 10  # one property each
    assert rows["cleo", "02_layernorm"]["status"] == rows["cleo", "03_gelu"]["status"] == "untouched"
    assert score["dan", "02_layernorm"] == 10.0 and rows["dan", "03_gelu"]["status"] == "not submitted"
    # the hostile learner's notebook claimed full marks: no points, and the instructor is told
    assert score["eve", "03_gelu"] == 0.0
    assert rows["eve", "03_gelu"]["status"] in ("tampering suspected", "held for review")
    assert {rows["fay", a]["status"] for a in ("02_layernorm", "03_gelu")} == {"not submitted"}


def test_it_says_what_to_open_and_those_pages_exist(demo):
    shown = re.findall(r"^\s+[a-z' ]+:\s+(\S+\.html)$", demo["stdout"], re.M)
    assert any(p.endswith("report.html") for p in shown), demo["stdout"][-2000:]
    for page in shown:
        assert Path(page).is_file(), page
    html = (demo["out"] / "grading" / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html.lower()  # the class view runs nothing, the hostile markup included
