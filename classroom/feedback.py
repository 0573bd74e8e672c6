"""Feedback for a learner: the graded notebook without the hidden tests' source.

nbgrader's ``generate_feedback`` renders the autograded notebook as it is, hidden
tests included. :func:`strip_hidden` makes the copy that is rendered instead:

- in every cell, the lines between ``### BEGIN HIDDEN TESTS`` and
  ``### END HIDDEN TESTS`` (markers included) become one comment line;
- in the outputs of those cells, an error keeps its type and message (the check's
  diagnosis of the mistake) but loses its traceback, which quotes the failing
  source line;
- any output line of any cell that repeats a hidden line is dropped.

:func:`feedback_notebook` goes further for graded submissions: the graded cells show
the verdicts of the independent check (what the points are based on), not what the
learner's kernel printed; and every other output from the first cell with hidden
tests onwards is dropped -- code that ran after the hidden tests could have seen
their text and printed it in any encoding, which no line filter can recognise.
Markdown cells are turned into HTML and cleaned with ``nh3`` here (nbgrader's
feedback template renders markdown unsanitised), and the page is rendered with
nbconvert's HTML sanitiser on for outputs (``classroom.grade``), so learner markup,
scripts, event handlers and ``javascript:`` links come out inert.
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


DROPPED = ("(output not shown in feedback: this cell ran after the hidden tests)\n")


def feedback_notebook(nb, verdicts: dict | None = None):
    """The notebook to render as feedback: :func:`strip_hidden`, graded cells showing
    ``verdicts`` ({grade_id: list of nbformat outputs}) and no output of any other
    cell from the first hidden test on."""
    from nbformat import from_dict

    import nh3
    from nbconvert.filters import markdown2html

    original = copy.deepcopy(nb)
    nb = strip_hidden(nb)
    after_hidden = False
    for cell, before in zip(nb["cells"], original["cells"]):
        if BEGIN in _source(before):
            after_hidden = True
        nbg = cell.get("metadata", {}).get("nbgrader")
        if isinstance(nbg, dict):
            nbg.pop("comment", None)  # only the gradebook's comments are shown
        if cell.get("cell_type") in ("markdown", "raw"):
            # nbgrader's feedback template renders markdown unsanitised: hand it HTML that
            # has been through the sanitiser already (scripts, handlers, javascript: links go)
            cell["source"] = nh3.clean(markdown2html(_source(cell)), tags=nh3.ALLOWED_TAGS - {"img"})
            cell["cell_type"] = "markdown"
            cell.pop("attachments", None)
            continue
        if cell.get("cell_type") != "code":
            continue
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if verdicts is not None and gid in verdicts:
            cell["outputs"] = [from_dict(o) for o in verdicts[gid]]
        elif after_hidden and cell.get("outputs"):
            cell["outputs"] = [from_dict({"output_type": "stream", "name": "stdout", "text": DROPPED})]
    return nb
