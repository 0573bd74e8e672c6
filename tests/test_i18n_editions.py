"""Each edition reads as its language writes: one term per concept (the term base),
numbers with the edition's decimal comma in prose, formulas, figures and the checks'
messages, the glossary in the language's order, and catalogs whose headers and
translator notes say what translators need to know.

The catalogs themselves are checked as they are in the repository (no extraction
needed); the checkers are also tested on made-up messages, so they cannot pass by
accident.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
from scripts import catalogs, i18n_check  # noqa: E402

from andrea_ref import i18n  # noqa: E402

LANGS = ("de", "ka")


def _catalog_files(lang):
    """Every catalog of the book, the notebooks and the package in `lang` (not the
    themes' hand-kept interface catalogs beside book/ and notebooks/)."""
    return sorted([*(ROOT / "book" / "locales" / lang / "LC_MESSAGES").glob("*/**/*.po"),
                   *(ROOT / "andrea_ref" / "locales" / lang / "LC_MESSAGES").glob("*.po")])


def _messages(path):
    with path.open("rb") as f:
        for m in read_po(f):
            if m.id and isinstance(m.id, str) and isinstance(m.string, str) and m.string:
                yield m


# ------------------------------------------------------------------ the term base
@pytest.mark.parametrize("lang", LANGS)
def test_every_catalog_uses_the_term_base(lang):
    concepts = i18n_check.termbase(lang)
    assert len(concepts) >= 5, f"{lang}: the term base has only {len(concepts)} concepts"
    files = _catalog_files(lang)
    # book chapters, notebooks and the checks' messages are all covered
    assert {p.parent.name for p in files} >= {"book", "notebooks", "LC_MESSAGES"}
    problems = [f"{p.relative_to(ROOT)}: {problem}: {m.id[:60]!r}"
                for p in files for m in _messages(p)
                for problem in i18n_check.term_problems(m.id, m.string, lang)]
    assert not problems, "\n".join(problems[:30])


@pytest.mark.parametrize("lang, msgid, msgstr, found", [
    # the task's word and the error message's word for one concept must be the same
    ("ka", "Each token is normalised over the last axis with the biased variance.",
     "თითოეული ტოკენი ნორმალიზდება შეუსწორებელი დისპერსიით.", "შეუსწორებელი"),
    ("ka", "the unbiased estimate", "შესწორებული შეფასება", "შესწორებული"),
    ("ka", "one gain per feature", "თითო მახასიათებელზე", "მახასიათებელზე"),
    ("ka", "the output of the block", "ბლოკის გამოსავალი", "გამოსავალი"),
    ("ka", "beta adds an offset", "beta წანაცვლებას ამატებს", "წანაცვლებას"),
    ("de", "ANDREA's GELU is the tanh form.", "Das GELU von ANDREA ist die tanh-Form.", "Das GELU"),
    ("de", "so the softmax spreads", "deshalb verteilt der Softmax", "verteilt der Softmax"),
    ("de", "the normalised vector", "der normierte Vektor", "normierte"),
    ("de", "eight features per row", "acht Features pro Zeile", "Features"),
])
def test_a_term_outside_the_base_fails_the_check(lang, msgid, msgstr, found):
    problems = i18n_check.check_message(msgid, msgstr, lang)
    assert any(p.startswith("term base:") and repr(found) in p for p in problems), problems
    # ... and the problem names the term to write and where the base is
    assert any(f"termbase.toml" in p for p in problems)


@pytest.mark.parametrize("lang, msgid, msgstr", [
    ("ka", "the biased variance", "წანაცვლებული დისპერსია"),
    ("ka", "$\\gamma = 1$, $\\beta = 0$, every bias is 0", "$\\gamma = 1$, $\\beta = 0$, ყველა წანაცვლება 0-ია"),
    ("ka", "a window shifted by one character", "ერთი სიმბოლოთი წანაცვლებული ფანჯარა"),
    ("de", "after the softmax", "nach der Softmax"),
    ("de", "the softmax weights", "die Softmax-Gewichte"),
    ("de", "A GELU pair", "Ein GELU-Paar"),
    ("de", "the normalised vector", "der normalisierte Vektor"),
    ("de", "the output limit `--max-output`", "die Ausgabegrenze `--max-output`"),
])
def test_the_base_terms_pass(lang, msgid, msgstr):
    assert i18n_check.term_problems(msgid, msgstr, lang) == []


def test_a_malformed_term_base_is_named(tmp_path):
    bad = tmp_path / "termbase.toml"
    bad.write_text('[[concept]]\nname = "feature"\nterm = "ნიშანი"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"termbase.toml: concept 1 \(feature\): expected `avoid`"):
        i18n_check.read_termbase(bad)
    bad.write_text('[[concept]]\nname = "x"\nterm = "y"\navoid = ["("]\n', encoding="utf-8")
    with pytest.raises(ValueError, match="bad regular expression"):
        i18n_check.read_termbase(bad)
    bad.write_text("[[concept]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not a readable term base"):
        i18n_check.read_termbase(bad)


@pytest.mark.parametrize("lang", LANGS)
def test_no_term_rules_out_its_own_term(lang):
    for concept in i18n_check.termbase(lang):
        for pattern in concept.avoid:
            assert not pattern.search(concept.term), (lang, concept.name, pattern.pattern)


# ------------------------------------------------------------------ numbers
def test_formulas_take_the_decimal_comma():
    assert i18n.localise_math(r"0.044715 x^3", "de") == r"0{,}044715 x^3"
    assert i18n.localise_math(r"|x| = 2.7", "ka") == r"|x| = 2{,}7"
    assert i18n.localise_math(r"92{,}331{,}264", "de") == r"92\,331\,264"
    # indices, commands and exponents are not numbers to rewrite
    tex = r"x_{1} + W_2 \cdot 10^{-5} + \sqrt{2\,n_\text{layer}}"
    assert i18n.localise_math(tex, "de") == tex
    assert i18n.localise_math(r"0.5", "en") == "0.5"


def test_figure_axes_and_labels_take_the_decimal_comma():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([0, 0.5, 1.5], [0.25, 0.5, 0.75], label="slope 0.5")
    ax.set_title("max 0.25 at $x = 1.5$")
    ax.legend()
    i18n.localise_figure(fig, "de")
    fig.canvas.draw()
    xticks = [t.get_text() for t in ax.get_xticklabels()]
    assert "0,4" in xticks and not any("." in t for t in xticks), xticks
    assert ax.get_title() == "max 0,25 at $x = 1{,}5$"
    assert ax.get_legend().get_texts()[0].get_text() == "slope 0,5"
    plt.close(fig)
    # the English figure keeps its points
    fig, ax = plt.subplots()
    ax.plot([0, 1.5], [0, 1])
    i18n.localise_figure(fig, "en")
    fig.canvas.draw()
    assert "0.4" in [t.get_text() for t in ax.get_xticklabels()]
    plt.close(fig)


def test_a_localised_figure_carries_each_editions_numbers():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams["svg.fonttype"] = "none"  # text stays text, so the numbers can be read
    try:
        def draw(_):
            fig, ax = plt.subplots()
            ax.set_xlabel(_("number of blocks"))
            ax.text(0.5, 0.5, "0.125")
            return fig
        bundles = i18n.localised(draw).bundles
    finally:
        plt.rcParams["svg.fonttype"] = "path"
    assert "0.125" in bundles["en"]["image/svg+xml"]
    for lang in LANGS:
        svg = bundles[lang]["image/svg+xml"]
        assert "0,125" in svg and "0.125" not in svg


@pytest.mark.parametrize("lang, expected", [("en", "allowed 0.001 (rtol = 0.001"), ("de", "erlaubt 0,001 (rtol = 0,001"),
                                             ("ka", "დასაშვებია 0,001 (rtol = 0,001")])
def test_the_checks_write_their_numbers_the_learners_way(monkeypatch, lang, expected):
    import torch
    from andrea_ref.grading import compare, messages
    monkeypatch.setenv(i18n.ENV_VAR, lang)
    message = compare.mismatch(torch.tensor([1.5]), torch.tensor([1.0]), (1e-3, 0.0))
    assert message is not None and expected in message, message
    if lang == "en":
        assert "1.5" in message and "0.5" in message
    else:
        assert "1,5" in message and "0,5" in message and "1.5" not in message
    assert messages.number(0.25) == ("0.25" if lang == "en" else "0,25")


@pytest.mark.parametrize("lang, msgid, msgstr, ok", [
    ("de", "The factor 0.5 is missing.", "Der Faktor 0.5 fehlt.", False),
    ("de", "The factor 0.5 is missing.", "Der Faktor 0,5 fehlt.", True),
    # code keeps its point: in backticks, a call's argument, a product
    ("de", "compute (0.5 * x, not x.mul_(0.5))", "rechne (0.5 * x, nicht x.mul_(0.5))", True),
    ("ka", "use `x * 0.5`", "გამოიყენეთ `x * 0.5`", True),
    # a formula may be written either way; its value may not change
    ("de", "about $4.7 \\times 10^{-4}$", "etwa $4{,}7 \\times 10^{-4}$", True),
    ("de", "about $4.7 \\times 10^{-4}$", "etwa $4.7 \\times 10^{-4}$", True),
    ("de", "about $4.7 \\times 10^{-4}$", "etwa $4{,}8 \\times 10^{-4}$", False),
])
def test_the_checker_wants_the_editions_decimal_comma(lang, msgid, msgstr, ok):
    problems = i18n_check.check_message(msgid, msgstr, lang)
    assert (problems == []) == ok, problems


def test_a_messages_code_keeps_its_points():
    assert i18n.localise_message("use `x * 0.5`, not 0.25", "de") == "use `x * 0.5`, not 0,25"


# ------------------------------------------------------------------ glossary order
def test_german_order_puts_umlauts_with_their_letters():
    words = ["Zahl", "Überblick", "Uhr", "Äquivalenz", "Abschnitt", "Masse", "Maße", "Ordnung", "Öl"]
    assert sorted(words, key=lambda w: i18n.collation_key(w, "de")) == [
        "Abschnitt", "Äquivalenz", "Masse", "Maße", "Öl", "Ordnung", "Überblick", "Uhr", "Zahl"]


def test_georgian_order_follows_the_alphabet():
    # ა ბ გ დ ე ვ ზ თ ი კ ლ მ ნ ო პ ჟ რ ს ტ უ ფ ქ ღ ყ შ ჩ ც ძ წ ჭ ხ ჯ ჰ
    words = ["ჰიპოთეზა", "ყურადღება", "ტოკენი", "ბლოკი", "ამოცანა", "GELU", "ვექტორი", "თავი", "MLP"]
    assert sorted(words, key=lambda w: i18n.collation_key(w, "ka")) == [
        "ამოცანა", "ბლოკი", "ვექტორი", "თავი", "ტოკენი", "ყურადღება", "ჰიპოთეზა", "GELU", "MLP"]


# ------------------------------------------------------------------ catalog headers and notes
@pytest.mark.parametrize("lang", LANGS)
def test_catalog_headers_name_the_project_language_and_team(lang):
    for path in _catalog_files(lang):
        with path.open("rb") as f:
            catalog = read_po(f)
        where = path.relative_to(ROOT)
        assert catalog.project == catalogs.PROJECT, where
        assert str(catalog.locale) == lang, where
        assert catalog.language_team == catalogs.LANGUAGE_TEAMS[lang], where
        head = path.read_text(encoding="utf-8")[:600]
        assert "Project name not set" not in head and "SOME DESCRIPTIVE TITLE" not in head, where


@pytest.mark.parametrize("lang", LANGS)
def test_every_placeholder_has_a_translator_note(lang):
    missing = []
    total = 0
    for path in _catalog_files(lang):
        with path.open("rb") as f:
            for m in read_po(f):
                if not m.id or not isinstance(m.id, str):
                    continue
                notes = " ".join(m.auto_comments)
                wanted = re.findall(r"\{[a-z][\w:-]*\}`[^`]*`", m.id)
                if not re.search(r"\\[a-zA-Z]", m.id):  # TeX braces are no fields
                    wanted += re.findall(r"(?<![\w`{$\\^_])\{(?:[A-Za-z_]\w*|\d+)(?::[^{}]*)?\}(?!`)",
                                         re.sub(r"`[^`]*`|\$[^$]*\$", " ", m.id))
                total += bool(wanted)
                for w in wanted:
                    if w not in notes:
                        missing.append(f"{path.relative_to(ROOT)}: {w} in {m.id[:60]!r}")
    assert total > 100, total
    assert not missing, "run `python scripts/catalogs.py --annotate-only`:\n" + "\n".join(missing[:20])


def test_placeholder_notes_say_what_each_is():
    notes = catalogs.placeholder_notes("mean {glue:text}`ln_mean:.1f`, see {term}`LayerNorm <layernorm>` "
                                       "{cite}`ba2016layernorm`")
    assert any(n.startswith("{glue:text}`ln_mean:.1f`") and "computed when the book is built" in n for n in notes)
    assert any("translate the visible text" in n and "<layernorm>" in n for n in notes)
    assert any("citation" in n for n in notes)
    notes = catalogs.placeholder_notes("`{name}` returned shape {got}; expected {shape} and {0}")
    # `{name}` in inline code is shown as code, not filled in
    assert [n.split(":")[0] for n in notes] == ["{got}", "{shape}", "{0}"]
    assert catalogs.placeholder_notes(r"\operatorname{MLP}(x) = x W_{1}") == []


def test_annotating_twice_changes_nothing(tmp_path):
    source = ROOT / "andrea_ref" / "locales" / "ka" / "LC_MESSAGES" / "grading.po"
    copy = tmp_path / "grading.po"
    copy.write_bytes(source.read_bytes())
    catalogs.annotate(copy, "ka")
    once = copy.read_bytes()
    catalogs.annotate(copy, "ka")
    assert copy.read_bytes() == once
    assert once == source.read_bytes(), "the repository's catalog is not annotated: run catalogs.py --annotate-only"


# ------------------------------------------------------------------ the themes' words
def test_the_georgian_edition_has_the_themes_interface_words():
    import sphinx_book_theme
    from babel.messages.pofile import read_po as read
    base = Path(sphinx_book_theme.__file__).parent / "theme" / "sphinx_book_theme" / "static" / "locales"
    with (base / "de" / "LC_MESSAGES" / "booktheme.po").open("rb") as f:
        theirs = {m.id for m in read(f) if m.id}
    mine = {}
    for domain in ("booktheme", "sphinx"):
        with (ROOT / "book" / "locales" / "ka" / "LC_MESSAGES" / f"{domain}.po").open("rb") as f:
            mine[domain] = {m.id: m.string for m in read(f) if m.id}
    assert theirs <= set(mine["booktheme"]), theirs - set(mine["booktheme"])
    for must in ("Back to top", "On this page", "Search", "Skip to main content", "Link to this heading"):
        assert must in mine["sphinx"], must
    for domain, messages in mine.items():
        for msgid, msgstr in messages.items():
            assert msgstr, (domain, msgid)
            assert re.findall(r"%\(\w+\)s", msgid) == re.findall(r"%\(\w+\)s", msgstr), (domain, msgid)
    assert mine["booktheme"]["Contents"] == "სარჩევი"


# ------------------------------------------------------------------ the built editions
HTML = ROOT / "_build" / "html"
EDITION_DIRS = {"en": HTML, "de": HTML / "de", "ka": HTML / "ka"}


def _page(lang, name):
    path = EDITION_DIRS[lang] / f"{name}.html"
    if not path.is_file():
        pytest.fail(f"{path.relative_to(ROOT)} is missing: build the book first (make book)")
    return path.read_text(encoding="utf-8")


def _visible(html):
    """The page's text and the attributes a reader meets (labels, tooltips, placeholders)."""
    html = re.sub(r"<(script|style)\b.*?</\1>", " ", html, flags=re.S)
    attrs = re.findall(r'(?:title|aria-label|placeholder|data-tooltip)="([^"]*)"', html)
    return re.sub(r"<[^>]+>", " ", html) + " " + " ".join(attrs)


@pytest.mark.parametrize("lang", ("en", "de", "ka"))
def test_every_page_says_its_language_so_words_hyphenate_by_it(lang):
    for name in ("book/01_welcome", "book/glossary"):
        assert re.search(rf'<html[^>]*\blang="{lang}"', _page(lang, name)), (lang, name)
    css = (ROOT / "book" / "_static" / "andrea.css").read_text(encoding="utf-8")
    assert re.search(r"article\.bd-article h1[^{]*\{[^}]*\bhyphens:\s*auto", css)


def test_the_georgian_edition_shows_the_themes_words_in_georgian():
    text = _visible(_page("ka", "book/05_mlp_and_gelu"))
    for english, georgian in (("Back to top", "თავში დაბრუნება"), ("Contents", "სარჩევი"),
                              ("Search the book...", "წიგნში ძიება..."), ("Print to PDF", "PDF-ად ამობეჭდვა"),
                              ("On this page", "ამ გვერდზე"),
                              ("Toggle primary sidebar", "მთავარი გვერდითი ზოლის გახსნა და დახურვა")):
        assert georgian in text, georgian
        assert english not in text, english


@pytest.mark.parametrize("lang", ("de", "ka"))
def test_the_glossary_is_in_its_languages_order(lang):
    html = _page(lang, "book/glossary")
    dl = re.search(r'<dl class="[^"]*glossary[^"]*">(.*?)</dl>', html, re.S)
    assert dl, "no glossary on the page"
    # an entry is one or more terms (<dt>) and its definition (<dd>): its first term sorts it
    entries = re.split(r"<dd\b.*?</dd>", dl.group(1), flags=re.S)
    firsts = []
    for entry in entries:
        dts = re.findall(r"<dt\b[^>]*>(.*?)</dt>", entry, re.S)
        if dts:
            firsts.append(re.sub(r"<[^>]+>", "", dts[0]).replace("\u00b6", "").strip())
    assert len(firsts) > 20, firsts
    keys = [i18n.collation_key(t, lang) for t in firsts]
    assert keys == sorted(keys), [t for t, k, nxt in zip(firsts, keys, keys[1:]) if k > nxt][:5]


@pytest.mark.parametrize("lang", ("de", "ka"))
def test_formulas_are_written_the_editions_way(lang):
    html = _page(lang, "book/05_mlp_and_gelu")
    assert "0{,}044715" in html and "0.044715" not in re.sub(r"<(pre|code)\b.*?</\1>", " ", html, flags=re.S)
    assert "0.044715" in _page("en", "book/05_mlp_and_gelu")
