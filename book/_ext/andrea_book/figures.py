"""Alt text in every edition: the alt text of figures (notebook outputs and ``{figure}``)
and of Graphviz diagrams goes through the chapter's catalog, like its prose. Sphinx
extracts neither (notebook outputs are not text it reads, and the graphviz directive's
``:alt:`` is an attribute), so each alt text becomes a hidden paragraph before
translation and goes back into the alt text afterwards."""
from __future__ import annotations

import html
import re

from docutils import nodes
from sphinx.ext.graphviz import graphviz
from sphinx.transforms import SphinxTransform

ALT_CLASS = "andrea-alt-text"


def _has_alt(node) -> bool:
    return isinstance(node, (nodes.image, graphviz))


def _alt_anchor(image):
    """Where a figure's alt-text message goes: after the image, or after the whole output
    when the image is one of a notebook output's formats (MyST-NB keeps one of them
    later, per builder)."""
    node = image
    while node.parent is not None and not isinstance(node.parent, nodes.document):
        if node.parent.get("nb_element") == "mime_bundle":
            return node.parent
        node = node.parent
    return image


class AltTextToMessage(SphinxTransform):
    """Before translation: a figure's alt text becomes a hidden paragraph, a message the
    gettext builder extracts and the Locale transform translates."""
    default_priority = 15  # sphinx.transforms.i18n.Locale runs at 20

    def apply(self, **kwargs):
        done = set()
        for image in list(self.document.findall(_has_alt)):
            alt = image.get("alt")
            anchor = _alt_anchor(image)
            if not alt or anchor.parent is None or (id(anchor), alt) in done:
                continue
            done.add((id(anchor), alt))
            para = nodes.paragraph(alt, alt, classes=[ALT_CLASS])
            para["andrea_alt"] = alt
            para.source = image.source or self.document["source"]
            para.line = image.line or 1
            anchor.parent.insert(anchor.parent.index(anchor) + 1, para)


class MessageToAltText(SphinxTransform):
    """After translation: the (translated) paragraph goes back into the image's alt text."""
    default_priority = 21

    def apply(self, **kwargs):
        if self.app.builder.name == "gettext":
            return  # the message catalogs are extracted from the paragraphs
        for para in list(self.document.findall(nodes.paragraph)):
            if ALT_CLASS not in para["classes"]:
                continue
            parent = para.parent
            index = parent.index(para)
            anchor = parent[index - 1] if index > 0 else None
            if anchor is not None:
                for image in [anchor] if _has_alt(anchor) else list(anchor.findall(_has_alt)):
                    if image.get("alt") == para.get("andrea_alt"):
                        image["alt"] = para.astext()
            parent.remove(para)


# Sphinx writes a Graphviz diagram as an <object> whose fallback paragraph holds the alt
# text; the fallback is not shown (nor read) while the SVG loads, so the object itself
# gets the alt text as its accessible name too.
_GRAPHVIZ_OBJECT = re.compile(
    r'<object data="([^"]*)" type="image/svg\+xml" class="([^"]*\bgraphviz\b[^"]*)">(\s*<p class="warning">(.*?)</p>)',
    re.S)


def name_diagrams(html_text: str) -> str:
    """<object ... class="graphviz"><p class="warning">ALT</p> gets role="img" and aria-label="ALT"."""
    def one(m):
        label = html.escape(html.unescape(re.sub(r"<[^>]*>", "", m.group(4))).strip(), quote=True)
        return (f'<object data="{m.group(1)}" type="image/svg+xml" class="{m.group(2)}" role="img" '
                f'aria-label="{label}">{m.group(3)}')
    return _GRAPHVIZ_OBJECT.sub(one, html_text)


def _name_diagrams_on_page(app, pagename, templatename, context, doctree):
    if "body" in context:
        context["body"] = name_diagrams(context["body"])


def setup(app):
    app.add_transform(AltTextToMessage)
    app.add_transform(MessageToAltText)
    app.connect("html-page-context", _name_diagrams_on_page)
