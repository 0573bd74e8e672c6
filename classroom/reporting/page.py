"""A page that reads the same wherever it is opened, and runs no script.

A page the grader writes (a feedback page, a chapter shipped with one, the class view)
is one file that reads the same wherever it is opened (from the grader's disk, mailed,
uploaded, through nbgrader's exchange): its head is its own (its styles inline, a
Content-Security-Policy with ``script-src 'none'``, :func:`compose`), its body is cleaned
last by the one sanitiser (:mod:`classroom.reporting.sanitiser`), its images are data:
images, its math is SVG typeset when the page is built (:func:`typeset_body`, with
:mod:`classroom.reporting.mathsvg`), and it refers to nothing on the grading machine
(:func:`clean_css`).
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from andrea_ref.i18n import N_, gettext

from . import mathsvg
from .outputs import data_uri
from .sanitiser import SCHEME, Links, sanitise

MAX_FONT = 64 << 10  # bytes: a web font a page carries inline, at most
CSP = ("default-src 'none'; script-src 'none'; object-src 'none'; frame-src 'none'; base-uri 'none'; "
       "form-action 'none'; img-src data:; font-src data:; style-src 'unsafe-inline'")
MATH_NOTE = N_("The formulas on this page could not be typeset ({reason}): they are shown as TeX.")
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
div.andrea-notes { border: 1px solid #d9b44a; background: #fff8e1; padding: 0.5em 0.9em; margin: 0.5em 0 1em; }
span.andrea-note { font-style: italic; color: #555; }
a:not([href]) { color: inherit; text-decoration: none; }
"""

def split_page(html: str) -> tuple[str, str]:
    """(head, body) of a whole page: what lies before ``<body ...>`` and inside it."""
    m = re.search(r"<body\b[^>]*>", html, re.I)
    if not m:
        return "", html
    head, body = html[:m.start()], html[m.end():]
    end = body.lower().rfind("</body>")
    return head, body[:end] if end >= 0 else body


def font_uri(path: Path) -> str | None:
    try:
        if path.suffix == ".woff2" and path.is_file() and path.stat().st_size <= MAX_FONT:
            return data_uri("font/woff2", path.read_bytes())
    except OSError:
        pass
    return None


def clean_css(css: str, base: Path | None = None) -> str:
    """A stylesheet that loads nothing: ``@import`` dropped, every ``url()`` a data: URL
    (small .woff2 fonts found under ``base`` are embedded; anything else is dropped)."""
    css = re.sub(r"@import\b[^;]*;", "", css)

    def url(m):
        target = m.group(2).strip()
        if target.lower().startswith("data:"):
            return m.group(0)
        if base is not None and not SCHEME.match(target) and not target.startswith("/"):
            embedded = font_uri(base / target.split("?")[0].split("#")[0])
            if embedded:
                return f'url("{embedded}")'
        return "none"

    css = re.sub(r"url\(\s*(['\"]?)(.*?)\1\s*\)", url, css, flags=re.S)
    return css.replace("</", "<\\/")


def notes_html(notes: list[str]) -> str:
    if not notes:
        return ""
    return '<div class="andrea-notes" role="note">' + "".join(f"<p>{html.escape(n)}</p>" for n in notes) + "</div>\n"


def compose(body: str, css: list[str], title: str, language: str, html_attrs: str = "") -> str:
    """The whole page: a head of our own (the policy, the styles) and ``body`` (sanitised)."""
    styles = "".join(f"<style>\n{c}\n</style>\n" for c in css if c)
    return ("<!DOCTYPE html>\n"
            f'<html lang="{html.escape(language, quote=True)}"{html_attrs}>\n<head>\n<meta charset="utf-8">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">\n'
            '<meta name="referrer" content="no-referrer">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n{styles}</head>\n<body>\n{body}\n</body>\n</html>\n")


def typeset_body(body: str, links: Links, notes: list[str], options: dict | None = None) -> tuple[str, str, dict]:
    """``body`` sanitised, its math typeset, sanitised again (the final pass); with the
    typesetter's stylesheet and figures. A failure to typeset leaves the TeX as it is
    and adds a note for the reader."""
    body = sanitise(body, links)
    css, stats = "", {"math": 0, "seconds": 0.0, "cpu_seconds": 0.0}
    try:
        body, css, stats = mathsvg.typeset(body, options=options)
    except mathsvg.TypesetError as exc:
        notes.append(gettext(MATH_NOTE).format(reason=str(exc)))
    return sanitise(notes_html(notes) + body, links), css, stats
