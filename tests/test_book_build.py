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
    chapters = toc.get("chapters") or [c for part in toc["parts"] for c in part["chapters"]]
    return [toc["root"]] + [c["file"] for c in chapters]


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
    from IPython.core.inputtransformer2 import TransformerManager
    import andrea_book as ext
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


# What a reader sees of the book's own machinery: the calls that draw a figure in every
# language, paste a computed number into the text, or show an output are build plumbing,
# and live in cells whose code is hidden (remove-cell, remove-input) or folded (hide-input).
PLUMBING = re.compile(r"\b(?:glue|localised|display|translator)\s*\(|\bmyst_nb\b|\bandrea_ref\.i18n\b")
HIDDEN_TAGS = {"remove-cell", "remove-input", "hide-input", "hide-cell"}


def test_no_plumbing_in_visible_code():
    import jupytext
    problems = []
    for path in sorted((ROOT / "book").glob("*.md")):
        for n, cell in enumerate(jupytext.read(path).cells, 1):
            if cell.cell_type != "code" or HIDDEN_TAGS & set(cell.metadata.get("tags", [])):
                continue
            problems += [f"{path.name}, code cell {n}: {line.strip()}"
                         for line in cell.source.splitlines() if PLUMBING.search(line)]
    assert not problems, "build plumbing in code a reader sees (hide the cell):\n" + "\n".join(problems)


def test_every_diagram_and_figure_directive_has_alt_text():
    """Graphviz diagrams and {figure}/{image} directives carry :alt: (a diagram without
    one would fall back to its DOT source)."""
    problems, diagrams = [], 0
    for path in sorted((ROOT / "book").glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^(```+|:::+)\{(graphviz|figure|image)\}[^\n]*\n((?::[^\n]*\n)*)", text, re.M):
            diagrams += m.group(2) == "graphviz"
            if not re.search(r"^:alt: \S.{30,}$", m.group(3), re.M):
                line = text[:m.start()].count("\n") + 1
                problems.append(f"{path.name}:{line}: {m.group(2)} without an alt text of a sentence or more")
    assert diagrams >= 5
    assert not problems, "\n".join(problems)


def _book_extension():
    import andrea_book
    return andrea_book


def test_mime_renderer_is_registered_through_the_entry_point():
    """MyST-NB finds the renderer of per-language outputs through its entry point group
    (the course package's metadata), and the book's extension leaves MyST-NB's loader alone."""
    from importlib.metadata import entry_points

    from myst_nb.core import render
    from andrea_ref.book_outputs import LocalisedOutputs
    found = [ep for ep in entry_points(group="myst_nb.mime_renderers") if ep.name == "andrea_translations"]
    assert [ep.value for ep in found] == ["andrea_ref.book_outputs:LocalisedOutputs"], \
        "the course package is not installed with its entry points (make venv)"
    assert found[0].load() is LocalisedOutputs
    loader = render.load_mime_renders
    _book_extension()
    assert render.load_mime_renders is loader and not getattr(loader, "andrea_wrapped", False)
    assert LocalisedOutputs in render.load_mime_renders()


def test_glue_patch_refuses_an_untested_myst_nb():
    from importlib.metadata import version

    from sphinx.errors import ExtensionError
    glue = _book_extension().glue
    assert version("myst-nb") in glue.TESTED_MYST_NB
    glue.check_myst_nb_version()  # the installed one is tested: no error
    with pytest.raises(ExtensionError, match=r"MyST-NB 9\.9\.9 is installed.*tested only with MyST-NB"):
        glue.check_myst_nb_version("9.9.9")
    pinned = re.search(r"^myst-nb==(\S+)$", (ROOT / "requirements.txt").read_text(), re.M)
    assert pinned and pinned.group(1) in glue.TESTED_MYST_NB, "requirements.txt must pin a tested MyST-NB"


def test_long_names_break_only_between_their_parts(tmp_path):
    layout = _book_extension().layout
    assert layout.break_points("andrea_ref.grading.check_layer_norm") == \
        ["andrea", "_ref", ".grading", ".check", "_layer", "_norm"]
    assert layout.break_points("book/_ext/andrea_book") == ["book/", "_ext/", "andrea", "_book"]
    assert layout.break_points("submitted/<student>/<notebook>.ipynb") == \
        ["submitted/", "<student>/", "<notebook>", ".ipynb"]
    assert layout.break_points("python -m classroom.grade") == ["python -m classroom", ".grade"]
    assert layout.break_points("layer_norm") == ["layer_norm"]  # short: as it is
    assert "".join(layout.break_points("a.b_c/d" * 4)) == "a.b_c/d" * 4
    wide, narrow = tmp_path / "wide.svg", tmp_path / "narrow.svg"
    wide.write_text('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="720pt" height="288pt">')
    narrow.write_text('<svg width="460.8pt" height="345.6pt" viewBox="0 0 1 1">')
    assert layout.svg_aspect(wide) == 2.5 and layout.svg_aspect(narrow) < layout.WIDE_RATIO
    assert layout.svg_aspect(tmp_path / "missing.svg") is None


def test_diagrams_are_named_by_their_alt_text():
    figures = _book_extension().figures
    page = ('<div class="graphviz"><object data="../_images/graphviz-1.svg" type="image/svg+xml" '
            'class="graphviz align-center">\n<p class="warning">Two boxes &amp; an arrow</p></object></div>')
    named = figures.name_diagrams(page)
    assert 'role="img" aria-label="Two boxes &amp; an arrow">' in named
    assert named.endswith('<p class="warning">Two boxes &amp; an arrow</p></object></div>')
    assert figures.name_diagrams("<p>no diagram</p>") == "<p>no diagram</p>"


def test_bibliography_entries_are_list_items():
    """Docutils' deprecated role doc-biblioentry becomes listitem, so that the bibliography's
    role="list" holds items; the built references page of every edition has no other."""
    bibliography = _book_extension().bibliography
    page = ('<div role="list" class="citation-list">\n<div class="citation" id="id3" role="doc-biblioentry">\n'
            '<span class="label">[Ba et al., 2016]</span><p>doc-biblioentry in a sentence</p>\n</div>\n</div>')
    listed = bibliography.entries_as_list_items(page)
    assert '<div class="citation" id="id3" role="listitem">' in listed
    assert "<p>doc-biblioentry in a sentence</p>" in listed
    _require_build()
    for edition in ("", "de/", "ka/"):
        html = (HTML / edition / "book" / "references.html").read_text(encoding="utf-8")
        entries = re.findall(r'<div class="citation"[^>]*>', html)
        assert len(entries) >= 10, f"{edition}book/references.html: {len(entries)} entries"
        assert all('role="listitem"' in e for e in entries), entries[:3]


def test_colour_mode_switch_shows_no_text_its_name_leaves_out():
    """The theme's colour-mode switch (book/_templates/theme-switcher.html) is named by its
    aria-label; its icons are decorative, so no icon title is text inside it."""
    _require_build()
    for edition in ("", "de/", "ka/"):
        html = (HTML / edition / "book" / "01_welcome.html").read_text(encoding="utf-8")
        button = re.search(r'<button[^>]*theme-switch-button[^>]*aria-label="([^"]+)"[^>]*>(.*?)</button>', html, re.S)
        assert button, f"{edition}: no colour-mode switch"
        icons = re.findall(r"<i [^>]*>", button.group(2))
        assert len(icons) == 3 and all('aria-hidden="true"' in i and "title=" not in i for i in icons), icons
