"""The German and Georgian translations are complete, current and faithful.

The English text is extracted afresh (``scripts/catalogs.py``: the book with Sphinx's
gettext builder, the notebooks' markdown, the package's messages and the figures'
labels), so an English change that the catalogs do not have yet fails here: a message
with no translation, a fuzzy one, one whose markup (math, code, roles, link targets,
placeholders) or numbers differ from the English. The checker itself is tested on
made-up catalogs, so it cannot pass by accident. The translated notebooks keep every
code cell and every grading detail of the English release.
"""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

ROOT = Path(__file__).resolve().parent.parent
from scripts import catalogs, i18n_check  # noqa: E402
from andrea_ref.grading.manifest import load  # noqa: E402
from classroom import notebook_i18n  # noqa: E402

LANGS = ("de", "ka")


@pytest.fixture(scope="module")
def templates():
    """Fresh templates of every English message (as `make catalogs` extracts them)."""
    catalogs.extract()
    return catalogs.POT_DIR, catalogs.PACKAGE_POT_DIR


def test_every_english_message_is_translated_faithfully(templates):
    pot_dir, package_pot_dir = templates
    n_book = len(list((pot_dir / "book").glob("*.pot")))
    n_notebooks = len(list((pot_dir / "notebooks").glob("*.pot")))
    assert n_book >= 10 and n_notebooks == len(load()), (n_book, n_notebooks)
    problems = (i18n_check.catalog_problems(pot_dir, i18n_check.BOOK_LOCALES, LANGS)
                + i18n_check.catalog_problems(package_pot_dir, i18n_check.PACKAGE_LOCALES, LANGS))
    assert not problems, f"{len(problems)} problem(s); run `make catalogs` and translate (README):\n" + \
        "\n".join(problems[:40])


def test_the_templates_hold_the_book_the_notebooks_and_the_package(templates):
    pot_dir, package_pot_dir = templates
    book = (pot_dir / "book" / "03_residual_connections.pot").read_text(encoding="utf-8")
    assert 'msgid "Residual connections"' in book
    assert "Two panels of gradient norm" in book  # a figure's alt text is a message too
    nb = (pot_dir / "notebooks" / "02_layernorm.pot").read_text(encoding="utf-8")
    assert "Exercise 2: LayerNorm" in nb
    figures = (package_pot_dir / "figures.pot").read_text(encoding="utf-8")
    assert "number of blocks" in figures and "causal self-attention" in figures
    assert (package_pot_dir / "grading.pot").stat().st_size > 1000


# ------------------------------------------------------------------ the checker itself
def _po(tmp_path: Path, entries, lang="de") -> Path:
    cat = Catalog(locale=lang)
    for msgid, msgstr, *flags in entries:
        cat.add(msgid, msgstr, flags=flags)
    path = tmp_path / lang / "LC_MESSAGES" / "x.po"
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    write_po(buf, cat, width=0)
    path.write_bytes(buf.getvalue())
    return path


@pytest.mark.parametrize("msgid, msgstr, lang, problem", [
    ("Blocks are added.", "", "de", "not translated"),
    ("The model has 12 blocks.", "Das Modell hat 13 Blöcke.", "de", "numbers differ"),
    ("The model has 12 blocks.", "Das Modell hat Blöcke.", "de", "numbers differ"),
    ("It has 92,331,264 weights.", "Es hat 92 331 265 Gewichte.", "de", "numbers differ"),
    ("A {term}`block` adds.", "Ein Block addiert.", "de", "markup differs"),
    ("See {cite}`he2016`.", "Siehe {cite}`he2017`.", "de", "markup differs"),
    ("Value $x + 1$ here.", "Wert $x + 2$ hier.", "de", "markup differs"),
    ("Call `layer_norm` now.", "Rufe `layernorm` auf.", "de", "markup differs"),
    ("Read [this](04_x.md).", "Lies [das](05_x.md).", "de", "markup differs"),
    ("Shape {shape} is wrong.", "Form {form} ist falsch.", "de", "markup differs"),
    ("A block adds.", "ბლოკი ამატებს ბлოკს.", "ka", "mixed script"),
    ("It is 0.02 wide.", "Es ist 0.02 breit.", "de", "decimal comma"),
    ("The factor 0.5 is missing.", "აკლია მამრავლი 0.5.", "ka", "decimal comma"),
])
def test_the_checker_catches(tmp_path, msgid, msgstr, lang, problem):
    problems = i18n_check.check_catalog(_po(tmp_path, [(msgid, msgstr)], lang), lang)
    assert any(problem in p for p in problems), problems


def test_the_checker_catches_fuzzy_and_missing_entries(tmp_path):
    po = _po(tmp_path, [("Old text.", "Alter Text.", "fuzzy")])
    assert any("fuzzy" in p for p in i18n_check.check_catalog(po, "de"))
    pot = tmp_path / "x.pot"
    cat = Catalog()
    cat.add("Old text.")
    cat.add("A new English paragraph.")
    buf = io.BytesIO()
    write_po(buf, cat)
    pot.write_bytes(buf.getvalue())
    po = _po(tmp_path, [("Old text.", "Alter Text.")])
    assert any("missing" in p and "A new English" in p for p in i18n_check.check_catalog(po, "de", pot))


