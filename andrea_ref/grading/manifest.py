"""The course manifest, ``course.toml``: every graded assignment, named once.

    from andrea_ref.grading.manifest import load
    for a in load():                       # in the course's order
        a.name, a.notebook, a.chapter      # '02_layernorm', 'layernorm', '04_layernorm_and_placement'
        a.solution, a.exercise             # solutions/02_layernorm/layernorm.ipynb, exercises/...
        a.catalog("de")                    # book/locales/de/LC_MESSAGES/notebooks/02_layernorm.po

    python -m andrea_ref.grading.manifest [--root DIR]   # lists the course, or says what is wrong

Everything that lists the assignments reads them here: the release
(``scripts/release.py``), the grader's template (``classroom.course.template``), the
learner kit, the book's exercises page, the benchmarks and the tests. The manifest
holds what only a person can decide (which assignments, their order, the chapter each
practises); what a file already says is read from that file: the points are the
nbgrader metadata of the solution notebook's graded cells, the functions a learner
writes are the ``def`` of its answer cells.

It lives in ``andrea_ref`` (not in the grader, ``classroom``) because the book's pages
read it, and they import ``andrea_ref`` alone. A manifest that cannot be used is
refused whole, with one line naming the entry and what was expected
(:class:`ManifestError`), before any work starts.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..i18n import LANGUAGES, read_catalog
from .points_table import graded

REPO = Path(__file__).resolve().parents[2]
FILE = "course.toml"
KEYS = ("name", "notebook", "chapter", "checks")  # every key of an entry, each required
_NAME = re.compile(r"^\d{2}_[a-z][a-z0-9_]*$")  # NN_topic: the folders sort in the course's order
_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PROVIDED = re.compile(r"^from andrea_ref(?:\.\w+)* import ([\w, ]+)", re.M)
_DEF = re.compile(r"^def\s+([A-Za-z_]\w*)\s*\((.*?)\)\s*(?:->[^:]*)?:", re.M | re.S)


class ManifestError(ValueError):
    """The manifest cannot be used; the message is one line naming the entry."""


@dataclass(frozen=True)
class Assignment:
    name: str  # the folder in solutions/ and exercises/, nbgrader's assignment id
    notebook: str  # the notebook's name, without .ipynb
    chapter: str  # the book page it practises, book/<chapter>.md
    checks: str  # its checks' module, andrea_ref/grading/<checks>.py
    root: Path  # the course folder

    @property
    def filename(self) -> str:
        return f"{self.notebook}.ipynb"

    @property
    def path(self) -> str:
        """``<name>/<notebook>.ipynb``: the notebook inside solutions/ or exercises/."""
        return f"{self.name}/{self.filename}"

    @property
    def solution(self) -> Path:
        return self.root / "solutions" / self.name / self.filename

    @property
    def exercise(self) -> Path:
        return self.root / "exercises" / self.name / self.filename

    @property
    def chapter_file(self) -> Path:
        return self.root / "book" / f"{self.chapter}.md"

    @property
    def chapter_number(self) -> int:
        """The book numbers chapters as its files are (``04_...`` is chapter 4)."""
        return int(self.chapter.split("_", 1)[0])

    @property
    def checks_module(self) -> str:
        return f"andrea_ref.grading.{self.checks}"

    def catalog(self, language: str) -> Path:
        """The assignment's gettext catalog of ``language`` (its notebook's markdown)."""
        return self.root / "book" / "locales" / language / "LC_MESSAGES" / "notebooks" / f"{self.name}.po"

    def catalogs(self) -> dict[str, Path]:
        """{language: catalog} for every language besides English."""
        return {lang: self.catalog(lang) for lang in LANGUAGES[1:]}

    def cells(self) -> list[dict]:
        """The cells of the solution notebook."""
        return json.loads(self.solution.read_text(encoding="utf-8"))["cells"]

    def points(self) -> dict[str, float]:
        """{grade_id: points} of the graded cells, in the notebook's order: their nbgrader
        metadata, the one place points are written."""
        return dict(graded(self.cells()))

    def _answers(self) -> list[tuple[str, re.Match]]:
        found = []
        for cell in self.cells():
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell.get("cell_type") == "code" and meta.get("solution"):
                match = _DEF.search("".join(cell["source"]))
                if match:
                    found.append((meta["grade_id"], match))
        if not found:
            raise ManifestError(f"{FILE}: assignment {self.name!r}: expected an answer cell with a def in "
                                f"solutions/{self.path}")
        return found

    def answer_id(self) -> str:
        """The nbgrader id of the (first) answer cell, the one the learner writes in first."""
        return self._answers()[0][0]

    def answer_ids(self) -> list[str]:
        """The nbgrader ids of every answer cell, in the notebook's order."""
        return [gid for gid, _match in self._answers()]

    def provided(self) -> list[str]:
        """The names the notebook's locked set-up cell imports from ``andrea_ref`` (its
        checks, ``grading``, aside): the pieces a learner is given."""
        names = []
        for cell in self.cells():
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "setup":
                for m in _PROVIDED.finditer("".join(cell["source"])):
                    names += [n.strip().split(" as ")[-1] for n in m.group(1).split(",") if n.strip() != "grading"]
        return names

    def chapter_title(self, language: str = "en") -> str:
        """The title of the chapter it practises (the page's first heading), in ``language``
        where the book's catalog translates it."""
        title = next((line[2:].strip() for line in self.chapter_file.read_text(encoding="utf-8").splitlines()
                      if line.startswith("# ")), self.chapter)
        if language == "en":
            return title
        po = self.root / "book" / "locales" / language / "LC_MESSAGES" / "book" / f"{self.chapter}.po"
        return read_catalog(po).get(title, title) if po.is_file() else title

    def functions(self) -> list[tuple[str, str]]:
        """(name, arguments) of every function the learner writes: the ``def`` of each answer
        cell, in the notebook's order (the capstone has three)."""
        return [(m.group(1), " ".join(m.group(2).split())) for _gid, m in self._answers()]

    def function(self) -> tuple[str, str]:
        """(name, arguments) of the first function the learner writes."""
        return self.functions()[0]


