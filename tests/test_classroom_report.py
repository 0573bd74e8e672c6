"""The reports describe the whole class as the gradebook holds it, not the latest batch.

One small class graded in two batches into one gradebook (the second batch: one more
learner, and a notebook of another course named like ours), then a folder with nothing
to grade:

- after the second batch ``report.csv``/``report.txt``/``report.html`` hold every
  learner of both batches with the scores ``grades.csv`` holds, this run's learner
  marked new; the earlier learners are not "not submitted";
- the foreign notebook is refused with its reason and adds nobody to the gradebook;
- a run with nothing to grade exits non-zero with one line and leaves every report
  byte for byte as it was;
- ``report.html`` opened offline in Chromium: nothing runs, nothing is requested, the
  class's learners and totals are on it, its links reach the feedback pages beside it,
  and its words follow ``ANDREA_LANG``;
- the progress bar names each submission's status in the report's word;
- a ``grades.csv`` cell that is not a number never starts a spreadsheet formula.
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from grading_submissions import write_class  # noqa: E402
from jupyter_browser import open_page

from classroom import orchestration  # noqa: E402
from classroom.intake import NothingToGrade  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REPORTS = ("report.txt", "report.csv", "report.html", "grades.csv")
FIRST, SECOND = ["gelu_solution", "gelu_untouched"], ["gelu_erf"]


def _foreign(dest: Path) -> None:
    """A notebook of another course, named like ours."""
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "id": "a1", "metadata": {}, "source": "# Homework 3: sorting"},
        {"cell_type": "code", "id": "a2", "metadata": {}, "execution_count": None, "outputs": [],
         "source": "def gelu(xs):\n    return sorted(xs)"}]}
    path = dest / "stranger" / "03_gelu" / "gelu.ipynb"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(nb))


def _rows(out: Path) -> dict[str, dict]:
    with open(out / "report.csv", encoding="utf-8", newline="") as f:
        return {row["student"]: row for row in csv.DictReader(f) if row["assignment"] == "03_gelu"}


def _grades(out: Path) -> dict[str, float]:
    with open(out / "grades.csv", encoding="utf-8", newline="") as f:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(f)
                if row["assignment"] == "03_gelu"}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("report")
    out, db = base / "out", f"sqlite:///{base / 'gradebook.db'}"
    write_class(base / "batch1", FIRST)
    write_class(base / "batch2", SECOND)
    _foreign(base / "batch2")
    logs: list[str] = []
    first = orchestration.run(base / "batch1", workers=2, db_url=db, out=out, progress=False, log=logs.append)
    second = orchestration.run(base / "batch2", workers=1, db_url=db, out=out, progress=False, log=logs.append)
    return {"base": base, "out": out, "db": db, "first": first, "second": second, "log": "\n".join(logs)}


@pytest.mark.slow
def test_the_reports_hold_the_whole_class_after_a_second_batch(graded):
    out = graded["out"]
    assert graded["first"]["graded_now"] == 2 and graded["second"]["graded_now"] == 1
    rows = _rows(out)
    assert set(rows) == set(FIRST + SECOND), rows.keys()
    assert all(row["status"] != "not submitted" for row in rows.values()), rows
    grades = _grades(out)
    assert {s: float(rows[s]["score"]) for s in rows} == grades  # the same numbers as nbgrader's export
    assert grades["gelu_solution"] == 10 and grades["gelu_untouched"] == 0 and 0 < grades["gelu_erf"] < 10
    assert rows["gelu_erf"]["this_run"] == "new"
    assert rows["gelu_solution"]["this_run"] == rows["gelu_untouched"]["this_run"] == ""
    text = (out / "report.txt").read_text(encoding="utf-8")
    for name in FIRST + SECOND:
        assert name in text, name
    # one column per graded property, with that learner's points
    assert float(rows["gelu_solution"]["gelu_values"]) == 6
    assert float(rows["gelu_erf"]["gelu_values"]) < 6


@pytest.mark.slow
def test_a_notebook_of_another_course_is_refused_and_adds_nobody(graded):
    import sqlalchemy
    assert "stranger" not in _rows(graded["out"])
    assert "refused" in graded["log"] and "do not match the released notebook 03_gelu/gelu.ipynb" in graded["log"]
    assert "stranger" in (graded["out"] / "report.txt").read_text(encoding="utf-8")  # said where it is read
    eng = sqlalchemy.create_engine(graded["db"])
    with eng.connect() as con:
        students = {r[0] for r in con.execute(sqlalchemy.text("SELECT id FROM student"))}
    eng.dispose()
    assert students == set(FIRST + SECOND)


@pytest.mark.slow
def test_nothing_to_grade_stops_and_leaves_the_reports(graded, tmp_path):
    out = graded["out"]
    before = {name: (out / name).read_bytes() for name in REPORTS}
    empty = tmp_path / "empty"
    (empty / "someone").mkdir(parents=True)
    (empty / "someone" / "notes.txt").write_text("no notebook here")
    r = subprocess.run([sys.executable, "-m", "classroom.grade", str(empty), "--out", str(out),
                        "--db", graded["db"], "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stdout + r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "nothing to grade" in errors[0], r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    assert {name: (out / name).read_bytes() for name in REPORTS} == before
    foreign = tmp_path / "foreign"
    _foreign(foreign)
    with pytest.raises(NothingToGrade, match="refused"):  # only a foreign notebook: nothing either
        orchestration.run(foreign, db_url=graded["db"], out=out, progress=False,
                          log=lambda *a: None)
    assert {name: (out / name).read_bytes() for name in REPORTS} == before


@pytest.mark.slow
@pytest.mark.parametrize("language,words", [("en", "What to do next"), ("de", None), ("ka", None)])
def test_the_class_view_offline_in_chromium(graded, browser, tmp_path, monkeypatch, language, words):  # noqa: F811
    from andrea_ref.i18n import gettext
    from classroom.reporting import classview
    expected = words or gettext("What to do next", language)
    assert expected != "What to do next" or language == "en"  # translated
    page_path = graded["out"] / "report.html"
    if language != "en":  # the same class, written again in the instructor's language
        monkeypatch.setenv("ANDREA_LANG", language)
        assert classview.instructor_language() == language
        orchestration.run(graded["base"] / "batch2", db_url=graded["db"], out=graded["out"], progress=False,
                          log=lambda *a: None)
    page, context, events = open_page(browser, page_path, interact=False)
    try:
        body = page.inner_text("body")
        assert expected in body, body[:500]
        for name in FIRST + SECOND:
            assert name in body, name
        assert "stranger" not in page.eval_on_selector_all("table", "ts => ts.map(t => t.innerText).join()")
        assert page.evaluate("document.scripts.length") == 0
        # pass rates of what was handed in: the three GELU properties, no "0 of 0" for the rest
        rated = page.eval_on_selector_all(
            "tr.property", "rs => rs.map(r => r.cells[0].innerText + '/' + r.cells[1].innerText)")
        assert rated == ["03_gelu/gelu_shape", "03_gelu/gelu_values", "03_gelu/gelu_extremes"], rated
        # a score chart for the assignment handed in, drawn inline
        assert page.eval_on_selector_all("figure.chart", "fs => fs.map(f => f.id)") == ["scores-03_gelu"]
        assert page.eval_on_selector_all("figure.chart svg", "ss => ss.length") == 1
        # the erf learner's likely mistake, counted once and named with who made it
        mistakes = page.eval_on_selector_all(
            "tr.mistake", "rs => rs.map(r => [r.querySelector('.count').innerText, r.cells[3].innerText])")
        assert ["1", "gelu_erf"] in mistakes, mistakes
        assert all("gelu_solution" not in who for _, who in mistakes), mistakes
        # the learner to look at: the untouched notebook (and not the right one)
        look = page.eval_on_selector_all("tr.look td.learner", "ts => ts.map(t => t.innerText)")
        assert "gelu_untouched" in look and "gelu_solution" not in look, look
        # per-learner totals: the points grades.csv holds, written the edition's way
        totals = dict(page.eval_on_selector_all(
            "tr.learner-total", "rs => rs.map(r => [r.querySelector('.learner').innerText, "
                                "r.querySelector('.total').innerText])"))
        grades = _grades(graded["out"])
        assert set(totals) == set(grades), totals
        for student, score in grades.items():
            assert float(totals[student].split("/")[0].strip().replace(",", ".")) == score, (student, totals)
        links = page.eval_on_selector_all("a[href]", "as => as.map(a => a.getAttribute('href'))")
        assert links and all(h.startswith("feedback/") for h in links), links
        assert all((graded["out"] / h).is_file() for h in links), links  # no dead link
    finally:
        context.close()
    # what a reader does (hover, focus, click every link): nothing runs, nothing is fetched from elsewhere
    page, context, events = open_page(browser, page_path, allowed=graded["out"])
    try:
        assert not events["fired"] and not events["dialogs"] and not events["popups"], events
        assert not events["requests"] and not events["failed"], events
    finally:
        context.close()


@pytest.mark.slow
def test_the_progress_bar_says_what_the_report_says(graded):
    import io

    from classroom.orchestration.state import Progress, read_state
    rows = _rows(graded["out"])
    for student in FIRST + SECOND:
        stream = io.StringIO()
        bar = Progress(1, stream=stream)
        bar.update(read_state(graded["out"], student, "03_gelu").to_dict(), done=1)
        bar.close()
        assert f"last {student}/03_gelu: {rows[student]['status']}" in stream.getvalue(), stream.getvalue()
    assert rows["gelu_untouched"]["status"] == "untouched"


def test_grades_csv_cells_never_start_a_formula(tmp_path):
    from classroom.reporting.tables import guard_csv
    path = tmp_path / "grades.csv"
    rows = [["student_id", "score"], ["=HYPERLINK(\"http://x\")", "10.0"], ["+1", "-2.5"], ["@sum", ""],
            ["-cmd", "1e3"], ["ada", "0"]]
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows(rows)
    guard_csv(path)
    with open(path, newline="", encoding="utf-8") as f:
        got = list(csv.reader(f))
    assert got == [["student_id", "score"], ["'=HYPERLINK(\"http://x\")", "10.0"], ["+1", "-2.5"], ["'@sum", ""],
                   ["'-cmd", "1e3"], ["ada", "0"]]
