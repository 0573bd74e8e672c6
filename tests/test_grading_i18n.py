"""The grading checks speak the learner's language (ANDREA_LANG: en, de, ka) and judge
the same in every language: the same checks fail, the same points are lost; only the
words change. Wrong submissions from grading_submissions.py, called directly (fast)."""
from __future__ import annotations

import io
import re
import warnings
from contextlib import redirect_stdout

import pytest

import grading_submissions as S
from andrea_ref import grading, i18n
from andrea_ref.grading import core, messages
from andrea_ref.grading.manifest import load
from learner_functions import CHECKS, learner_function

REPORTS = {a.name: getattr(grading, f"report_{a.function()[0]}") for a in load()}
# One classic mistake per notebook: unbiased variance, erf GELU, b1 missing, post-norm.
STUDENTS = ("ln_unbiased", "gelu_erf", "mlp_missing_bias", "block_post_norm")
CASES = [c for c in S.CASES if c.student in STUDENTS]
LIKELY = "Likely mistake: {likely}"


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def _judge(case, monkeypatch, language):
    """(failed grade ids, points, {grade id: message}, report's verdict, report's text)
    of one submission with ANDREA_LANG=language."""
    monkeypatch.setenv("ANDREA_LANG", language)
    fn = learner_function(case)
    points = S.ASSIGNMENTS[case.assignment][3]
    failed, messages = set(), {}
    for grade_id, check in CHECKS[case.assignment].items():
        try:
            with redirect_stdout(io.StringIO()):
                check(fn)
        except AssertionError as exc:
            failed.add(grade_id)
            messages[grade_id] = str(exc)
    out = io.StringIO()
    with redirect_stdout(out):
        verdict = REPORTS[case.assignment](fn)
    score = sum(p for g, p in points.items() if g not in failed)
    return failed, score, messages, verdict, out.getvalue()


def _likely_msgid(message):
    """The English likely-mistake line of a message (the catalog's msgid)."""
    found = re.search(r"^Likely mistake: (.*)$", message, re.M)
    assert found, message
    return found.group(1)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.student)
def test_same_points_in_every_language_and_translated_messages(case, monkeypatch):
    monkeypatch.setattr(core, "CALL_TIME_LIMIT", 2.0)
    failed, score, english, verdict, report = _judge(case, monkeypatch, "en")
    assert failed == case.lost_cells() and failed
    assert score == case.expected_score()
    assert verdict is False
    total = len(CHECKS[case.assignment])
    assert f"{total - len(failed)} of {total} properties hold." in report
    for language in ("de", "ka"):
        got = _judge(case, monkeypatch, language)
        assert got[0] == failed and got[1] == score and got[3] == verdict, language
        catalog = i18n.catalog(language)
        count = catalog["{passed} of {total} properties hold."].format(passed=total - len(failed), total=total)
        assert count in got[4], (language, got[4])
        for grade_id, message in got[2].items():
            assert message != english[grade_id], (language, message)
            assert "Likely mistake" not in message
        # the likely mistake the English names, in the catalog's words
        for grade_id, message in english.items():
            if "\nLikely mistake: " not in message:
                continue
            msgid = _likely_msgid(message)
            assert msgid in catalog, msgid
            line = catalog[LIKELY].format(likely=catalog[msgid])
            assert line in got[2][grade_id], (language, got[2][grade_id])


def test_language_changes_between_calls(monkeypatch):
    """Translated when shown, not at import: the same check, three languages in a row."""
    case = next(c for c in CASES if c.student == "gelu_erf")
    fn = learner_function(case)
    seen = []
    for language in ("de", "en", "ka", "de"):
        monkeypatch.setenv("ANDREA_LANG", language)
        with pytest.raises(AssertionError) as info:
            grading.check_gelu_values(fn)
        seen.append(str(info.value).splitlines()[-1])
    assert seen[0] == seen[3]
    assert seen[1].startswith("Likely mistake: the exact erf form")
    assert len(set(seen)) == 3


