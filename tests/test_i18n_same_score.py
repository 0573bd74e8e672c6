"""A submission gets the same score in English, German and Georgian, and its feedback is in its language.

The same learner answers (a right one and classic mistakes from grading_submissions.py)
are handed in three times: in the English release, and in the German and Georgian
notebooks made from it (classroom/notebook_i18n.py). The parallel grader grades all of
them in one run. Every answer must score the same in the three languages (and what the
table of cases says it should score), and the feedback of a German or Georgian
notebook must show the checks' messages in that language: every message of the English
feedback that the grading catalog translates appears translated.
"""
from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(Path(__file__).parent), str(ROOT / "scripts")]
from grading_submissions import ASSIGNMENTS, CASES, make_submission  # noqa: E402

from classroom import notebook_i18n  # noqa: E402
from andrea_ref import i18n  # noqa: E402
from classroom import grade  # noqa: E402

pytestmark = pytest.mark.slow
LANGS = ("en", "de", "ka")
PICK = ["ln_solution", "ln_unbiased", "ln_eps_outside", "gelu_erf", "mlp_transposed", "block_post_norm"]


def _released(assignment: str, language: str) -> dict:
    nb_file = ASSIGNMENTS[assignment][0]
    nb = json.loads((ROOT / "exercises" / assignment / nb_file).read_text(encoding="utf-8"))
    return notebook_i18n.translate_notebook(nb, language, notebook_i18n.catalog(language, assignment))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("i18n-grading")
    subs = tmp / "subs" / "submitted"
    by_name = {c.student: c for c in CASES}
    cases = [by_name[name] for name in PICK]
    for case in cases:
        nb_file = ASSIGNMENTS[case.assignment][0]
        solution = json.loads((ROOT / "solutions" / case.assignment / nb_file).read_text(encoding="utf-8"))
        for lang in LANGS:
            path = subs / f"{case.student}_{lang}" / case.assignment / nb_file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(make_submission(case, _released(case.assignment, lang), solution), encoding="utf-8")
    out = tmp / "out"
    summary = grade.run(subs.parent, workers=2, db_url=f"sqlite:///{tmp / 'course.db'}", out=out,
                        progress=False, log=lambda *a: None)
    return {"cases": cases, "out": out, "summary": summary}


def _scores(out: Path) -> dict:
    scores = {}
    for state in out.glob("state/*/*.json"):
        record = json.loads(state.read_text(encoding="utf-8"))
        scores[(record["student"], record["assignment"])] = record.get("score")
    return scores


def _feedback_text(out: Path, student: str, assignment: str) -> str:
    nb_file = ASSIGNMENTS[assignment][0]
    page = out / "feedback" / student / assignment / nb_file.replace(".ipynb", ".html")
    assert page.is_file(), f"no feedback page {page}"
    text = re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8"))
    return re.sub(r"\s+", " ", html.unescape(text))


def test_the_same_score_in_every_language(graded):
    scores = _scores(graded["out"])
    problems = []
    for case in graded["cases"]:
        got = {lang: scores.get((f"{case.student}_{lang}", case.assignment)) for lang in LANGS}
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
        english = _feedback_text(graded["out"], f"{case.student}_en", case.assignment)
        in_english = [m for m in messages if m in english]
        if not in_english:
            problems.append(f"{case.student}: no message of the grading catalog in its English feedback")
            continue
        for lang in ("de", "ka"):
            text = _feedback_text(graded["out"], f"{case.student}_{lang}", case.assignment)
            for message in in_english:
                translated = i18n.gettext(message, lang)
                shown += 1
                if translated == message or translated not in text:
                    problems.append(f"{case.student} ({lang}): {message[:60]!r} not shown as {translated[:60]!r}")
                if message in text:
                    problems.append(f"{case.student} ({lang}): the English {message[:60]!r} is still there")
    assert shown >= 10
    assert not problems, "\n".join(problems)


def test_the_notebooks_language_is_read_only_from_known_values():
    assert grade._submission_language([{"metadata": {"andrea": {"lang": "ka"}}}]) == "ka"
    for hostile in ({"metadata": {"andrea": {"lang": "../../etc"}}}, {"metadata": {"andrea": "de"}},
                    {"metadata": []}, None, {"metadata": {"andrea": {"lang": ["de"]}}}):
        assert grade._submission_language([hostile]) is None
