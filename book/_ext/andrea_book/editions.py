"""Editions: the book is built once per language (English, German, Georgian; see
scripts/build_book.py), the prose translated by Sphinx's gettext catalogs (book/locales).
On top of that:

- each edition shows its own figures and tables: a chapter draws them once per language
  (andrea_ref.i18n.localised), and the mime renderer andrea_ref.book_outputs, registered
  through MyST-NB's entry point, picks the edition's own;
- the labels of Graphviz diagrams go through the package's catalog
  (andrea_ref/locales, figures.po);
- numbers computed at build time (glue) and the numbers of formulas are written the
  edition's way: decimal comma and grouped thousands in German and Georgian;
- a translated glossary is sorted in its language's order;
- the themes' interface words in editions the themes ship no catalog for (Georgian);
- a language menu in every page's header (book/_templates/andrea-language.html) and
  hreflang links in its head.
"""
from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from sphinx.transforms import SphinxTransform

from andrea_ref import i18n
from andrea_ref.book_outputs import edition_language

TEMPLATES = Path(__file__).resolve().parent.parent.parent / "_templates"

_GRAPHVIZ_LABEL = re.compile(r'label="((?:[^"\\]|\\.)*)"')


def _rewrite_text(node, rewrite) -> None:
    """Replace each text inside `node` by ``rewrite(text)`` where that differs."""
    for text in list(node.findall(nodes.Text)):
        new = rewrite(str(text))
        if new != str(text):
            text.parent.replace(text, nodes.Text(new))


class TranslateGraphviz(SphinxTransform):
    """The quoted labels of Graphviz diagrams, through the package's catalog."""
    default_priority = 21

    def apply(self, **kwargs):
        language = edition_language(self.config)
        if language == "en":
            return
        from sphinx.ext.graphviz import graphviz

        def swap(m):
            label = m.group(1)
            stripped = label.strip()
            translated = i18n.gettext(stripped, language) if stripped else stripped
            return 'label="' + label.replace(stripped, translated.replace('"', '\\"'), 1) + '"'

        for node in self.document.findall(graphviz):
            node["code"] = _GRAPHVIZ_LABEL.sub(swap, node["code"])


class LocaliseGluedNumbers(SphinxTransform):
    """Numbers pasted into the prose by ``{glue:text}`` in the edition's notation."""
    default_priority = 22

    def apply(self, **kwargs):
        language = edition_language(self.config)
        if language == "en":
            return
        for node in list(self.document.findall(nodes.inline)):
            classes = node.get("classes", ())
            # {glue:text} pastes "pasted-text"; {glue:} pastes the output's text/plain
            if "pasted-text" not in classes and not {"output", "text_plain"} <= set(classes):
                continue
            _rewrite_text(node, lambda t: i18n.localise_number(t, language))


class LocaliseMathNumbers(SphinxTransform):
    """Numbers in formulas (inline and displayed math) in the edition's notation:
    0.5 -> 0{,}5 in German and Georgian (andrea_ref.i18n.localise_math)."""
    default_priority = 22

    def apply(self, **kwargs):
        language = edition_language(self.config)
        if language == "en":
            return
        for node in list(self.document.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block)))):
            _rewrite_text(node, lambda t: i18n.localise_math(t, language))


class SortGlossary(SphinxTransform):
    """A translated edition's glossary in its own language's order (the English one keeps
    the order of its source), by the terms as the edition shows them
    (andrea_ref.i18n.collation_key)."""
    default_priority = 23

    def apply(self, **kwargs):
        language = edition_language(self.config)
        if language == "en":
            return
        from sphinx import addnodes
        for glossary in self.document.findall(addnodes.glossary):
            for dlist in glossary.findall(nodes.definition_list):
                items = [c for c in dlist.children if isinstance(c, nodes.definition_list_item)]
                if len(items) != len(dlist.children):
                    continue
                first = [next(iter(item.findall(nodes.term)), item).astext() for item in items]
                order = sorted(range(len(items)), key=lambda i: i18n.collation_key(first[i], language))
                dlist.children = [items[i] for i in order]


THEME_CATALOGS = ("booktheme",)  # the Sphinx Book Theme's own message domain
LOCALES = TEMPLATES.parent / "locales"


