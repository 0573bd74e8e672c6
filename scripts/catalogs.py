"""Bring every translation catalog up to date with the English text (``make catalogs``).

1. Extract the English messages into templates (.pot):
   - the book's prose, with Sphinx's gettext builder -> _build/gettext/book/*.pot
   - the graded notebooks' markdown, one template per assignment
     (classroom/notebook_i18n.py) -> _build/gettext/notebooks/*.pot
   - the course package's own words (grading messages, marked ``_("...")`` or
     ``N_("...")`` in andrea_ref/) -> _build/gettext-package/grading.pot, and the
     labels of the book's figures and tables (``_("...")`` in the chapters' code cells
     and ``label="..."`` in their Graphviz diagrams) -> _build/gettext-package/figures.pot
2. Merge them into the catalogs with sphinx-intl: book/locales/<lang>/LC_MESSAGES/
   (book/ and notebooks/) and andrea_ref/locales/<lang>/LC_MESSAGES/. New messages
   arrive untranslated, changed ones arrive marked fuzzy with the old translation as
   a suggestion, and removed ones are dropped.

Then translate what is empty or fuzzy (and drop the fuzzy flag), and check with
``python scripts/i18n_check.py`` (part of ``make test``).

Usage: python scripts/catalogs.py [--extract-only]
"""
from __future__ import annotations

import argparse
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

POT_DIR = ROOT / "_build" / "gettext"
PACKAGE_POT_DIR = ROOT / "_build" / "gettext-package"
from book_edition import EDITIONS  # noqa: E402

TRANSLATED = EDITIONS[1:]
KEYWORDS = {"_": None, "N_": None}
_GRAPHVIZ_BLOCK = re.compile(r"^```\{graphviz\}[^\n]*\n(.*?)^```", re.S | re.M)
_GRAPHVIZ_LABEL = re.compile(r'label="((?:[^"\\]|\\.)*)"')


def graphviz_labels(text: str) -> list[str]:
    """The quoted labels of every Graphviz diagram in a chapter that have words in them."""
    labels = []
    for block in _GRAPHVIZ_BLOCK.finditer(text):
        for m in _GRAPHVIZ_LABEL.finditer(block.group(1)):
            label = m.group(1).strip()
            if re.search(r"[A-Za-z]{2}", label):
                labels.append(label)
    return labels


def _python_messages(code: str, filename: str):
    from babel.messages.extract import extract_python
    for lineno, _funcname, message, _comments in extract_python(io.BytesIO(code.encode()), KEYWORDS, [], {}):
        if isinstance(message, str) and message:
            yield message, (filename, lineno)


def _write_pot(path: Path, messages) -> int:
    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po
    catalog = Catalog(project="ANDREA Block Lab", charset="utf-8")
    for message, location in messages:
        catalog.add(message, locations=[location] if location else ())
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    write_po(buf, catalog, width=0, omit_header=False, no_location=True, sort_output=True)
    path.write_bytes(buf.getvalue())
    return len(catalog)


def package_messages():
    """Messages marked in the course package's Python code (grading checks and their report)."""
    for py in sorted((ROOT / "andrea_ref").rglob("*.py")):
        if "__pycache__" in py.parts:
            continue
        yield from _python_messages(py.read_text(encoding="utf-8"), str(py.relative_to(ROOT)))


def figure_messages():
    """Labels the book's chapters draw: ``_("...")`` in code cells, Graphviz labels."""
    import jupytext
    for md in sorted((ROOT / "book").glob("*.md")):
        text = md.read_text(encoding="utf-8")
        rel = str(md.relative_to(ROOT))
        if text.startswith("---") and "jupytext" in text.split("---", 2)[1]:
            nb = jupytext.reads(text, fmt="md:myst")
            for cell in nb.cells:
                if cell.cell_type == "code":
                    yield from _python_messages(cell.source, rel)
        for label in graphviz_labels(text):
            yield label, (rel, None)


def extract() -> None:
    shutil.rmtree(POT_DIR, ignore_errors=True)
    shutil.rmtree(PACKAGE_POT_DIR, ignore_errors=True)
    rc = subprocess.run([sys.executable, str(ROOT / "scripts" / "book_edition.py"),
                         "gettext", "en", str(POT_DIR)]).returncode
    if rc:
        sys.exit(f"[catalogs] the book's gettext build failed (exit {rc})")
    from classroom import notebook_i18n
    for assignment, messages in notebook_i18n.extract_all(ROOT / "solutions").items():
        _write_pot(POT_DIR / "notebooks" / f"{assignment}.pot", ((m, None) for m in messages))
    n_grading = _write_pot(PACKAGE_POT_DIR / "grading.pot", package_messages())
    n_figures = _write_pot(PACKAGE_POT_DIR / "figures.pot", figure_messages())
    print(f"[catalogs] templates: {sum(1 for _ in POT_DIR.rglob('*.pot'))} in {POT_DIR.relative_to(ROOT)}, "
          f"grading.pot ({n_grading}) and figures.pot ({n_figures}) in {PACKAGE_POT_DIR.relative_to(ROOT)}")


def update() -> None:
    intl = Path(sys.executable).with_name("sphinx-intl")
    for pots, locales in ((POT_DIR, ROOT / "book" / "locales"),
                          (PACKAGE_POT_DIR, ROOT / "andrea_ref" / "locales")):
        cmd = [str(intl), "update", "-p", str(pots), "-d", str(locales), "-w", "0"]
        for lang in TRANSLATED:
            cmd += ["-l", lang]
        subprocess.run(cmd, check=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extract-only", action="store_true", help="write the templates, leave the catalogs")
    args = parser.parse_args(argv)
    extract()
    if not args.extract_only:
        update()
    return 0


if __name__ == "__main__":
    sys.exit(main())
