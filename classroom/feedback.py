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
scripts, event handlers and ``javascript:`` links come out inert. Each verdict is shown
once: a graded cell's tick once (its check runs on the visible and on the hidden
inputs), and the self-check's ticks and crosses, printed by the learner's kernel, not
at all (:func:`without_kernel_verdicts`).

:func:`finish_page` then makes nbgrader's rendered page read well offline: MathJax 3
from the course book instead of nbconvert's CDN, chapter links to the book's built
pages, bordered tables and wrapped lines. The book's address is one setting,
``c.CourseBook.url`` in ``nbgrader_config.py`` (empty: ``_build/html`` on this machine).
"""
from __future__ import annotations

import copy
import re
from pathlib import Path

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


SELF_CHECK_NOTE = ("(the self-check's ticks and crosses are not repeated here: "
                   "each graded cell below shows the grader's verdict)\n")
_VERDICT_LINE = re.compile(r"^(\s*)[\u2713\u2717] ")


def _report_line_pattern() -> re.Pattern:
    """The self-check report's title and count line, in every language of the course."""
    from andrea_ref.i18n import LANGUAGES, gettext
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
        kept.append({"output_type": "stream", "name": "stdout", "text": SELF_CHECK_NOTE})
    return kept


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
            cell["outputs"] = [from_dict(o) for o in shown_once(verdicts[gid])]
        elif after_hidden and cell.get("outputs"):
            cell["outputs"] = [from_dict({"output_type": "stream", "name": "stdout", "text": DROPPED})]
        elif cell.get("outputs"):
            cell["outputs"] = [from_dict(o) for o in without_kernel_verdicts(cell["outputs"])]
    return nb


# ----------------------------------------------------------------------------- the page
# What nbgrader's feedback template leaves to the network or to chance, put right after
# nbconvert has rendered it: MathJax comes from the course book (the copy `make book`
# vendors; never a CDN), links to chapters go to the book's built pages, tables get
# borders and long lines wrap, so the page reads the same offline and at any width.
ROOT = Path(__file__).resolve().parent.parent
BUILT_BOOK = ROOT / "_build" / "html"
MATHJAX = "_static/mathjax/tex-chtml.js"  # where the book's build puts its vendored MathJax
VENDORED_MATHJAX = ROOT / "book" / "_vendor" / "html" / MATHJAX  # the same copy before a build

_NBCONVERT_MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)
_ANY_MATHJAX_TAG = re.compile(r"<script[^>]*\bsrc=\"[^\"]*mathjax[^\"]*\"[^>]*>\s*</script>", re.I)
# a chapter link as the notebooks write it (the built page) or as older releases did (the source)
_CHAPTER_HREF = re.compile(r'href="(?:\.\./)+(?:_build/html/)?(book/[\w.-]+?)\.(?:html|md)(#[\w.-]*)?"')

PAGE_CSS = """
/* classroom.feedback: readable offline and at any width */
body { overflow-x: hidden; }
div#notebook-container, .container { max-width: 100%; }
pre, code, div.output_area pre, div.input_area pre {
  white-space: pre-wrap; overflow-wrap: anywhere; word-break: normal; }
div.output_subarea { max-width: 100%; overflow-x: auto; }
div.text_cell_render table { border-collapse: collapse; margin: 0.8em 0; max-width: 100%; }
div.text_cell_render th, div.text_cell_render td {
  border: 1px solid #cfcfcf; padding: 0.35em 0.75em; text-align: left; vertical-align: top; }
div.text_cell_render thead th { background: #f0f0f0; font-weight: 600; }
div.text_cell_render tbody tr:nth-child(even) { background: #fafafa; }
img, svg { max-width: 100%; }
mjx-container[display="true"] { max-width: 100%; overflow-x: auto; overflow-y: hidden; }
"""


def book_url(config=None) -> str:
    """The course book's base address, ending in ``/``: ``c.CourseBook.url`` of
    ``nbgrader_config.py`` when set (a published book), else the book built here
    (``_build/html``, a ``file:`` address)."""
    url = ""
    if config is not None and "CourseBook" in config:
        url = str(config.CourseBook.get("url", "") or "")
    if not url:
        url = BUILT_BOOK.as_uri()
    return url if url.endswith("/") else url + "/"


def _mathjax_src(base: str) -> str:
    if base == book_url() and not (BUILT_BOOK / MATHJAX).is_file() and VENDORED_MATHJAX.is_file():
        return VENDORED_MATHJAX.as_uri()  # graded before the book was built: the vendored copy
    return base + MATHJAX


def mathjax_tags(src: str) -> str:
    """MathJax 3 set up as the notebook front ends do ($...$ and $$...$$), with its
    ``safe`` extension: TeX in a learner's markdown cannot make a javascript: link."""
    return ("<script>window.MathJax = {"
            "tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']],"
            " processEscapes: true, processEnvironments: true},"
            " loader: {load: ['ui/safe']},"
            " options: {ignoreHtmlClass: 'tex2jax_ignore', processHtmlClass: 'tex2jax_process'}"
            "};</script>\n"
            f'<script defer src="{src}"></script>')


def finish_page(html: str, config=None) -> str:
    """The feedback page ``html`` (nbgrader's, rendered by nbconvert) made to read well
    offline: MathJax from the book, chapter links to the book's pages, page styles."""
    import html as html_mod

    base = book_url(config)
    tags = mathjax_tags(html_mod.escape(_mathjax_src(base), quote=True))
    html, n = _NBCONVERT_MATHJAX.subn(lambda m: tags, html, count=1)
    if not n:
        html = _ANY_MATHJAX_TAG.sub("", html)
        html = html.replace("</head>", tags + "\n</head>", 1)
    html = html.replace("</head>", f"<style>{PAGE_CSS}</style>\n</head>", 1)
    esc = html_mod.escape(base, quote=True)
    return _CHAPTER_HREF.sub(lambda m: f'href="{esc}{m.group(1)}.html{m.group(2) or ""}"', html)


def write_page(src: Path, dest: Path, config=None) -> None:
    """Write nbgrader's feedback page ``src`` to ``dest``, finished by :func:`finish_page`."""
    dest.write_text(finish_page(Path(src).read_text(encoding="utf-8"), config), encoding="utf-8")