def _theme_catalogs(app, config):
    """The themes' interface words in editions the themes ship no catalog for (Georgian):
    book/locales/<lang>/LC_MESSAGES/sphinx.po (Sphinx's and the PyData theme's words,
    which Sphinx itself reads from the book's locale_dirs) and booktheme.po, compiled
    here and added as the Sphinx Book Theme's catalog."""
    language = edition_language(config)
    for domain in THEME_CATALOGS:
        po = LOCALES / language / "LC_MESSAGES" / f"{domain}.po"
        if language == "en" or not po.is_file():
            continue
        mo = po.with_suffix(".mo")
        if not mo.is_file() or mo.stat().st_mtime < po.stat().st_mtime:
            from babel.messages.mofile import write_mo
            from babel.messages.pofile import read_po
            with po.open("rb") as f:
                catalog = read_po(f)
            with mo.open("wb") as f:
                write_mo(f, catalog)
        app.add_message_catalog(domain, str(LOCALES))


def _search_text(app, pagename, templatename, context, doctree):
    """The search box's placeholder (``search_bar_text`` in _config.yml) in the edition's
    language, through the theme's catalog."""
    text = (app.config.html_theme_options or {}).get("search_bar_text")
    if text and edition_language(app.config) != "en":
        from sphinx.locale import get_translation
        context["theme_search_bar_text"] = str(get_translation(THEME_CATALOGS[0])(text))


# Accessible names the themes write in English in their own code, never through a catalog:
# the Sphinx Book Theme's primary navigation and its print-only table of contents
# (templates), and sphinx-togglebutton's buttons (made by its script). Their words live in
# booktheme.po beside the theme's others; book/_static/andrea.js puts them in each page.
HARD_CODED_LABELS = ("Main", "Page", "Toggle hidden content")


def _hard_coded_labels(app):
    """Give andrea.js the edition's words for :data:`HARD_CODED_LABELS` (none in English)."""
    if edition_language(app.config) == "en":
        return
    import json

    from sphinx.locale import get_translation
    words = get_translation(THEME_CATALOGS[0])
    table = {label: str(words(label)) for label in HARD_CODED_LABELS}
    table = {k: v for k, v in table.items() if v != k}
    if table:
        app.add_js_file(None, body=f"window.andreaLabels = {json.dumps(table, ensure_ascii=False)};")


def edition_url(pagename: str, current: str, target: str) -> str:
    """The relative address of `pagename` in edition `target`, seen from edition `current`.

    English is at the root of the site (_build/html), the others in a folder each
    (_build/html/de, _build/html/ka)."""
    up = "../" * pagename.count("/") + ("../" if current != "en" else "")
    return up + ("" if target == "en" else f"{target}/") + f"{pagename}.html"


def _add_language_menu(app, config):
    """The language menu (book/_templates/andrea-language.html) in every page's header.
    The book's templates come first, before the theme's components, so that
    book/_templates/search-button-field.html replaces the theme's own."""
    config.templates_path = [str(TEMPLATES)] + [p for p in (config.templates_path or []) if p != str(TEMPLATES)]
    options = dict(config.html_theme_options or {})
    end = options.get("article_header_end") or ["article-header-buttons.html"]
    end = [end] if isinstance(end, str) else list(end)
    if "andrea-language.html" not in end:
        end.insert(0, "andrea-language.html")
    options["article_header_end"] = end
    config.html_theme_options = options


def _language_links(app, pagename, templatename, context, doctree):
    """The menu's links, and hreflang links to the other editions in the page's head."""
    current = edition_language(app.config)
    # only the editions this site is built with (a site of one edition has no menu)
    editions = [lang for lang in i18n.LANGUAGES if lang in (app.config.andrea_editions or i18n.LANGUAGES)]
    links = [{"code": lang, "name": i18n.LANGUAGE_NAMES[lang], "url": edition_url(pagename, current, lang),
              "current": lang == current} for lang in editions] if len(editions) > 1 else []
    context["andrea_languages"] = links
    context["andrea_language_code"] = current
    context["andrea_language_label"] = {"en": "Language", "de": "Sprache", "ka": "ენა"}[current]
    context["metatags"] = context.get("metatags", "") + "".join(
        f'\n<link rel="alternate" hreflang="{link["code"]}" href="{link["url"]}" />'
        for link in links if not link["current"])


def setup(app):
    app.add_config_value("andrea_editions", None, "html")  # the editions the site is built with (default: all)
    app.connect("config-inited", _theme_catalogs)
    app.connect("config-inited", _add_language_menu)
    app.connect("builder-inited", _hard_coded_labels)
    app.connect("html-page-context", _search_text)
    app.connect("html-page-context", _language_links)
    app.add_transform(TranslateGraphviz)
    app.add_transform(LocaliseGluedNumbers)
    app.add_transform(LocaliseMathNumbers)
    app.add_transform(SortGlossary)
