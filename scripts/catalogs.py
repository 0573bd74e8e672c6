"""Bring every translation catalog up to date with the English text (``make catalogs``).

1. Extract the English messages into templates (.pot):
   - the book's prose, with Sphinx's gettext builder -> _build/gettext/book/*.pot
   - the graded notebooks' markdown, one template per assignment
     (classroom/notebook_i18n.py) -> _build/gettext/notebooks/*.pot
   - the course package's own words (grading messages, marked ``_("...")`` or
     ``N_("...")`` in andrea_ref/, and what feedback pages say, in classroom/)
     -> _build/gettext-package/grading.pot, and the
     labels of the book's figures and tables (``_("...")`` in the chapters' code cells
     and ``label="..."`` in their Graphviz diagrams) -> _build/gettext-package/figures.pot
2. Merge them into the catalogs with sphinx-intl: book/locales/<lang>/LC_MESSAGES/
   (book/ and notebooks/) and andrea_ref/locales/<lang>/LC_MESSAGES/. New messages
   arrive untranslated, changed ones arrive marked fuzzy with the old translation as
   a suggestion, and removed ones are dropped.

3. Fill every catalog's header (project, language, team) and write a translator note
   (``#.``) above every message with placeholders, saying what each one is: a
   ``{glue}`` number computed at build time, a glossary link, a citation, a
   ``str.format`` field filled in when the message is shown. The notes go into the
   templates too, so that a later update keeps them.

Then translate what is empty or fuzzy (and drop the fuzzy flag), and check with
``python scripts/i18n_check.py`` (part of ``make test``).

Usage: python scripts/catalogs.py [--extract-only | --annotate-only]
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
from build_book import EXTRA  # noqa: E402

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
    """Messages marked in the course package's Python code (grading checks and their report)
    and in the instructor tooling's (what feedback pages tell the learner)."""
    for py in sorted([*(ROOT / "andrea_ref").rglob("*.py"), *(ROOT / "classroom").rglob("*.py")]):
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
    # the book's html_extra_path, filled by `make book`; the gettext build only needs it to
    # exist (its warnings are errors), so that a checkout that never built the book works too
    EXTRA.mkdir(parents=True, exist_ok=True)
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


# The gettext builder's template of the book's own HTML templates (a few words of ours):
# merged into each edition's sphinx.po without dropping anything, because that catalog also
# holds, by hand, the themes' interface words no template of ours extracts.
THEME_POT = "sphinx.pot"


def update() -> None:
    intl = Path(sys.executable).with_name("sphinx-intl")
    theme = POT_DIR / THEME_POT
    theme_text = theme.read_bytes() if theme.is_file() else None
    theme.unlink(missing_ok=True)  # sphinx-intl would drop every message it does not list
    for pots, locales in ((POT_DIR, ROOT / "book" / "locales"),
                          (PACKAGE_POT_DIR, ROOT / "andrea_ref" / "locales")):
        cmd = [str(intl), "update", "-p", str(pots), "-d", str(locales), "-w", "0"]
        for lang in TRANSLATED:
            cmd += ["-l", lang]
        subprocess.run(cmd, check=True)
    if theme_text is not None:
        theme.write_bytes(theme_text)
        for lang in TRANSLATED:
            added = add_missing(theme, ROOT / "book" / "locales" / lang / "LC_MESSAGES" / "sphinx.po")
            print(f"[catalogs] {lang}/sphinx.po: {added} new message(s) of the book's templates; "
                  "the themes' words kept")


def add_missing(pot: Path, po: Path) -> int:
    """Add to the catalog ``po`` every message of ``pot`` it lacks (untranslated), keeping
    all it has; returns how many were added."""
    import io

    from babel.messages.pofile import read_po, write_po
    with pot.open("rb") as f:
        template = read_po(f)
    with po.open("rb") as f:
        catalog = read_po(f)
    new = [m for m in template if m.id and m.id not in catalog]
    for m in new:
        catalog.add(m.id, "", auto_comments=m.auto_comments, flags=m.flags)
    if new:
        buf = io.BytesIO()
        write_po(buf, catalog, width=0, no_location=True, omit_header=False)
        po.write_bytes(buf.getvalue())
    return len(new)


PROJECT = "ANDREA Block Lab"
LANGUAGE_TEAMS = {"de": "ANDREA Block Lab, German edition", "ka": "ANDREA Block Lab, Georgian edition"}
NOTE_PREFIX = "placeholder "
# what a str.format field of the course package's messages holds, by its name
FIELD_MEANINGS = {
    "name": "the name of the learner's function", "function": "a function's name",
    "got": "the value the learner's function gave", "expected": "the reference value",
    "shape": "a tensor shape", "dtype": "a dtype such as torch.float32", "device": "a device such as cpu",
    "index": "the position of an element", "difference": "a number", "allowed": "a number",
    "rtol": "a number", "atol": "a number", "seconds": "a number of seconds", "value": "a number",
    "property": "the property the check judges (already translated)", "line": "a line number",
    "file": "a file name", "kind": "an exception's name", "error": "an exception's message",
    "likely": "the likely mistake (already translated)", "where": "where the check looked",
    "norm": "a LayerNorm's name (ln_1, ln_2)", "passed": "a count", "total": "a count",
    "n": "a count", "size": "a size", "rule": "the rule broken (already translated)",
    "op": "an operation's name", "type": "a type's name",
}
_NOTE_ROLE = re.compile(r"\{([a-z][\w:-]*)\}`([^`]*)`")
_NOTE_FIELD = re.compile(r"(?<![\w{$\\^_])\{([A-Za-z_]\w*|\d+)(?:![rs])?(?::[^{}]*)?\}(?!`)")


