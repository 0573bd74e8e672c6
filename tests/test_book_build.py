"""The book's sources and its last build (`make test` runs `make book` first).

Checks that need no browser: every chapter is an executable notebook, the build in
_build/html is complete and current, no cell failed, math and notebooks are served
from the book itself, and the cache key of scripts/build_book.py reacts to changes
in the code the chapters import.
"""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
EXEC = ROOT / "_build" / "jupyter_execute"


def _toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [toc["root"]] + [c["file"] for c in toc["chapters"]]


def _build_script():
    spec = importlib.util.spec_from_file_location("build_book", ROOT / "scripts" / "build_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _require_build():
    if not (HTML / "index.html").is_file():
        pytest.fail("_build/html is missing: build the book first (make book)")


def test_chapters_are_executable_notebooks():
    """A chapter without the jupytext header is read as plain markdown and its code
    cells are silently not executed."""
    for name in _toc_files():
        text = (ROOT / f"{name}.md").read_text()
        has_code = "```{code-cell}" in text
        if has_code:
            assert text.startswith("---\njupytext:"), f"{name}.md has code cells but no jupytext header"
            assert "format_name: myst" in text and "name: python3" in text, name


def test_every_page_was_built():
    _require_build()
    for name in _toc_files():
        assert (HTML / f"{name}.html").is_file(), f"{name}.html missing from _build/html"
    assert (HTML / "search.html").is_file() and (HTML / "searchindex.js").is_file()


def test_no_cell_failed():
    _require_build()
    reports = HTML / "reports"
    left = sorted(p.name for p in reports.rglob("*") if p.is_file()) if reports.is_dir() else []
    assert not left, f"cell failure reports in _build/html/reports: {left}"
    for name in _toc_files():
        if "```{code-cell}" not in (ROOT / f"{name}.md").read_text():
            continue
        nb_path = EXEC / f"{name}.ipynb"
        assert nb_path.is_file(), f"{name} was not executed"
        nb = json.loads(nb_path.read_text())
        for cell in nb["cells"]:
            for out in cell.get("outputs", []):
                assert out.get("output_type") != "error", f"{name}: a cell raised {out.get('ename')}"


def test_build_is_current():
    """The build records the hash of what the chapters import; it must match the
    sources now, or the pages may show output of older code."""
    _require_build()
    recorded = (ROOT / "_build" / ".andrea_inputs.sha256")
    assert recorded.is_file(), "no successful build recorded: run make book"
    assert recorded.read_text().strip() == _build_script().inputs_hash(), \
        "andrea_ref/, cuda/ or exercises/ changed since the last build: run make book"


def test_math_and_figures_are_served_locally():
    _require_build()
    mathjax = HTML / "_static" / "mathjax" / "tex-chtml.js"
    assert mathjax.is_file() and mathjax.stat().st_size > 100_000
    assert (HTML / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2").is_dir()
    for page in HTML.rglob("*.html"):
        if "reports" in page.parts or "_static" in page.parts:
            continue
        text = page.read_text()
        for src in re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="([^"]+)"', text):
            assert "://" not in src, f"{page.relative_to(HTML)} loads {src} from the network"


def test_no_launch_buttons():
    _require_build()
    for name in _toc_files():
        text = (HTML / f"{name}.html").read_text()
        for word in ("colab.research", "mybinder", "launch-buttons", "thebe-launch"):
            assert word not in text, f"{name}.html has a launch button ({word})"


def test_released_notebooks_are_linked_and_served():
    _require_build()
    released = sorted(p.relative_to(ROOT / "exercises").as_posix()
                      for p in (ROOT / "exercises").glob("*/*.ipynb"))
    page = (HTML / "book" / "08_exercises.html").read_text()
    for rel in released:
        assert f"../notebooks/{rel}" in page, f"the exercises chapter does not link {rel}"
        served = HTML / "notebooks" / rel
        assert served.is_file(), f"{rel} is not in _build/html/notebooks"
        assert served.read_bytes() == (ROOT / "exercises" / rel).read_bytes()


def test_cache_key_follows_the_imported_code(tmp_path, monkeypatch):
    bb = _build_script()
    for d in ("andrea_ref", "cuda", "exercises/01_x", "book"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "andrea_ref" / "mod.py").write_text("A = 1\n")
    (tmp_path / "cuda" / "k.cu").write_text("// kernel\n")
    (tmp_path / "exercises" / "01_x" / "x.ipynb").write_text("{}\n")
    (tmp_path / "_config.yml").write_text("title: t\n")
    monkeypatch.setattr(bb, "ROOT", tmp_path)
    base = bb.inputs_hash()
    assert bb.inputs_hash() == base  # stable

    (tmp_path / "andrea_ref" / "__pycache__").mkdir()
    (tmp_path / "andrea_ref" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    assert bb.inputs_hash() == base  # bytecode does not count

    for path, new in ((tmp_path / "andrea_ref" / "mod.py", "A = 2\n"),
                      (tmp_path / "cuda" / "k.cu", "// kernel v2\n"),
                      (tmp_path / "exercises" / "01_x" / "x.ipynb", '{"cells": []}\n'),
                      (tmp_path / "_config.yml", "title: u\n")):
        old = path.read_text()
        path.write_text(new)
        assert bb.inputs_hash() != base, f"changing {path.name} must invalidate the cache"
        path.write_text(old)
        assert bb.inputs_hash() == base
    (tmp_path / "cuda" / "results").mkdir()
    (tmp_path / "cuda" / "results" / "h100.json").write_text("{}")
    assert bb.inputs_hash() != base, "a new GPU result file must invalidate the cache"


def _setup_cell_code(repository_url: str) -> str:
    """The downloaded chapters' set-up cell, as IPython would run it (magics translated)."""
    import importlib.util as iu

    from IPython.core.inputtransformer2 import TransformerManager
    spec = iu.spec_from_file_location("andrea_book", ROOT / "book" / "_ext" / "andrea_book.py")
    ext = iu.module_from_spec(spec)
    spec.loader.exec_module(ext)
    return TransformerManager().transform_cell("".join(ext.setup_cell(repository_url)["source"]))


def test_downloaded_chapter_setup_cell(monkeypatch):
    """In the course's environment the cell installs nothing; without the course package
    it installs it from the repository when the address is set, and otherwise says how
    to install it."""
    import importlib.util

    calls = []

    class Shell:
        def run_line_magic(self, name, line):
            calls.append((name, line))

    code = _setup_cell_code("https://github.com/example/block-lab/")
    exec(code, {"get_ipython": Shell})
    assert calls == []                                   # everything is there: nothing to do

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "andrea_ref" else real(name, *a))
    exec(code, {"get_ipython": Shell})
    assert calls == [("pip", "install --quiet 'andrea-block-lab @ git+https://github.com/example/block-lab'")]
    with pytest.raises(ImportError, match="learner's kit"):
        exec(_setup_cell_code(""), {"get_ipython": Shell})