@pytest.mark.parametrize("msgid, msgstr, lang", [
    ("It is 0.02 wide and has 11,008 units.", "Es ist 0,02 breit und hat 11\u202f008 Einheiten.", "de"),
    ("It is 0.02 wide and has 11,008 units.", "Es ist 0,02 breit und hat 11.008 Einheiten.", "de"),
    ("GPT-2 from 2019 has 12 blocks of {term}`MLPs <MLP>`.",
     "GPT-2 von 2019 hat 12 Blöcke mit {term}`MLPs <MLP>`.", "de"),
    ("The {term}`MLP` and {glue:text}`n:,` values.", " MLP {term}`MLP <MLP>` და {glue:text}`n:,`.", "ka"),
    ("A ratio of 4x, from 1 to 64.", "შეფარდება 4-ჯერ, 1-დან 64-მდე.", "ka"),
])
def test_the_checker_accepts_faithful_translations(tmp_path, msgid, msgstr, lang):
    assert i18n_check.check_catalog(_po(tmp_path, [(msgid, msgstr)], lang), lang) == []


# ------------------------------------------------------------------- notebooks
@pytest.mark.parametrize("lang", LANGS)
def test_translated_notebooks_keep_every_code_cell_and_grading_detail(lang):
    from nbgrader.utils import compute_checksum
    import nbformat
    for assignment, paths in notebook_i18n.assignment_notebooks(ROOT / "exercises").items():
        messages = notebook_i18n.catalog(lang, assignment)
        for path in paths:
            english = json.loads(path.read_text(encoding="utf-8"))
            nb = notebook_i18n.translate_notebook(english, lang, messages)
            assert nb["metadata"]["andrea"] == {"lang": lang}
            assert len(nb["cells"]) == len(english["cells"])
            for before, after in zip(english["cells"], nb["cells"]):
                if before["cell_type"] == "code":
                    assert after == before, f"{path.name}: a code cell changed"
                    continue
                assert after["source"] != before["source"], f"{path.name}: a markdown cell stayed English"
                untranslated = [b for b, _ in notebook_i18n.blocks(notebook_i18n._source(before))
                                if b.strip() and b not in messages]
                assert not untranslated, untranslated
                g0, g1 = before["metadata"].get("nbgrader"), after["metadata"].get("nbgrader")
                if g0:
                    assert {k: v for k, v in g1.items() if k != "checksum"} == \
                        {k: v for k, v in g0.items() if k != "checksum"}
                    assert g1["checksum"] == compute_checksum(nbformat.from_dict(after))
            text = json.dumps(nb, ensure_ascii=False)
            assert "/andrea-book/book/" not in text  # chapter links go to the edition's pages
            assert f"/andrea-book/{lang}/book/" in text


def test_markdown_blocks_round_trip():
    text = ("# Title\n\nA paragraph\nover two lines.\n\n\n$$a = b\n\nc = d$$\n\n```python\nx = 1\n\ny = 2\n```\n\n"
            "| a | b |\n|---|---|\n| 1 | 2 |\n\n* one\n* two")
    parts = notebook_i18n.blocks(text)
    assert "".join(b + s for b, s in parts) == text
    assert [b.split("\n")[0] for b, _ in parts] == ["# Title", "A paragraph", "$$a = b", "```python", "| a | b |", "* one"]


def test_translated_release_and_bad_language(tmp_path):
    dest = notebook_i18n.release("ka", dest=tmp_path / "ka")
    nbs = sorted(dest.glob("*/*.ipynb"))
    assert len(nbs) == len(load())
    first = json.loads(nbs[0].read_text(encoding="utf-8"))
    assert any("\u10d0" <= ch <= "\u10ff" for ch in "".join(first["cells"][0]["source"]))
    with pytest.raises(ValueError, match="language must be one of"):
        notebook_i18n.release("fr", dest=tmp_path / "fr")


