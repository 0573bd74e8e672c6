"""Leak scan: no solution line and no hidden-test line in what learners get.

    python -m classroom.scan [--html _build/html] [--exercises exercises]

The secrets are the lines between ``### BEGIN SOLUTION`` / ``### END SOLUTION`` and
``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` in the instructor notebooks of
``solutions/``, whitespace-normalised; trivial lines (shorter than ``MIN_CHARS``
characters without spaces, e.g. ``pass``, ``return y``, a lone bracket) are left out,
and so are lines the reference package ``andrea_ref`` holds itself, in its code or its
messages (``loss.backward()``, ``with torch.no_grad():``, a hint's ``p -= lr * p.grad``): every
learner has that package, so such a line gives nothing away.

Searched: every HTML page of the learner edition of the book (as text: tags removed,
entities decoded, so syntax highlighting cannot hide a line), every notebook and
text source the build copied there, and every notebook in ``exercises/``. In
notebooks the nbgrader markers themselves count as leaks too.
"""
from __future__ import annotations

import argparse
import html
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

from . import markers
from .markers import KINDS, cell_source

ROOT = Path(__file__).resolve().parent.parent
MIN_CHARS = 10
TEXT_SUFFIXES = {".html", ".ipynb", ".md", ".txt", ".py"}
_WS = re.compile(r"[ \t\u00a0]+")


def normalise(line: str) -> str:
    return _WS.sub(" ", line).strip()


def public_text(package: Path = ROOT / "andrea_ref") -> str:
    """The reference package's source and message catalogs, which learners have, as the
    scan reads a file: whitespace-normalised lines."""
    files = sorted(p for p in Path(package).rglob("*") if p.suffix in (".py", ".po") and p.is_file())
    return "\n".join(normalise(ln) for path in files for ln in path.read_text(encoding="utf-8").splitlines())


def secret_lines(solutions: Path = ROOT / "solutions", kinds=KINDS, min_chars: int = MIN_CHARS,
                 public: Path = ROOT / "andrea_ref") -> dict[str, str]:
    """{normalised line: where it comes from} for every non-trivial secret line."""
    out: dict[str, str] = {}
    known = public_text(public)
    for path in sorted(Path(solutions).rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb.get("cells", []):
            for s, kind in markers.inside_lines(cell_source(cell), kinds):
                if len(s.replace(" ", "")) >= min_chars and normalise(s) not in known:  # found as the scan finds
                    out.setdefault(normalise(s), f"{path.relative_to(path.parents[1])} ({kind.lower()})")
    return out


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in ("br", "p", "div", "li", "tr", "pre", "h1", "h2", "h3", "h4"):
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._skip:
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.parts.append(data)


def html_text(text: str) -> str:
    p = _Text()
    p.feed(text)
    return "".join(p.parts)


def _leaks_in_text(text: str, secrets: dict[str, str]) -> list[str]:
    lines = {normalise(ln) for ln in text.splitlines()}
    joined = "\n".join(lines)
    return [s for s in secrets if s in lines or s in joined]


def scan_file(path: Path, secrets: dict[str, str]) -> list[str]:
    """The secret lines found in one file."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".ipynb":
        try:
            nb = json.loads(raw)
        except ValueError:
            return _leaks_in_text(raw, secrets)
        found = []
        for cell in nb.get("cells", []):
            src = cell_source(cell)
            found += _leaks_in_text(src, secrets)
            found += [f"marker: {m}" for m in map(markers.begin, KINDS) if m in src]
            for o in cell.get("outputs", []):
                t = o.get("text") or "".join(str(v) for v in o.get("data", {}).values())
                found += _leaks_in_text("".join(t) if isinstance(t, list) else str(t), secrets)
        return sorted(set(found))
    if path.suffix == ".html":
        return _leaks_in_text(html_text(raw), secrets) + _leaks_in_text(html.unescape(raw), secrets)
    return _leaks_in_text(raw, secrets)


def scan(paths, secrets: dict[str, str]) -> dict[str, list[str]]:
    """{file: [leaked lines]} over files and folders (folders: every text file below)."""
    leaks: dict[str, list[str]] = {}
    for base in paths:
        base = Path(base)
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.suffix in TEXT_SUFFIXES
                                                      and p.is_file())
        for f in files:
            if ".ipynb_checkpoints" in f.parts:
                continue
            found = scan_file(f, secrets)
            if found:
                leaks[str(f)] = sorted(set(found))
    return leaks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    ap.add_argument("--exercises", type=Path, default=ROOT / "exercises")
    ap.add_argument("--solutions", type=Path, default=ROOT / "solutions")
    a = ap.parse_args(argv)
    secrets = secret_lines(a.solutions)
    targets = [p for p in (a.html, a.exercises) if p.exists()]
    leaks = scan(targets, secrets)
    for f, lines in leaks.items():
        for ln in lines:
            print(f"{f}: {ln}  [{secrets.get(ln, '')}]")
    print(f"scanned {', '.join(map(str, targets))} for {len(secrets)} solution/hidden-test lines: "
          f"{sum(map(len, leaks.values()))} leak(s)")
    return 1 if leaks else 0


if __name__ == "__main__":
    sys.exit(main())