def test_unknown_language_falls_back_to_english_with_a_warning(monkeypatch, capfd):
    case = next(c for c in CASES if c.student == "ln_unbiased")
    fn = learner_function(case)
    monkeypatch.setenv("ANDREA_LANG", "en")
    with pytest.raises(AssertionError) as english:
        grading.check_layer_norm_normalises(fn)
    capfd.readouterr()

    monkeypatch.setenv("ANDREA_LANG", "fr")
    monkeypatch.setattr(i18n, "_warned", set())
    # inside a check the warning is swallowed: output on stderr costs a graded cell its points
    with pytest.raises(AssertionError) as unknown:
        grading.check_layer_norm_normalises(fn)
    grading.check_layer_norm_shape(fn)  # passes, and prints its tick in English
    out, err = capfd.readouterr()
    assert err == ""
    assert str(unknown.value) == str(english.value)
    assert out.startswith("\u2713 layer_norm returns a new tensor")
    # the language setting itself says what is wrong
    monkeypatch.setattr(i18n, "_warned", set())
    with pytest.warns(UserWarning, match="ANDREA_LANG='fr' is not one of en, de, ka: using English"):
        assert i18n.current_language() == "en"


def test_a_message_missing_from_the_catalog_falls_back_to_english(monkeypatch):
    monkeypatch.setenv("ANDREA_LANG", "de")
    catalog = dict(i18n.catalog("de"))
    mistake = ("b1 is never added (changing it changes nothing): the first layer is x @ w1 + b1.")
    assert mistake in catalog
    del catalog[mistake]
    monkeypatch.setattr(messages, "_language_catalog", lambda language: catalog)
    case = next(c for c in CASES if c.student == "mlp_missing_bias")
    with pytest.raises(AssertionError) as info:
        grading.check_mlp_bias(learner_function(case))
    message = str(info.value)
    assert message.splitlines()[-1] == "Wahrscheinlicher Fehler: " + mistake
    assert "b1 verschiebt x @ w1" in message  # the rest is still German


def test_a_broken_catalog_or_lookup_never_changes_a_verdict(monkeypatch, capfd):
    """A translation with the wrong placeholders, or a lookup that raises, gives English."""
    monkeypatch.setenv("ANDREA_LANG", "de")
    bad = {"Likely mistake: {likely}": "Fehler: {wahrscheinlich}",
           "`{name}` does not match 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).": 42}
    monkeypatch.setattr(messages, "_language_catalog", lambda language: bad)
    case = next(c for c in CASES if c.student == "gelu_erf")
    fn = learner_function(case)
    with pytest.raises(AssertionError) as info:
        grading.check_gelu_values(fn)
    assert str(info.value).splitlines()[0].startswith("`gelu` does not match 0.5 x")
    assert str(info.value).splitlines()[-1].startswith("Likely mistake: the exact erf form")

    def broken(language):
        raise RuntimeError("no catalog")

    monkeypatch.setattr(messages, "_language_catalog", broken)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        grading.check_gelu_shape(fn)
        grading.check_gelu_extremes(fn)
    assert grading.report_gelu(fn) is False
    out, err = capfd.readouterr()
    assert err == "" and "2 of 3 properties hold." in out


def test_every_graded_property_is_marked_for_translation():
    """The tick and the cross print a check's docstring's first line, translated with the
    module's PROPERTIES; the two must agree, and every language must have them."""
    from andrea_ref.grading import block, gelu, layernorm, mlp

    for module in (layernorm, gelu, mlp, block):
        stated = tuple(check.__doc__.strip().splitlines()[0] for _label, check in module.CHECKS)
        assert stated == module.PROPERTIES, module.__name__
        for language in ("de", "ka"):
            catalog = i18n.catalog(language)
            for text in (*module.PROPERTIES, *(label for label, _check in module.CHECKS), module.FORBIDDEN.what):
                assert catalog.get(text), (language, text)