def placeholder_notes(msgid: str) -> list[str]:
    """What each placeholder of a message is, for its translators (empty: it has none)."""
    notes = []
    for m in _NOTE_ROLE.finditer(msgid):
        role, content = m.groups()
        if role.startswith("glue"):
            key = content.split(":")[0]
            notes.append(f"{m.group(0)}: a value computed when the book is built ({key}), pasted here and "
                         f"written the edition's way by the build; keep the role as it is")
        elif role in ("term", "ref", "doc", "numref"):
            target = re.search(r"<([^<>]+)>\s*$", content)
            notes.append(f"{m.group(0)}: a link ({role}); translate the visible text, keep "
                         + (f"the target <{target.group(1)}>" if target else f"the target, as `text <{content}>`"))
        elif role == "cite":
            notes.append(f"{m.group(0)}: a citation; keep it as it is")
        else:
            notes.append(f"{m.group(0)}: markup ({role}); keep it as it is")
    text = _NOTE_ROLE.sub(" ", msgid)
    has_math = "$" in text
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`", " ", text, flags=re.S)
    seen = set()
    for m in _NOTE_FIELD.finditer(text):
        field = m.group(1)
        if field in seen:
            continue
        seen.add(field)
        meaning = FIELD_MEANINGS.get(field) or ("the value filled in at that place" if field.isdigit()
                                                 else "a value filled in when the message is shown")
        notes.append(f"{m.group(0)}: {meaning}; keep it (its place in the sentence may move)")
    if has_math:
        notes.append("$...$: a formula; keep it as it is (its numbers are written the edition's way by the build)")
    return notes


def _version() -> str:
    import tomllib
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def annotate(path: Path, language: str | None) -> None:
    """Fill the header of one catalog or template and the placeholder notes of its messages."""
    from babel.messages.pofile import read_po, write_po
    with path.open("rb") as f:
        catalog = read_po(f)
    catalog.project = PROJECT
    catalog.version = _version()
    catalog.copyright_holder = "the ANDREA Block Lab authors"
    catalog.msgid_bugs_address = "the course repository's issue tracker"
    if language:
        catalog.language_team = LANGUAGE_TEAMS.get(language, language)
        catalog.last_translator = LANGUAGE_TEAMS.get(language, language)
    catalog.header_comment = (f"# {PROJECT}: {'the ' + language + ' translation' if language else 'the English messages'}"
                              f" ({path.stem}).\n# Distributed under the same license as {PROJECT}.\n"
                              f"# Translators: the notes above a message (#.) say what its placeholders are.")
    for message in catalog:
        if not message.id:
            continue
        msgid = message.id if isinstance(message.id, str) else message.id[0]
        notes = [NOTE_PREFIX + n for n in placeholder_notes(msgid)]
        # the catalogs' only extracted comments are these notes (written anew each time:
        # babel wraps long comments, so a note cannot be told by its first words alone)
        message.auto_comments = notes
    buf = io.BytesIO()
    write_po(buf, catalog, width=0, no_location=True, omit_header=False)
    path.write_bytes(buf.getvalue())


def annotate_all() -> None:
    for pot in [*POT_DIR.rglob("*.pot"), *PACKAGE_POT_DIR.rglob("*.pot")]:
        annotate(pot, None)
    for lang in TRANSLATED:
        for po in sorted((ROOT / "andrea_ref" / "locales" / lang / "LC_MESSAGES").rglob("*.po")):
            annotate(po, lang)
        # the book's catalogs are in book/ and notebooks/; the .po files beside those
        # folders are the themes' interface words (sphinx.po, booktheme.po), kept by hand
        for po in sorted((ROOT / "book" / "locales" / lang / "LC_MESSAGES").glob("*/**/*.po")):
            annotate(po, lang)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--extract-only", action="store_true", help="write the templates, leave the catalogs")
    group.add_argument("--annotate-only", action="store_true",
                       help="only fill the catalogs' headers and placeholder notes")
    args = parser.parse_args(argv)
    if not args.annotate_only:
        extract()
        for pot in [*POT_DIR.rglob("*.pot"), *PACKAGE_POT_DIR.rglob("*.pot")]:
            annotate(pot, None)  # the notes travel into the catalogs with the update
        if args.extract_only:
            return 0
        update()
    annotate_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
