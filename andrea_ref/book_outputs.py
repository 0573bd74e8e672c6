"""The book's outputs in each edition: a MyST-NB mime renderer, and numbers the edition's way.

A chapter draws a figure or table once per language (:func:`andrea_ref.i18n.localised`);
the output shows the English one and carries the others in its metadata under
:data:`andrea_ref.i18n.OUTPUT_KEY`. When the book is built, MyST-NB asks the renderers
registered under its entry point group ``myst_nb.mime_renderers`` (pyproject.toml names
:class:`LocalisedOutputs` there) before its own: this one picks the edition's drawing and
writes the numbers of an HTML table the edition's way. Any other output it leaves alone,
so it is harmless in any other book built where the course package is installed.

This module imports nothing from MyST-NB or Sphinx: it is loaded from the entry point.
"""
from __future__ import annotations

import dataclasses
import re

from .i18n import LANGUAGES, OUTPUT_KEY, localise_number


_TAG = re.compile(r"(<[^>]*>)")


def localise_html_numbers(html: str, language: str) -> str:
    """localise_number (andrea_ref.i18n) on the text of an HTML table or list drawn by a chapter (not on
    its tags, nor inside <code> or <pre>)."""
    if language == "en":
        return html
    out, verbatim = [], 0
    for part in _TAG.split(html):
        if part.startswith("<"):
            name = re.match(r"</?\s*([a-zA-Z0-9]+)", part)
            if name and name.group(1).lower() in ("code", "pre", "script", "style"):
                verbatim += -1 if part.startswith("</") else (0 if part.endswith("/>") else 1)
                verbatim = max(verbatim, 0)
            out.append(part)
        else:
            out.append(part if verbatim else localise_number(part, language))
    return "".join(out)


def edition_language(config) -> str:
    """The language of the edition a Sphinx configuration builds (English by default)."""
    language = getattr(config, "language", None) or "en"
    return language if language in LANGUAGES else "en"


class LocalisedOutputs:
    """MyST-NB mime renderer: an output drawn per language shows the edition's own."""

    @staticmethod
    def handle_mime(renderer, data, inline):
        translations = data.output_metadata.get(OUTPUT_KEY)
        if not isinstance(translations, dict):
            return None
        # render the rest as usual: without the translations, so this is not asked again
        rest = {k: v for k, v in data.output_metadata.items() if k != OUTPUT_KEY}
        language = edition_language(renderer.renderer.sphinx_env.config)
        content = translations.get(language, {}).get(data.mime_type, data.content) \
            if language != "en" else data.content
        if data.mime_type == "text/html" and isinstance(content, str):
            content = localise_html_numbers(content, language)
        local = dataclasses.replace(data, content=content, output_metadata=rest)
        if inline:
            return renderer.render_mime_type_inline(local)
        return renderer.render_mime_type(local)
