"""Layout: book/_static/andrea.css on every page (with andrea.js, which gives the boxes
it lets scroll a tab stop), two marks the style sheet relies on, and the label of the
search button (book/_templates/search-button-field.html).

- Long names in inline code (``andrea_ref.grading.check_layer_norm``) get break points
  (<wbr>) before "." and "_" and after "/": on a narrow screen such a name breaks there,
  never in the middle of a word, and never widens the page.
- Figures drawn by a chapter that are much wider than tall (two or more panels side by
  side) are marked ``andrea-wide-figure``: on a phone they keep a width at which their
  labels are legible, and scroll sideways.
"""
from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes

STATIC = Path(__file__).resolve().parent.parent.parent / "_static"
WIDE_CLASS = "andrea-wide-figure"
# A figure this much wider than tall has panels side by side (one panel: about 1.6).
WIDE_RATIO = 1.8
_BREAK = re.compile(r"(?<=/)(?=[^\s/])|(?<=[^\s._/])(?=[._][^\s._])")
_SVG_SIZE = re.compile(rb'<svg[^>]*?\bwidth="([\d.]+)(?:pt|px)?"[^>]*?\bheight="([\d.]+)(?:pt|px)?"', re.S)
MIN_BREAKABLE = 16  # shorter names fit any column as they are


def break_points(text: str) -> list[str]:
    """`text` cut where a long name may break: "a.b_c/d" -> ["a", ".b", "_c/", "d"]."""
    if len(text) < MIN_BREAKABLE:
        return [text]
    return [part for part in _BREAK.split(text) if part]


def _add_break_points(doctree) -> None:
    for literal in list(doctree.findall(nodes.literal)):
        for text in list(literal.findall(nodes.Text)):
            parts = break_points(str(text))
            if len(parts) < 2:
                continue
            new = []
            for i, part in enumerate(parts):
                if i:
                    new.append(nodes.raw("", "<wbr>", format="html"))
                new.append(nodes.Text(part))
            parent = text.parent
            index = parent.index(text)
            parent.remove(text)
            for offset, node in enumerate(new):
                parent.insert(index + offset, node)


def svg_aspect(path: Path) -> float | None:
    """Width over height of an SVG file, from its <svg> element; None if unreadable."""
    try:
        with path.open("rb") as f:
            head = f.read(4096)
    except OSError:
        return None
    m = _SVG_SIZE.search(head)
    if not m or float(m.group(2)) <= 0:
        return None
    return float(m.group(1)) / float(m.group(2))


def _mark_wide_figures(app, doctree) -> None:
    for image in doctree.findall(nodes.image):
        source = (image.get("candidates") or {}).get("*") or image.get("uri", "")
        if not source.endswith(".svg"):
            continue
        aspect = svg_aspect(Path(app.srcdir, source.lstrip("/")))
        if aspect is not None and aspect >= WIDE_RATIO:
            image["classes"] = list(image.get("classes", [])) + [WIDE_CLASS]


def _on_doctree_resolved(app, doctree, docname):
    if app.builder.format != "html":
        return
    _add_break_points(doctree)
    _mark_wide_figures(app, doctree)


def _search_label(app, pagename, templatename, context, doctree):
    """The theme's own word for "Search" in the edition's language, for
    book/_templates/search-button-field.html (through the theme's catalog, so that the
    book's catalogs need no copy of it)."""
    from sphinx.locale import get_translation
    context["andrea_search_label"] = str(get_translation("sphinx")("Search"))


def _add_stylesheet_folder(app, config):
    config.html_static_path = list(config.html_static_path or []) + [str(STATIC)]


def setup(app):
    app.connect("config-inited", _add_stylesheet_folder)
    app.connect("doctree-resolved", _on_doctree_resolved)
    app.connect("html-page-context", _search_label)
    app.add_css_file("andrea.css")
    app.add_js_file("andrea.js", loading_method="defer")
