"""Feedback for a learner: the graded notebook without the hidden tests' source.

nbgrader's ``generate_feedback`` renders the autograded notebook as it is, hidden
tests included. :func:`strip_hidden` makes the copy that is rendered instead:

- in every cell, the lines between ``### BEGIN HIDDEN TESTS`` and
  ``### END HIDDEN TESTS`` (markers included) become one comment line;
- in the outputs of those cells, an error keeps its type and message (the check's
  diagnosis of the mistake) but loses its traceback, which quotes the failing
  source line;
- any output line of any cell that repeats a hidden line is dropped.
"""
from __future__ import annotations

import copy
import re

BEGIN, END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
PLACEHOLDER = "# (hidden tests ran here; their code is not shown)"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def hidden_lines(nb) -> set[str]:
    """The stripped, non-trivial lines inside hidden-test blocks of ``nb``."""
    lines = set()
    for cell in nb["cells"]:
        inside = False
        for line in _source(cell).splitlines():
            s = line.strip()
            if s.startswith(BEGIN):
                inside = True
            elif s.startswith(END):
                inside = False
            elif inside and len(s) > 3:
                lines.add(s)
    return lines


def _strip_source(src: str) -> tuple[str, bool]:
    out, inside, found = [], False, False
    for line in src.splitlines(keepends=True):
        s = line.strip()
        if s.startswith(BEGIN):
            inside, found = True, True
            indent = line[: len(line) - len(line.lstrip())]
            out.append(indent + PLACEHOLDER + "\n")
        elif s.startswith(END):
            inside = False
        elif not inside:
            out.append(line)
    return "".join(out), found


def _scrub_text(text: str, secret: set[str]) -> str:
    kept = [ln for ln in text.splitlines(keepends=True)
            if not any(s in _ANSI.sub("", ln) for s in secret)]
    return "".join(kept)


def strip_hidden(nb):
    """A copy of notebook ``nb`` (nbformat node or dict) safe to show the learner."""
    nb = copy.deepcopy(nb)
    secret = hidden_lines(nb)
    for cell in nb["cells"]:
        src, had_hidden = _strip_source(_source(cell))
        cell["source"] = src
        if cell.get("cell_type") != "code":
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                if had_hidden or any(any(s in _ANSI.sub("", t) for s in secret) for t in out.get("traceback", [])):
                    out["traceback"] = [f"{out.get('ename', 'Error')}: {out.get('evalue', '')}"]
            elif out.get("output_type") == "stream":
                text = out.get("text", "")
                text = "".join(text) if isinstance(text, list) else text
                out["text"] = _scrub_text(text, secret)
            elif "data" in out:
                for mime, value in list(out["data"].items()):
                    if mime.startswith("text/"):
                        value = "".join(value) if isinstance(value, list) else value
                        out["data"][mime] = _scrub_text(value, secret)
    return nb
