"""`make demo`, as the README and the instructor guide tell an instructor to run it first:
a small class written from the released notebooks and graded by the real grader, with
every learner's outcome as the demo's docstring (classroom/demo.py) promises, and the pages
it tells the instructor to open present.

The demo grades into a temporary folder (``OUT=``); its sandboxes run under uids from
``ANDREA_UID_BASE`` like every grading test.
"""
from __future__ import annotations

import csv
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANDREA_LANG")}
    r = subprocess.run(["make", "-s", "demo", f"OUT={out}"], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    rows = {}
    with open(out / "grading" / "report.csv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            rows[row["student"], row["assignment"]] = row
    return {"out": out, "stdout": r.stdout, "rows": rows}


def test_every_learner_gets_what_the_demo_promises(demo):
    rows = demo["rows"]
    score = {k: float(r["score"]) for k, r in rows.items()}
    assert score["ada", "02_layernorm"] == score["ada", "03_gelu"] == 10.0
    assert 0 < score["ben", "02_layernorm"] < 10 and 0 < score["ben", "03_gelu"] < 10  # one property each
    assert rows["cleo", "02_layernorm"]["status"] == rows["cleo", "03_gelu"]["status"] == "untouched"
    assert score["dan", "02_layernorm"] == 10.0 and rows["dan", "03_gelu"]["status"] == "not submitted"
    # the hostile learner's notebook claimed full marks: no points, and the instructor is told
    assert score["eve", "03_gelu"] == 0.0
    assert rows["eve", "03_gelu"]["status"] in ("tampering suspected", "held for review")
    assert {rows["fay", a]["status"] for a in ("02_layernorm", "03_gelu")} == {"not submitted"}


def test_it_says_what_to_open_and_those_pages_exist(demo):
    shown = re.findall(r"^\s+[a-z' ]+:\s+(\S+\.html)$", demo["stdout"], re.M)
    assert any(p.endswith("report.html") for p in shown), demo["stdout"][-2000:]
    for page in shown:
        assert Path(page).is_file(), page
    html = (demo["out"] / "grading" / "report.html").read_text(encoding="utf-8")
    assert "<script" not in html.lower()  # the class view runs nothing, the hostile markup included
