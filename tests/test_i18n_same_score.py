"""A submission gets the same score in English, German and Georgian, and its feedback is in its language.

The same learner answers (a right one and classic mistakes from grading_submissions.py)
are handed in three times: in the English release, and in the German and Georgian
notebooks made from it (classroom/notebook_i18n.py). The parallel grader grades all of
them in one run (the session's shared class, tests/graded_class.py). Every answer must score the same in the three languages (and what the
table of cases says it should score), and the feedback of a German or Georgian
notebook must show the checks' messages in that language: every message of the English
feedback that the grading catalog translates appears translated.
"""
from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grading_submissions import ASSIGNMENTS
from graded_class import LANGS, TRANSLATED_CASES, translated_student

from andrea_ref import i18n
from classroom import notebook_i18n

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def graded(graded_class):
    """The answers of graded_class.PICK in every language, graded in the session's shared class."""
    return {"cases": TRANSLATED_CASES, **graded_class}


def _scores(out: Path) -> dict:
    scores = {}
    for state in out.glob("state/*/*.json"):
        record = json.loads(state.read_text(encoding="utf-8"))
        scores[(record["student"], record["assignment"])] = record.get("score")
    return scores


class _Outputs(HTMLParser):
    """The text of a page's cell outputs (nbconvert's ``output_subarea`` blocks):
    where the grading catalog's messages are shown. The notebook's own prose, translated
    by its own catalog, is left out, so a message is never found in a sentence of it."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth, self.parts = 0, []

    def handle_starttag(self, tag, attrs):
        if self.depth:
            self.depth += tag not in VOID
        elif OUTPUT & set((dict(attrs).get("class") or "").split()):
            self.depth = 1
        self.parts.append(" ")

    def handle_endtag(self, tag):
        if self.depth and tag not in VOID:
            self.depth -= 1
        self.parts.append(" ")

    def handle_data(self, data):
        if self.depth:
            self.parts.append(data)


OUTPUT = {"output_subarea", "jp-OutputArea-output"}  # the classic template's, the lab template's
VOID = {"br", "img", "hr", "input", "meta", "link", "wbr", "area", "base", "col", "source"}


def _feedback_text(out: Path, student: str, assignment: str) -> str:
    nb_file = ASSIGNMENTS[assignment][0]
    page = out / "feedback" / student / assignment / nb_file.replace(".ipynb", ".html")
    assert page.is_file(), f"no feedback page {page}"
    parser = _Outputs()
    parser.feed(page.read_text(encoding="utf-8"))
    text = "".join(parser.parts)
    assert text.strip(), f"{page}: no cell output found"
    return re.sub(r"\s+", " ", text)


def test_the_same_score_in_every_language(graded):
    scores = _scores(graded["out"])
    problems = []
    for case in graded["cases"]:
        got = {lang: scores.get((translated_student(case.student, lang), case.assignment)) for lang in LANGS}
        if len(set(got.values())) != 1 or got["en"] != case.expected_score():
            problems.append(f"{case.student}: scores {got}, expected {case.expected_score()} in every language")
    assert not problems, "\n".join(problems)


def _static_messages() -> list[str]:
    """The grading catalog's English messages without placeholders (found verbatim in feedback)."""
    from babel.messages.pofile import read_po
    po = i18n.LOCALES / "de" / "LC_MESSAGES" / "grading.po"
    with po.open("rb") as f:
        return [m.id for m in read_po(f) if m.id and "{" not in m.id and len(m.id) > 25]


def test_feedback_is_in_the_notebooks_language(graded):
    messages = _static_messages()
    assert len(messages) > 20, "the grading catalog is missing or nearly empty"
    shown, problems = 0, []
    for case in graded["cases"]:
        if not case.lost_cells():
            continue
        english = _feedback_text(graded["out"], translated_student(case.student, "en"), case.assignment)
        found = [m for m in messages if m in english]
        # a short message that shows only inside a longer one found too (a self-check's label
        # inside its check's property) is that longer one's words, translated with it
        in_english = [m for m in found if english.count(m) > sum(english.count(o) for o in found if o != m and m in o)]
        if not in_english:
            problems.append(f"{case.student}: no message of the grading catalog in its English feedback")
            continue
        for lang in ("de", "ka"):
            text = _feedback_text(graded["out"], translated_student(case.student, lang), case.assignment)
            for message in in_english:
                translated = re.sub(r"\s+", " ", i18n.gettext(message, lang))  # spaced as the page's text
                shown += 1
                if translated == message or translated not in text:
                    problems.append(f"{case.student} ({lang}): {message[:60]!r} not shown as {translated[:60]!r}")
                if message in text:
                    problems.append(f"{case.student} ({lang}): the English {message[:60]!r} is still there")
    assert shown >= 10
    assert not problems, "\n".join(problems)


def test_the_notebooks_language_is_read_only_from_known_values():
    assert notebook_i18n.submission_language([{"metadata": {"andrea": {"lang": "ka"}}}]) == "ka"
    for hostile in ({"metadata": {"andrea": {"lang": "../../etc"}}}, {"metadata": {"andrea": "de"}},
                    {"metadata": []}, None, {"metadata": {"andrea": {"lang": ["de"]}}}):
        assert notebook_i18n.submission_language([hostile]) is None
