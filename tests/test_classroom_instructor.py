"""The instructor edition: every solution notebook executed, every graded test shown
passing, the hidden tests visible -- and a failing solution fails the build.

Built with ``--only-solutions`` (the solutions part alone, same configuration and
checks as ``make instructor``) so the test does not rebuild every chapter.
"""
from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest

from classroom import instructor_book, scan

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


@pytest.fixture()
def out_dir(request):
    out = ROOT / "_build_instructor" / f"test-{request.node.name}"
    shutil.rmtree(out, ignore_errors=True)
    yield out
    shutil.rmtree(out, ignore_errors=True)


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


def test_failing_solution_fails_the_build(out_dir, tmp_path):
    broken = tmp_path / "solutions"
    shutil.copytree(ROOT / "solutions", broken)
    nb_path = broken / "02_gelu" / "gelu.ipynb"
    nb = json.loads(nb_path.read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if "### BEGIN SOLUTION" in src and "def gelu" in src:
            # the exact erf form: the graded value check must fail
            cell["source"] = ("def gelu(x):\n    ### BEGIN SOLUTION\n"
                              "    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2.0)))\n"
                              "    ### END SOLUTION\n")
    nb_path.write_text(json.dumps(nb))
    for other in ("01_layernorm", "03_mlp", "04_block"):
        shutil.rmtree(broken / other)  # one notebook is enough to show it
    assert instructor_book.build(out_dir, solutions=broken, only_solutions=True) != 0
