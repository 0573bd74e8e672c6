"""The course in English, German and Georgian: the package's own words in the reader's language.

What the package itself writes is translated here: the labels of the book's figures
and the headers of its tables, and the grading checks' messages (what went wrong, the
likely mistake and its fix). The translations are gettext catalogs,
``andrea_ref/locales/<lang>/LC_MESSAGES/*.po``, kept up to date like the book's own
(README, "Translating the course"); English is the fallback for anything missing.

The language is one setting:

* the environment variable ``ANDREA_LANG`` (``en``, ``de`` or ``ka``), if set;
* otherwise the open notebook's metadata ``andrea.lang``: the translated notebooks
  carry it, and JupyterLab tells the kernel which notebook it runs
  (``JPY_SESSION_NAME``);
* otherwise English.

Code marks a message with ``_("...")`` where it is shown, and with ``N_("...")``
where it is only defined (a table of names translated later); placeholders are
``str.format`` fields, so ``_("{n} blocks").format(n=12)`` translates the sentence
and then fills it in. The book's figures use :func:`localised`: one call draws a
figure or table once per language, and each edition of the book shows its own.
"""
from __future__ import annotations

import json
import os
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Callable

LANGUAGES = ("en", "de", "ka")
LANGUAGE_NAMES = {"en": "English", "de": "Deutsch", "ka": "ქართული"}
ENV_VAR = "ANDREA_LANG"
LOCALES = Path(__file__).resolve().parent / "locales"
# The notebook metadata key, and the key under which a display output carries its
# translations (read by the book's Sphinx extension, book/_ext/andrea_book.py).
METADATA_KEY = "andrea"
OUTPUT_KEY = "andrea_ref/translations"

_warned: set[str] = set()


def check_language(language, *, name: str = "language") -> str:
    """Return `language` if it is one of the course's languages, else raise ValueError naming `name`."""
    if not isinstance(language, str) or language not in LANGUAGES:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, LANGUAGES))}, got {language!r}")
    return language


def _notebook_language() -> str | None:
    """``andrea.lang`` of the notebook this kernel runs, when JupyterLab says which one."""
    path = os.environ.get("JPY_SESSION_NAME")
    if not path or not path.endswith(".ipynb"):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f).get("metadata", {})
        lang = meta.get(METADATA_KEY, {}).get("lang")
    except (OSError, ValueError, AttributeError):
        return None
    return lang if lang in LANGUAGES else None


def current_language() -> str:
    """The language messages are shown in now (see the module's docstring)."""
    value = os.environ.get(ENV_VAR, "").strip()
    if value:
        if value in LANGUAGES:
            return value
        if value not in _warned:
            _warned.add(value)
            warnings.warn(f"{ENV_VAR}={value!r} is not one of {', '.join(LANGUAGES)}: using English",
                          stacklevel=2)
        return "en"
    return _notebook_language() or "en"


@lru_cache(maxsize=None)
def catalog(language: str) -> dict[str, str]:
    """Every translated message of `language` (fuzzy and empty entries are left out)."""
    check_language(language)
    if language == "en":
        return {}
    folder = LOCALES / language / "LC_MESSAGES"
    if not folder.is_dir():
        return {}
    try:
        from babel.messages.pofile import read_po
    except ImportError:  # pragma: no cover - Babel comes with Sphinx and with the package
        return {}
    messages: dict[str, str] = {}
    for po in sorted(folder.glob("*.po")):
        with po.open("rb") as f:
            for m in read_po(f):
                if m.id and isinstance(m.id, str) and isinstance(m.string, str) and m.string and not m.fuzzy:
                    messages[m.id] = m.string
    return messages


def gettext(message: str, language: str | None = None) -> str:
    """`message` in `language` (default: :func:`current_language`), English if untranslated."""
    lang = current_language() if language is None else check_language(language)
    return catalog(lang).get(message, message)


def N_(message: str) -> str:
    """Mark `message` for translation without translating it yet (translate it with _ when shown)."""
    return message


_ = gettext


def translator(language: str) -> Callable[[str], str]:
    """A ``_`` bound to one language."""
    check_language(language)
    return lambda message: gettext(message, language)


def _mimebundle(obj) -> dict:
    """The display data of what a draw function returned: a figure, HTML or text."""
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover
        Figure = ()
    if Figure and isinstance(obj, Figure):
        import io
        import matplotlib.pyplot as plt
        buf = io.StringIO()
        obj.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
        plt.close(obj)
        return {"image/svg+xml": buf.getvalue(), "text/plain": "<Figure>"}
    if hasattr(obj, "_repr_html_"):
        return {"text/html": obj._repr_html_(), "text/plain": "<HTML>"}
    if hasattr(obj, "_repr_markdown_"):  # IPython.display.Markdown: a note in place of a table
        return {"text/markdown": obj._repr_markdown_(), "text/plain": "<Markdown>"}
    if isinstance(obj, str):
        return {"text/plain": obj}
    raise TypeError(f"draw must return a matplotlib Figure, an object with _repr_html_ or _repr_markdown_, "
                    f"or a str, got {type(obj).__name__}")


class Localised:
    """A figure, table or text drawn once per language (see :func:`localised`).

    In Jupyter it shows the English one, and carries the others in the output's
    metadata, where each edition of the book finds its own.
    """

    def __init__(self, draw: Callable[[Callable[[str], str]], object]):
        if not callable(draw):
            raise TypeError(f"draw must be a function taking a translation function, got {type(draw).__name__}")
        self.bundles = {lang: _mimebundle(draw(translator(lang))) for lang in LANGUAGES}

    def _repr_mimebundle_(self, include=None, exclude=None):
        others = {lang: bundle for lang, bundle in self.bundles.items() if lang != "en"}
        return self.bundles["en"], {OUTPUT_KEY: others}


def localised(draw: Callable[[Callable[[str], str]], object]) -> Localised:
    """Draw a figure or table in every language: ``draw(_)`` gets the language's ``_``.

    ``draw`` returns a matplotlib figure (shown as SVG), an object with ``_repr_html_``
    (a table), one with ``_repr_markdown_`` (a note) or a str. Show the result as a cell's last value, or with ``display``.
    """
    return Localised(draw)
