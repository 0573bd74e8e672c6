"""``{glue:...}`` roles inside translated messages.

Sphinx parses each translated message as a small document of its own, which has none of
the notebook's glued values, so MyST-NB would report every key missing (an open gap in
MyST-NB: glue and Sphinx's translations do not meet). MyST-NB drops its renderer (which
holds the glued values) from a document once the document is parsed, so the renderer of
the latest notebook that looked up a value is kept here, and keys a message does not find
are looked up in it when that notebook is the document being translated.

This reaches into MyST-NB's internals (``myst_nb.ext.glue``), so it runs only on the
MyST-NB versions it was tested with (``TESTED_MYST_NB``, the version requirements.txt
pins) and stops the build with a clear message on any other.
"""
from __future__ import annotations

import contextvars
from importlib import metadata

from sphinx.errors import ExtensionError

# MyST-NB versions whose glue lookup this patch was checked against (the German and
# Georgian editions build, and tests/test_book_glue.py passes).
TESTED_MYST_NB = ("1.4.0",)

# The document whose messages Sphinx is translating (set while its Locale transform runs).
_translating = contextvars.ContextVar("andrea_translating", default=None)


def check_myst_nb_version(version: str | None = None) -> None:
    """Raise ExtensionError unless `version` (default: the installed MyST-NB) was tested."""
    version = version or metadata.version("myst-nb")
    if version not in TESTED_MYST_NB:
        raise ExtensionError(
            f"andrea_book: MyST-NB {version} is installed, but the glue lookup in translated "
            f"pages is tested only with MyST-NB {', '.join(TESTED_MYST_NB)}: install that version "
            f"(requirements.txt pins it), or check book/_ext/andrea_book/glue.py against MyST-NB "
            f"{version} and add it to TESTED_MYST_NB")


def glue_in_translations() -> None:
    check_myst_nb_version()
    from myst_nb.core.variables import RetrievalError
    from myst_nb.ext.glue import directives, roles, utils
    from sphinx.transforms import i18n as sphinx_i18n
    if getattr(utils.retrieve_glue_data, "andrea_wrapped", False):
        return
    original = utils.retrieve_glue_data
    for module in (roles, directives):
        if getattr(module, "retrieve_glue_data", None) is not original:
            raise ExtensionError(f"andrea_book: {module.__name__}.retrieve_glue_data is not MyST-NB's "
                                 f"glue lookup any more: check book/_ext/andrea_book/glue.py")

    kept: dict[str, object] = {}

    def retrieve_glue_data(document, key):
        if "nb_renderer" in document:
            kept.clear()
            kept[document.get("source")] = document["nb_renderer"]
        try:
            return original(document, key)
        except RetrievalError:
            outer = _translating.get()
            renderer = kept.get(outer.get("source")) if outer is not None and outer is not document else None
            if renderer is None:
                raise
            return original({"nb_renderer": renderer}, key)

    retrieve_glue_data.andrea_wrapped = True
    for module in (utils, roles, directives):
        module.retrieve_glue_data = retrieve_glue_data

    locale_apply = sphinx_i18n.Locale.apply

    def apply(self, **kwargs):
        token = _translating.set(self.document)
        try:
            return locale_apply(self, **kwargs)
        finally:
            _translating.reset(token)

    sphinx_i18n.Locale.apply = apply


def setup(app):
    glue_in_translations()
