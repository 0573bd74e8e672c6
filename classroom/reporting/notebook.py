"""The graded notebook as a learner may see it: without the hidden tests' source.

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
Markdown cells are turned into HTML here (:func:`classroom.reporting.outputs.markdown_html`)
and every output is reduced to the data a page without script can show
(:func:`classroom.reporting.outputs.shown_outputs`). Each verdict is shown once: a
graded cell's tick once (its check runs on the visible and on the hidden inputs), and
the self-check's ticks and crosses, printed by the learner's kernel, not at all
(:func:`without_kernel_verdicts`).
"""
from __future__ import annotations

import copy
import re

from nbformat import from_dict

from andrea_ref.grading.runner import LEFT_MARK
from andrea_ref.i18n import LANGUAGES, N_, gettext

from .. import markers
from ..markers import HIDDEN_TESTS
from .outputs import keep_metadata, markdown_html, shown_outputs
from .sanitiser import Links, sanitise

BEGIN, END = markers.begin(HIDDEN_TESTS), markers.end(HIDDEN_TESTS)
# put in the code where hidden tests stood, as a comment in the submission's language
PLACEHOLDER = N_("(hidden tests ran here; their code is not shown)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def hidden_lines(nb) -> set[str]:
    """The stripped, non-trivial lines inside hidden-test blocks of ``nb``."""
    return {s for cell in nb["cells"] for s, _ in markers.inside_lines(_source(cell), (HIDDEN_TESTS,)) if len(s) > 3}


def _strip_source(src: str) -> tuple[str, bool]:
    out, found = [], False
    for line in markers.lines(src, (HIDDEN_TESTS,)):
        if line.marker == "begin":
            found = True
            indent = line.text[: len(line.text) - len(line.text.lstrip())]
            out.append(f"{indent}# {gettext(PLACEHOLDER)}\n")
        elif line.kind is None:
            out.append(line.text)
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
TICK = "\u2713"


def shown_once(outputs: list[dict]) -> list[dict]:
    """A graded cell's verdict outputs with each verdict once. The cell calls its check
    on the visible inputs and again on the hidden ones, and each passing call prints the
    same tick: a passing cell shows it once; a failing cell shows only its failure (a
    tick from the visible call beside it would contradict it)."""
    failed = any(o.get("output_type") == "error" for o in outputs)
    kept = []
    for o in outputs:
        if o.get("output_type") == "stream":
            text = o.get("text", "")
            text = "".join(text) if isinstance(text, list) else text
            lines = [ln for ln in dict.fromkeys(text.splitlines())
                     if not (failed and ln.lstrip().startswith(TICK))]
            if not lines:
                continue
            o = {**o, "text": "\n".join(lines) + "\n"}
        kept.append(o)
    return kept


SELF_CHECK_NOTE = N_("(the self-check's ticks and crosses are not repeated here: "
                     "each graded cell below shows the grader's verdict)")
# a tick, a cross, or the mark of a property left to the grader (not run in the kernel)
_VERDICT_LINE = re.compile(r"^(\s*)[\u2713\u2717" + re.escape(LEFT_MARK) + "] ")


def _report_line_pattern() -> re.Pattern:
    """The self-check report's title and count line, in every language of the course."""
    fields = {"name": r"[\w.]+", "passed": r"\d+", "total": r"\d+"}
    alternatives = [r"\d+ of \d+ propert(?:y holds|ies hold)\."]
    for language in LANGUAGES:
        for message in ("Checking `{name}`:", "{passed} of {total} properties hold."):
            escaped = re.escape(gettext(message, language))
            alternatives.append(re.sub(r"\\\{(\w+)\\\}", lambda m: fields.get(m.group(1), r".+?"), escaped))
    return re.compile("^(" + "|".join(dict.fromkeys(alternatives)) + ")$")


_REPORT_LINE = _report_line_pattern()


def without_kernel_verdicts(outputs: list) -> list[dict]:
    """Stream outputs of a cell that is not graded, less the verdicts the learner's own
    kernel printed (the self-check's ticks and crosses, each with its indented
    explanation, its title and its count). The graded cells show the grader's verdicts:
    shown here too, every property would appear twice, and from a process the learner
    controls. Everything else the cell printed (its values, ...) is kept."""
    kept, dropped = [], False
    for o in outputs:
        o = dict(o)
        if o.get("output_type") == "stream":
            text = o.get("text", "")
            text = "".join(text) if isinstance(text, list) else text
            lines, indent = [], None
            for ln in text.splitlines(keepends=True):
                bare = _ANSI.sub("", ln).rstrip("\n")
                m = _VERDICT_LINE.match(bare)
                if m:
                    indent, dropped = len(m.group(1)), True
                    continue
                if indent is not None and bare.strip() and len(bare) - len(bare.lstrip()) > indent:
                    continue  # the explanation under a cross
                indent = None
                if _REPORT_LINE.match(bare.strip()):
                    dropped = True
                    continue
                lines.append(ln)
            if not lines:
                continue
            o["text"] = "".join(lines)
        kept.append(o)
    if dropped:
        kept.append({"output_type": "stream", "name": "stdout", "text": gettext(SELF_CHECK_NOTE) + "\n"})
    return kept


def feedback_notebook(nb, verdicts: dict | None = None):
    """The notebook to render as feedback: :func:`strip_hidden`, graded cells showing
    ``verdicts`` ({grade_id: list of nbformat outputs}) and no output of any other
    cell from the first hidden test on."""
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
            # has been through the page's sanitiser already; pasted images (attachments)
            # become data: images or a note (nbconvert would raise on a missing one)
            html = markdown_html(_source(cell), cell.get("attachments"))
            cell["source"] = sanitise(html, Links(keep_relative=True))
            cell["cell_type"] = "markdown"
            cell.pop("attachments", None)
            keep_metadata(cell)
            continue
        if cell.get("cell_type") != "code":
            continue
        keep_metadata(cell)
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if verdicts is not None and gid in verdicts:
            outputs = shown_once(verdicts[gid])
        elif after_hidden and cell.get("outputs"):
            outputs = [{"output_type": "stream", "name": "stdout", "text": DROPPED}]
        elif cell.get("outputs"):
            outputs = without_kernel_verdicts(cell["outputs"])
        else:
            outputs = []
        cell["outputs"] = [from_dict(o) for o in shown_outputs(outputs)]
    nb["metadata"] = {k: v for k, v in nb.get("metadata", {}).items() if k in ("kernelspec", "language_info", "andrea")}
    return nb
