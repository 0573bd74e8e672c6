"""The graded notebooks in German and Georgian, made from the English ones and the catalogs.

Used by the learner's lab (scripts/lab.py), the learner kit, the catalogs' extraction
(scripts/catalogs.py) and the grader, which shows a learner's feedback in the language
of the notebook they handed in.

Only the markdown is translated. Every code cell (the set-up, the learner's cell, the
graded checks with their hidden tests) and its nbgrader metadata stay byte for byte
what the English release has, so a notebook is graded the same in every language.
The checks' own messages follow the language through ``andrea_ref.i18n``: the
translated notebook carries ``"andrea": {"lang": ...}`` in its metadata, and the
lab and the grader tell the kernel (``ANDREA_LANG``).

Each markdown cell is cut into blocks (paragraphs, lists, tables, headings, fenced
code and display math, separated by blank lines); each block is one message of the
assignment's catalog, book/locales/<lang>/LC_MESSAGES/notebooks/<assignment>.po
(``make catalogs`` brings the catalogs up to date; README, "Translating the course").
A block without a translation stays English. nbgrader's checksum of a locked markdown
cell is computed again for the translated text, so Validate accepts the notebook.

    python -m classroom.notebook_i18n release de   # exercises/ -> _build/exercises-de/
"""
from __future__ import annotations

import argparse
import copy
import json
import re
import sys
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCALES = ROOT / "book" / "locales"
from andrea_lab import edition_links  # noqa: E402
from andrea_ref.i18n import LANGUAGES, METADATA_KEY, read_catalog  # noqa: E402

TRANSLATED = LANGUAGES[1:]
_FENCE = re.compile(r"^\s*(```|~~~|\$\$)")


def blocks(markdown: str) -> list[tuple[str, str]]:
    """Cut markdown into (block, separator after it): blank lines separate blocks,
    except inside fenced code and display math."""
    lines = markdown.split("\n")
    out: list[tuple[str, str]] = []
    current: list[str] = []
    fence = None
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if fence is None and m:
            marker = m.group(1)
            # a one-line $$ ... $$ opens and closes on the same line
            if not (marker == "$$" and line.strip() != "$$" and line.strip().endswith("$$") and len(line.strip()) > 2):
                fence = marker
            current.append(line)
        elif fence is not None:
            current.append(line)
            closes = line.strip().endswith("$$") if fence == "$$" else line.strip().startswith(fence)
            if closes:
                fence = None
        elif line.strip() == "":
            sep = []
            while i < len(lines) and lines[i].strip() == "":
                sep.append(lines[i])
                i += 1
            if current:
                out.append(("\n".join(current), "\n" + "\n".join(sep) + ("\n" if i < len(lines) else "")))
                current = []
            elif out:
                block, before = out[-1]
                out[-1] = (block, before + "\n".join(sep) + "\n")
            continue
        else:
            current.append(line)
        i += 1
    if current:
        out.append(("\n".join(current), ""))
    return out


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def messages_of(nb: dict) -> list[str]:
    """The messages of a notebook: every non-empty block of its markdown cells, in order."""
    found: list[str] = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for block, _sep in blocks(_source(cell)):
                if block.strip() and block not in found:
                    found.append(block)
    return found


def assignment_notebooks(folder: Path) -> dict[str, list[Path]]:
    """{assignment: its notebooks} of a release or source folder (``NN_topic/name.ipynb``)."""
    found: dict[str, list[Path]] = {}
    for nb in sorted(folder.glob("*/*.ipynb")):
        if ".ipynb_checkpoints" not in nb.parts:
            found.setdefault(nb.parent.name, []).append(nb)
    return found


def extract_all(folder: Path = ROOT / "exercises") -> dict[str, list[str]]:
    """{assignment: its messages} for every assignment in `folder`."""
    result = {}
    for assignment, notebooks in assignment_notebooks(folder).items():
        msgs: list[str] = []
        for path in notebooks:
            for m in messages_of(json.loads(path.read_text(encoding="utf-8"))):
                if m not in msgs:
                    msgs.append(m)
        result[assignment] = msgs
    return result


def catalog_path(language: str, assignment: str, locales: Path = LOCALES) -> Path:
    return locales / language / "LC_MESSAGES" / "notebooks" / f"{assignment}.po"


@lru_cache(maxsize=None)
def _catalog(path: Path, mtime: float) -> dict[str, str]:
    return read_catalog(path)  # cached per version of the file


def catalog(language: str, assignment: str, locales: Path = LOCALES) -> dict[str, str]:
    """The translated messages of one assignment (empty for English or no catalog)."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, got {language!r}")
    path = catalog_path(language, assignment, locales)
    if language == "en" or not path.is_file():
        return {}
    return _catalog(path, path.stat().st_mtime)


def translate_markdown(text: str, messages: dict[str, str], language: str = "en") -> str:
    """The markdown in ``language``; its chapter links go to that edition of the book."""
    out = "".join(messages.get(block, block) + sep for block, sep in blocks(text))
    return edition_links(out, language) if language != "en" else out


def notebook_language(nb: dict) -> str | None:
    """The language a notebook says it is in (``metadata.andrea.lang``), if it is one of the course's."""
    meta = nb.get("metadata") if isinstance(nb, dict) else None
    andrea = meta.get(METADATA_KEY) if isinstance(meta, dict) else None
    lang = andrea.get("lang") if isinstance(andrea, dict) else None
    return lang if lang in LANGUAGES else None


def submission_language(notebooks) -> str | None:
    """The language of a submission's notebooks, when they name one of the course's."""
    return next(filter(None, map(notebook_language, notebooks)), None)


def translate_notebook(nb: dict, language: str, messages: dict[str, str]) -> dict:
    """A copy of `nb` with its markdown in `language`; code cells untouched."""
    # only where a notebook is translated: the learner's lab imports this module at its start
    import nbformat
    from nbgrader.utils import compute_checksum
    out = copy.deepcopy(nb)
    for cell in out.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        text = _source(cell)
        new = translate_markdown(text, messages, language)
        if new == text:
            continue
        cell["source"] = new
        grader = cell.get("metadata", {}).get("nbgrader")
        if isinstance(grader, dict) and "checksum" in grader:
            grader["checksum"] = compute_checksum(nbformat.from_dict(cell))
    out.setdefault("metadata", {})[METADATA_KEY] = {"lang": language}
    return out


def release(language: str, src: Path = ROOT / "exercises", dest: Path | None = None,
            locales: Path = LOCALES) -> Path:
    """Write the released notebooks of `src` in `language` under `dest` (default
    _build/exercises-<lang>; English: a copy with the language in its metadata)."""
    if language not in LANGUAGES:
        raise ValueError(f"language must be one of {', '.join(LANGUAGES)}, got {language!r}")
    dest = dest or ROOT / "_build" / f"exercises-{language}"
    for assignment, notebooks in assignment_notebooks(src).items():
        messages = catalog(language, assignment, locales)
        for path in notebooks:
            nb = json.loads(path.read_text(encoding="utf-8"))
            target = dest / assignment / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            text = json.dumps(translate_notebook(nb, language, messages), indent=1, ensure_ascii=False) + "\n"
            if not target.is_file() or target.read_text(encoding="utf-8") != text:
                target.write_text(text, encoding="utf-8")
    return dest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rel = sub.add_parser("release", help="write the released notebooks in one language")
    rel.add_argument("language", choices=LANGUAGES)
    rel.add_argument("--dest", type=Path)
    args = parser.parse_args(argv)
    dest = release(args.language, dest=args.dest)
    print(f"[notebooks] {args.language}: {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
