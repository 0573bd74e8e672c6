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
import re
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Callable

LANGUAGES = ("en", "de", "ka")
LANGUAGE_NAMES = {"en": "English", "de": "Deutsch", "ka": "ქართული"}
ENV_VAR = "ANDREA_LANG"
LOCALES = Path(__file__).resolve().parent / "locales"
# The notebook metadata key, and the key under which a display output carries its
# translations (read when the book is built: andrea_ref/book_outputs.py).
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


def read_catalog(path: Path) -> dict[str, str]:
    """{message: translation} of one gettext catalog (``.po``): fuzzy and empty entries
    are left out. The one reader of the course's catalogs (the package's own, and the
    notebooks' in ``book/locales``, read by ``classroom.notebook_i18n``)."""
    try:
        from babel.messages.pofile import read_po
    except ImportError:  # pragma: no cover - Babel comes with Sphinx and with the package
        return {}
    with Path(path).open("rb") as f:
        return {m.id: m.string for m in read_po(f)
                if m.id and isinstance(m.id, str) and isinstance(m.string, str) and m.string and not m.fuzzy}


@lru_cache(maxsize=None)
def catalog(language: str) -> dict[str, str]:
    """Every translated message of `language` (fuzzy and empty entries are left out)."""
    check_language(language)
    if language == "en":
        return {}
    folder = LOCALES / language / "LC_MESSAGES"
    if not folder.is_dir():
        return {}
    messages: dict[str, str] = {}
    for po in sorted(folder.glob("*.po")):
        messages.update(read_catalog(po))
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
    """A ``_`` bound to one language (its ``language`` attribute names it)."""
    check_language(language)

    def translate(message: str) -> str:
        return gettext(message, language)

    translate.language = language
    return translate


# --------------------------------------------------------------------------- numbers
# One home for writing a number the reader's way: the book's glued numbers, tables,
# formulas and figure axes, and the checks' messages, all come through here. German
# and Georgian write a decimal comma and group thousands with a narrow no-break space
# (92,331,264 -> 92 331 264, 0.02 -> 0,02); English is left as it is.
DECIMAL_COMMA = frozenset({"de", "ka"})
_NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?([eE][+-]?\d+)?(?!\w|\.\d)")
# in TeX: 0.5, and 92{,}331{,}264 (a comma in braces: TeX's way of writing a comma
# without the space it puts after punctuation)
_TEX_NUMBER = re.compile(r"(?<![\w.{])(\d{1,3}(?:\{,\}\d{3})+|\d+)(\.\d+)?(?![\w.])")
_CODE_SPAN = re.compile(r"(`[^`]*`)")


def localise_number(text: str, language: str) -> str:
    """Every number in plain ``text`` as ``language`` writes it (0.02 -> 0,02 and
    92,331,264 -> 92\u202f331\u202f264 in German and Georgian; English unchanged)."""
    if language not in DECIMAL_COMMA:
        return text

    def one(m):
        whole, frac, exponent = m.group(1), m.group(2) or "", m.group(3) or ""
        return whole.replace(",", "\u202f") + ("," + frac[1:] if frac else "") + exponent

    return _NUMBER.sub(one, text)


def localise_message(text: str, language: str) -> str:
    """:func:`localise_number` on a message's prose, not on its `inline code`."""
    if language not in DECIMAL_COMMA:
        return text
    return "".join(part if part.startswith("`") else localise_number(part, language)
                   for part in _CODE_SPAN.split(text))


def localise_math(tex: str, language: str) -> str:
    """The numbers of a TeX formula as ``language`` writes them: ``0.5`` -> ``0{,}5``
    (a comma in braces: no space after it) and ``92{,}331{,}264`` -> ``92\\,331\\,264``."""
    if language not in DECIMAL_COMMA:
        return tex

    def one(m):
        whole, frac = m.group(1), m.group(2) or ""
        return whole.replace("{,}", "\\,") + ("{,}" + frac[1:] if frac else "")

    return _TEX_NUMBER.sub(one, tex)