class Course(tuple):
    """The assignments of one course, in order (a tuple of :class:`Assignment`)."""

    root: Path

    def __new__(cls, assignments, root: Path):
        course = super().__new__(cls, assignments)
        course.root = root
        return course

    @property
    def names(self) -> list[str]:
        return [a.name for a in self]

    def __getitem__(self, key):
        if isinstance(key, str):
            for a in self:
                if a.name == key:
                    return a
            raise KeyError(f"{key!r} is no assignment of {self.root / FILE} (it has {', '.join(self.names)})")
        return super().__getitem__(key)


def _entry(i: int, raw, root: Path, pages: bool) -> Assignment:
    where = f"{FILE}: assignment {i}"
    if not isinstance(raw, dict):
        raise ManifestError(f"{where}: expected a table [[assignment]] with the keys {', '.join(KEYS)}")
    if isinstance(raw.get("name"), str):
        where += f" ({raw['name']!r})"
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise ManifestError(f"{where}: unknown key {unknown[0]!r} (expected only {', '.join(KEYS)})")
    missing = [k for k in KEYS if k not in raw]
    if missing:
        raise ManifestError(f"{where}: missing key {missing[0]!r} (expected {', '.join(KEYS)})")
    for key in KEYS:
        if not isinstance(raw[key], str) or not raw[key]:
            raise ManifestError(f"{where}: {key} must be a non-empty string, got {raw[key]!r}")
    if not _NAME.match(raw["name"]):
        raise ManifestError(f"{where}: name must be NN_topic (two digits, then lower-case letters, digits "
                            f"or _), got {raw['name']!r}")
    for key in ("notebook", "checks"):
        if not _WORD.match(raw[key]):
            raise ManifestError(f"{where}: {key} must be a plain name (letters, digits, _), got {raw[key]!r}")
    if not _NAME.match(raw["chapter"]):
        raise ManifestError(f"{where}: chapter must name a book page as NN_topic, got {raw['chapter']!r}")
    a = Assignment(root=root, **{k: raw[k] for k in KEYS})
    if not a.solution.parent.is_dir():
        raise ManifestError(f"{where}: expected the folder solutions/{a.name}/, which does not exist")
    if not a.solution.is_file():
        raise ManifestError(f"{where}: expected the notebook solutions/{a.path}, which does not exist")
    if pages and not a.chapter_file.is_file():
        raise ManifestError(f"{where}: chapter {a.chapter!r}: expected the page book/{a.chapter}.md, "
                            "which does not exist")
    if not (root / "andrea_ref" / "grading" / f"{a.checks}.py").is_file() and not (
            Path(__file__).parent / f"{a.checks}.py").is_file():
        raise ManifestError(f"{where}: checks {a.checks!r}: expected the module andrea_ref/grading/{a.checks}.py, "
                            "which does not exist")
    return a


def parse(text: str, root: Path, *, pages: bool = True) -> Course:
    """The course described by the manifest ``text`` of the course folder ``root``;
    ``pages``: check that the book pages it names exist too (a grading run's copy of the
    course holds no book)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ManifestError(f"{FILE}: not valid TOML ({exc})") from None
    unknown = sorted(set(data) - {"assignment"})
    if unknown:
        raise ManifestError(f"{FILE}: unknown key {unknown[0]!r} (expected only [[assignment]] tables)")
    entries = data.get("assignment")
    if not isinstance(entries, list) or not entries:
        raise ManifestError(f"{FILE}: expected at least one [[assignment]] table")
    course, seen = [], {}
    for i, raw in enumerate(entries, 1):
        a = _entry(i, raw, root, pages)
        if a.name in seen:
            raise ManifestError(f"{FILE}: assignment {i} ({a.name!r}): duplicate name, already assignment "
                                f"{seen[a.name]} (expected each assignment once)")
        seen[a.name] = i
        course.append(a)
    names = [a.name for a in course]
    if names != sorted(names):
        raise ManifestError(f"{FILE}: assignments must be listed in the order of their names (NN_...), "
                            f"got {', '.join(names)}")
    strays = sorted(p.name for p in (root / "solutions").iterdir()
                    if p.is_dir() and p.name not in seen and any(p.glob("*.ipynb"))) if (root / "solutions").is_dir() else []
    if strays:
        raise ManifestError(f"{FILE}: solutions/{strays[0]}/ holds a notebook but no [[assignment]] names it "
                            f"(expected an entry with name = {strays[0]!r}, or no such folder)")
    return Course(course, root)


def load(root: Path | str = REPO, *, pages: bool = True) -> Course:
    """The course of the folder ``root`` (default: this repository), from its ``course.toml``
    (``pages``: see :func:`parse`)."""
    root = Path(root).resolve()
    try:
        text = (root / FILE).read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"{root / FILE}: cannot be read ({exc.strerror or exc})") from None
    return parse(text, root, pages=pages)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m andrea_ref.grading.manifest",
                                 description="List the course's assignments, or say what is wrong with course.toml.")
    ap.add_argument("--root", type=Path, default=REPO, help=f"the course folder (default: {REPO})")
    a = ap.parse_args(argv)
    try:
        course = load(a.root)
    except ManifestError as exc:
        print(exc, file=sys.stderr)
        return 2
    for x in course:
        print(f"{x.name}\t{x.path}\tchapter {x.chapter_number} ({x.chapter})\t{x.checks_module}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