def test_lab_opens_the_notebooks_in_the_chosen_language(tmp_path):
    env = {"ANDREA_LANG": "de", "PATH": "/usr/bin:/bin"}
    cmd = [sys.executable, str(ROOT / "scripts" / "lab.py"), "--prepare-only", "--workspace", str(tmp_path / "ws"),
           "--exchange", str(tmp_path / "ex")]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    nb = json.loads((tmp_path / "ws" / "02_layernorm" / "layernorm.ipynb").read_text(encoding="utf-8"))
    assert nb["metadata"]["andrea"] == {"lang": "de"}
    assert "Übung" in "".join(nb["cells"][0]["source"])
    bad = subprocess.run(cmd, env={**env, "ANDREA_LANG": "fr"}, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "ANDREA_LANG must be one of" in bad.stderr


def test_glued_numbers_are_written_the_editions_way():
    from book._ext import andrea_book
    assert andrea_book.localise_number("92,331,264", "de") == "92\u202f331\u202f264"
    assert andrea_book.localise_number("0.0290 and 1.3e-03", "ka") == "0,0290 and 1,3e-03"
    assert andrea_book.localise_number("92,331,264 and 0.02", "en") == "92,331,264 and 0.02"
    assert andrea_book.localise_number("GPT-2 v1.5x", "de") == "GPT-2 v1.5x"
    assert andrea_book.edition_url("book/03_x", "en", "ka") == "../ka/book/03_x.html"
    assert andrea_book.edition_url("book/03_x", "de", "en") == "../../book/03_x.html"


@pytest.mark.parametrize("lang", ("en",) + LANGS)
def test_feedback_drops_the_self_checks_report_in_every_language(lang, monkeypatch):
    """The learner kernel's own self-check report is left out of feedback, whatever its
    language, with a note in the submission's language (the grader sets ANDREA_LANG)."""
    from andrea_ref.i18n import gettext
    from classroom.reporting.notebook import SELF_CHECK_NOTE, without_kernel_verdicts
    report = "".join([gettext("Checking `{name}`:", lang).format(name="layer_norm") + "\n",
                      "  \u2713 shape\n", "  \u2717 eps\n      why\n",
                      gettext("{passed} of {total} properties hold.", lang).format(passed=1, total=2) + "\n",
                      "a value the learner printed\n"])
    monkeypatch.setenv("ANDREA_LANG", lang)
    kept = without_kernel_verdicts([{"output_type": "stream", "name": "stdout", "text": report}])
    text = "".join(o["text"] for o in kept)
    assert text == "a value the learner printed\n" + gettext(SELF_CHECK_NOTE, lang) + "\n"
    assert lang == "en" or gettext(SELF_CHECK_NOTE, lang) != SELF_CHECK_NOTE


def test_numbers_in_drawn_tables_are_written_the_editions_way():
    from book._ext import andrea_book
    html = '<table><tr><td title="1,000">92,331,264</td><td><code>0.02</code></td><td>0.02</td></tr></table>'
    assert andrea_book.localise_html_numbers(html, "ka") == \
        '<table><tr><td title="1,000">92\u202f331\u202f264</td><td><code>0.02</code></td><td>0,02</td></tr></table>'
    assert andrea_book.localise_html_numbers(html, "en") == html


def test_a_kernel_follows_its_notebooks_language(tmp_path):
    """With no ANDREA_LANG, a kernel speaks the language of the notebook JupyterLab runs it for."""
    nb_path = notebook_i18n.release("de", dest=tmp_path / "de") / "02_layernorm" / "layernorm.ipynb"
    code = ("from andrea_ref import i18n; from andrea_ref.grading import layernorm as L\n"
            "import torch\n"
            "def wrong(x, g, b, eps=1e-5):\n"
            "    return g * (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True) + eps) + b\n"
            "print(i18n.current_language())\n"
            "L.report_layer_norm(wrong)\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "JPY_SESSION_NAME": str(nb_path)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    first, *report = done.stdout.splitlines()
    assert first == "de"
    from andrea_ref.i18n import gettext
    assert gettext("Checking `{name}`:", "de").format(name="layer_norm") in report
    english = subprocess.run([sys.executable, "-c", code], env={**env, "ANDREA_LANG": "en"},
                             capture_output=True, text=True, timeout=120)
    assert english.stdout.splitlines()[0] == "en" and "Checking `layer_norm`:" in english.stdout


def test_the_sandbox_knows_the_course_languages():
    """The sandbox's own list (it is set up where the course package cannot be imported)."""
    from andrea_ref import i18n
    from classroom.isolation import bwrap as sandbox
    import book_edition
    assert sandbox.LANGUAGES == i18n.LANGUAGES
    # the book's editions are the languages with catalogs in book/locales
    assert book_edition.EDITIONS == i18n.LANGUAGES


def test_updating_keeps_the_themes_words_by_hand(tmp_path):
    """`make catalogs` merges the template of the book's own HTML templates into each
    edition's sphinx.po without dropping the themes' words translated there by hand
    (sphinx-intl would drop every message the template lacks), and with the real
    catalogs it adds nothing: every word of ours is there."""
    pot, po = tmp_path / "sphinx.pot", tmp_path / "sphinx.po"
    for path, messages in ((pot, {"Color mode": ""}), (po, {"Back to top": "თავში დაბრუნება"})):
        catalog = Catalog(locale=None if path == pot else "ka")
        for msgid, msgstr in messages.items():
            catalog.add(msgid, msgstr)
        buf = io.BytesIO()
        write_po(buf, catalog)
        path.write_bytes(buf.getvalue())
    assert catalogs.add_missing(pot, po) == 1
    text = po.read_text(encoding="utf-8")
    assert 'msgid "Back to top"\nmsgstr "თავში დაბრუნება"' in text and 'msgid "Color mode"' in text
    assert catalogs.add_missing(pot, po) == 0
    theme = catalogs.POT_DIR / catalogs.THEME_POT
    if theme.is_file():
        for lang in ("de", "ka"):
            real = catalogs.ROOT / "book" / "locales" / lang / "LC_MESSAGES" / "sphinx.po"
            copy = tmp_path / f"{lang}.po"
            copy.write_bytes(real.read_bytes())
            assert catalogs.add_missing(theme, copy) == 0, lang
