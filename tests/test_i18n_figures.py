"""The labels of the book's figures and tables in German and Georgian (andrea_ref.i18n).

The chapters draw each figure and code-built table with ``localised(draw)``; the words
come from andrea_ref/locales/<lang>/LC_MESSAGES/figures.po. These tests check that the
catalogs are complete, that ``gettext`` and ``localised`` use them, and that the Georgian
labels render in matplotlib's default font.
"""
from __future__ import annotations

import logging
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from babel.messages.pofile import read_po  # noqa: E402

from andrea_ref import i18n  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TRANSLATED = ("de", "ka")


def figures_po(language: str) -> Path:
    return i18n.LOCALES / language / "LC_MESSAGES" / "figures.po"


def entries(language: str) -> dict:
    with figures_po(language).open("rb") as f:
        return {m.id: m for m in read_po(f) if m.id}


# a label the chapters draw (chapter 3's gradient figure) and its translations
LABEL = "number of blocks"
EXPECTED = {"de": "Anzahl der Blöcke", "ka": "ბლოკების რაოდენობა"}


@pytest.mark.parametrize("language", TRANSLATED)
def test_every_figure_message_is_translated(language):
    found = entries(language)
    assert len(found) > 50, f"{figures_po(language)} has only {len(found)} messages"
    bad = [mid for mid, m in found.items()
           if m.fuzzy or not isinstance(m.string, str) or not m.string.strip()]
    assert not bad, f"{language}: untranslated or fuzzy: {bad}"


def _script(name: str):
    """A module of scripts/ (catalogs, i18n_check)."""
    import importlib
    return importlib.import_module(f"scripts.{name}")


@pytest.mark.parametrize("language", TRANSLATED)
def test_catalog_covers_every_label_the_chapters_mark(language):
    catalogs = _script("catalogs")
    wanted = {message for message, _ in catalogs.figure_messages()}
    missing = sorted(wanted - set(entries(language)))
    assert not missing, f"{language}: labels not in figures.po (run scripts/catalogs.py): {missing}"


@pytest.mark.parametrize("language", TRANSLATED)
def test_catalogs_pass_the_translation_check(language):
    i18n_check = _script("i18n_check")
    assert i18n_check.check_catalog(figures_po(language), language) == []


@pytest.mark.parametrize("language", TRANSLATED)
def test_gettext_returns_the_catalog_translation(language):
    assert entries(language)[LABEL].string == EXPECTED[language]
    assert i18n.gettext(LABEL, language) == EXPECTED[language]
    assert i18n.translator(language)(LABEL) == EXPECTED[language]
    # placeholders survive translation and are filled in afterwards
    assert "{n}" in i18n.gettext("up to {n} blocks (linear scale)", language)
    assert "32" in i18n.gettext("up to {n} blocks (linear scale)", language).format(n=32)


@pytest.mark.parametrize("language", ("en",) + TRANSLATED)
def test_gettext_falls_back_to_english(language):
    unknown = "a message no catalog has, 7f3c"
    assert i18n.gettext(unknown, language) == unknown
    assert i18n.gettext(LABEL, "en") == LABEL


def test_gettext_follows_the_environment(monkeypatch):
    monkeypatch.setenv(i18n.ENV_VAR, "de")
    assert i18n.gettext(LABEL) == EXPECTED["de"]
    monkeypatch.setenv(i18n.ENV_VAR, "en")
    assert i18n.gettext(LABEL) == LABEL


def _figure(_):
    fig, ax = plt.subplots()
    ax.plot([1, 2, 4], [1.0, 0.5, 0.25], label=_("with residuals"))
    ax.set_xlabel(_(LABEL))
    ax.legend()
    return fig


def test_localised_figure_carries_every_language():
    shown = i18n.localised(_figure)
    data, metadata = shown._repr_mimebundle_()
    assert set(data) == {"image/svg+xml", "text/plain"}
    english = data["image/svg+xml"]
    assert LABEL in english  # matplotlib keeps each text as a comment beside its glyphs
    others = metadata[i18n.OUTPUT_KEY]
    assert set(others) == set(TRANSLATED)
    for language in TRANSLATED:
        svg = others[language]["image/svg+xml"]
        assert svg != english
        assert EXPECTED[language] in svg
        assert LABEL not in svg
    assert not plt.get_fignums(), "localised must close the figures it draws"


def test_localised_table_and_note():
    from IPython.display import HTML, Markdown

    table = i18n.localised(lambda _: HTML(f"<table><tr><th>{_('points')}</th></tr></table>"))
    data, metadata = table._repr_mimebundle_()
    assert "<th>points</th>" in data["text/html"]
    assert "<th>Punkte</th>" in metadata[i18n.OUTPUT_KEY]["de"]["text/html"]
    assert "<th>ქულები</th>" in metadata[i18n.OUTPUT_KEY]["ka"]["text/html"]

    note = i18n.localised(lambda _: Markdown(_("copy")))
    data, metadata = note._repr_mimebundle_()
    assert data["text/markdown"] == "copy"
    assert metadata[i18n.OUTPUT_KEY]["de"]["text/markdown"] == "Kopie"

    text = i18n.localised(lambda _: _("total"))
    data, metadata = text._repr_mimebundle_()
    assert data == {"text/plain": "total"}
    assert metadata[i18n.OUTPUT_KEY]["de"] == {"text/plain": "gesamt"}


def test_georgian_labels_draw_without_missing_glyphs(caplog):
    """DejaVu Sans, matplotlib's default font, has Georgian: no label falls back to boxes."""
    import io

    translations = [m.string for m in entries("ka").values()]
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        with matplotlib.rc_context({"font.family": "sans-serif"}):
            fig, ax = plt.subplots(figsize=(8, 0.3 * len(translations)))
            for i, text in enumerate(translations):
                ax.text(0, i, text.replace("\\n", " ").replace("\n", " "))
            ax.set_ylim(-1, len(translations))
            ax.set_xlabel(i18n.gettext(LABEL, "ka"))
            fig.savefig(io.StringIO(), format="svg")
            fig.savefig(io.BytesIO(), format="png")
            plt.close(fig)
    glyph = [str(w.message) for w in caught if "Glyph" in str(w.message) or "missing from" in str(w.message)]
    glyph += [r.getMessage() for r in caplog.records if "Glyph" in r.getMessage()]
    assert not glyph, glyph[:3]


def test_bad_draw_return_type_names_draw():
    with pytest.raises(TypeError, match="draw"):
        i18n.localised(lambda _: 42)
    with pytest.raises(TypeError, match="draw"):
        i18n.localised(lambda _: None)


def test_draw_must_be_callable():
    with pytest.raises(TypeError, match="draw"):
        i18n.localised("not a function")


@pytest.mark.parametrize("bad", ["fr", "DE", "", None, 3])
def test_bad_language_names_the_argument(bad):
    with pytest.raises(ValueError, match="language"):
        i18n.gettext(LABEL, bad) if bad is not None else i18n.check_language(bad)
    with pytest.raises(ValueError, match="language"):
        i18n.translator(bad)
    with pytest.raises(ValueError, match="lang"):
        i18n.check_language(bad, name="lang")
