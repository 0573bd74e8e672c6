"""The learner edition (the built book and exercises/) holds no solution code and no
hidden test; the scan that proves it does find a leak when there is one."""
from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest

from classroom import scan

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"


@pytest.fixture(scope="module")
def secrets():
    found = scan.secret_lines(ROOT / "solutions")
    kinds = {origin.rsplit("(", 1)[1] for origin in found.values()}
    assert {"solution)", "hidden tests)"} <= kinds
    # every assignment contributes lines
    assert {origin.split("/")[0] for origin in found.values()} == {p.name for p in (ROOT / "solutions").iterdir()
                                                                     if p.is_dir()}
    return found


def test_exercises_hold_no_secret(secrets):
    notebooks = sorted((ROOT / "exercises").rglob("*.ipynb"))
    assert len(notebooks) >= 4
    assert scan.scan(notebooks, secrets) == {}


def test_learner_book_holds_no_secret(secrets):
    if not (HTML / "index.html").is_file():
        pytest.skip("the learner book is not built: `make book` builds it (make test does so first)")
    pages = list(HTML.rglob("*.html"))
    assert len(pages) >= 5
    assert scan.scan([HTML], secrets) == {}


def test_scan_catches_highlighted_leak(secrets, tmp_path):
    """A solution line split by syntax-highlighting spans, entities and all, is found."""
    line = next(s for s, origin in secrets.items() if "(solution)" in origin and "=" in s)
    tokens = line.split(" ")
    code = " ".join(f'<span class="n">{html.escape(t)}</span>' for t in tokens)
    page = tmp_path / "leak.html"
    page.write_text(f"<html><body><div class='highlight'><pre>{code}\n</pre></div></body></html>")
    assert scan.scan([tmp_path], secrets) == {str(page): [line]}


def test_scan_catches_leak_in_notebook(secrets, tmp_path):
    hidden = next(s for s, origin in secrets.items() if "(hidden tests)" in origin)
    src = ROOT / "exercises" / "03_gelu" / "gelu.ipynb"
    nb = json.loads(src.read_text())
    nb["cells"][-1]["source"] = ["# an accidental copy\n", f"    {hidden}\n"]
    bad = tmp_path / "gelu.ipynb"
    bad.write_text(json.dumps(nb))
    clean = tmp_path / "clean"
    clean.mkdir()
    shutil.copy(src, clean / "gelu.ipynb")
    assert scan.scan([clean], secrets) == {}
    assert scan.scan([bad], secrets) == {str(bad): [hidden]}


def test_trivial_lines_are_not_secrets(tmp_path):
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": [
        "def f(x):\n", "    ### BEGIN SOLUTION\n", "    y = x\n", "    return y\n",
        "    z = torch.tanh(x) * 0.5 + 3\n", "    ### END SOLUTION\n"]}]}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "n.ipynb").write_text(json.dumps(nb))
    assert list(scan.secret_lines(tmp_path)) == ["z = torch.tanh(x) * 0.5 + 3"]


def test_lines_of_the_reference_package_are_not_secrets(tmp_path):
    """A solution line the learner's own copy of andrea_ref holds gives nothing away."""
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": [
        "def f(x):\n", "    ### BEGIN SOLUTION\n", "    with torch.no_grad():\n",
        "        z = torch.tanh(x) * 0.5 + 3\n", "    ### END SOLUTION\n"]}]}
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "n.ipynb").write_text(json.dumps(nb))
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "m.py").write_text("def g(x):\n    with  torch.no_grad():\n        return x\n")
    assert list(scan.secret_lines(tmp_path, public=pkg)) == ["z = torch.tanh(x) * 0.5 + 3"]
    assert list(scan.secret_lines(tmp_path, public=tmp_path / "none")) == [
        "with torch.no_grad():", "z = torch.tanh(x) * 0.5 + 3"]