def localise_figure(fig, language: str):
    """A matplotlib figure's numbers as ``language`` writes them: the tick labels of
    every axis (their formatters are wrapped, so ticks drawn later come out right too)
    and every other text in it (titles, labels, legends, annotations). Returns ``fig``."""
    if language not in DECIMAL_COMMA:
        return fig
    from matplotlib.text import Text
    from matplotlib.ticker import Formatter

    def local(text):
        if "$" in text:  # mathtext: numbers inside $...$ written the TeX way
            parts = re.split(r"(\$[^$]*\$)", text)
            return "".join(localise_math(p, language) if p.startswith("$") else localise_number(p, language)
                           for p in parts)
        return localise_number(text, language)

    class Localised(Formatter):
        def __init__(self, inner):
            self.inner = inner

        def set_axis(self, axis):
            super().set_axis(axis)
            self.inner.set_axis(axis)

        def set_locs(self, locs):
            self.inner.set_locs(locs)

        def __call__(self, x, pos=None):
            return local(self.inner(x, pos))

        def format_ticks(self, values):
            return [local(t) for t in self.inner.format_ticks(values)]

        def get_offset(self):
            return local(self.inner.get_offset())

        def format_data_short(self, value):
            return local(self.inner.format_data_short(value))

    for ax in fig.axes:
        for axis in ax._axis_map.values() if hasattr(ax, "_axis_map") else (ax.xaxis, ax.yaxis):
            for which in ("major", "minor"):
                ticker = getattr(axis, which)
                if not isinstance(ticker.formatter, Localised):
                    formatter = Localised(ticker.formatter)
                    (axis.set_major_formatter if which == "major" else axis.set_minor_formatter)(formatter)
    for text in fig.findobj(Text):
        value = text.get_text()
        if value:
            new = local(value)
            if new != value:
                text.set_text(new)
    return fig



# --------------------------------------------------------------------------- sorting
_GERMAN_LETTERS = str.maketrans({"ä": "a", "ö": "o", "ü": "u", "ß": "ss", "à": "a", "é": "e", "è": "e"})


def collation_key(text: str, language: str) -> tuple:
    """A sort key that puts words in ``language``'s dictionary order: German as DIN 5007-1
    (ä with a, ö with o, ü with u, ß as ss, case ignored; the plain word first on a tie),
    Georgian in its alphabet's order (Unicode's Mkhedruli order: ა ბ გ დ ე ვ ზ თ ...)
    with Georgian words before Latin ones; English by letters, case ignored. Digits
    come first in every language."""
    folded = text.casefold()
    if language == "de":
        folded = folded.translate(_GERMAN_LETTERS)
    elif language == "ka":
        # Georgian before Latin: Mkhedruli letters keep their places, Latin ones follow them
        folded = "".join(ch if not ("a" <= ch <= "z") else "\U000f0000" + ch for ch in folded)
    return (folded, text)

def _mimebundle(obj, language: str = "en") -> dict:
    """The display data of what a draw function returned (a figure, HTML or text), a
    figure's numbers written the way of ``language``."""
    try:
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover
        Figure = ()
    if Figure and isinstance(obj, Figure):
        import io
        import matplotlib.pyplot as plt
        buf = io.StringIO()
        localise_figure(obj, language)
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
        self.bundles = {lang: _mimebundle(draw(translator(lang)), lang) for lang in LANGUAGES}

    def _repr_mimebundle_(self, include=None, exclude=None):
        others = {lang: bundle for lang, bundle in self.bundles.items() if lang != "en"}
        return self.bundles["en"], {OUTPUT_KEY: others}


def localised(draw: Callable[[Callable[[str], str]], object]) -> Localised:
    """Draw a figure or table in every language: ``draw(_)`` gets the language's ``_``.

    ``draw`` returns a matplotlib figure (shown as SVG), an object with ``_repr_html_``
    (a table), one with ``_repr_markdown_`` (a note) or a str. Show the result as a cell's last value, or with ``display``.
    """
    return Localised(draw)
