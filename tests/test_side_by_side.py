"""The test modules `make test` runs two at a time (the Makefile's ``SIDE_BY_SIDE``, one
module per pytest-xdist worker), and those `make test-fast` runs so (every module marked
``fast``), can share the machine: each names a test module that exists, once; none uses a
session fixture of conftest.py (a worker of its own would build that fixture a second
time); and each worker's grading runs get sandbox uids of their own (conftest.py, from
``PYTEST_XDIST_WORKER``). Each check is also run on a broken list.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"

pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def side_by_side(makefile: str) -> list[str]:
    """The paths the Makefile's ``SIDE_BY_SIDE :=`` names (continued lines included)."""
    found = re.search(r"^SIDE_BY_SIDE\s*:=((?:[^\n]*\\\n)*[^\n]*)$", makefile, re.M)
    assert found, "the Makefile defines no SIDE_BY_SIDE"
    return found.group(1).replace("\\\n", " ").split()


def session_fixtures() -> set[str]:
    text = (TESTS / "conftest.py").read_text(encoding="utf-8")
    return set(re.findall(r'@pytest\.fixture\(scope="session"\)\s*\ndef (\w+)\(', text))


def problems(paths: list[str]) -> list[str]:
    shared = session_fixtures()
    out = [f"{p}: named twice" for p in sorted({p for p in paths if paths.count(p) > 1})]
    for p in paths:
        path = ROOT / p
        if not (path.parent == TESTS and path.name.startswith("test_") and path.is_file()):
            out.append(f"{p}: no test module of tests/")
            continue
        text = path.read_text(encoding="utf-8")
        used = sorted(n for n in shared if re.search(rf"\bdef \w+\([^)]*\b{n}\b|usefixtures\([^)]*\b{n}\b", text))
        if used:
            out.append(f"{p}: uses the session fixture(s) {', '.join(used)}")
    return out


def test_the_side_by_side_modules_can_share_the_machine():
    paths = side_by_side((ROOT / "Makefile").read_text(encoding="utf-8"))
    assert len(paths) >= 2
    assert problems(paths) == []


def fast_modules() -> list[str]:
    """The test modules with tests marked ``fast`` (the whole module or some of its tests):
    ``make test-fast`` runs them two at a time."""
    return sorted(f"tests/{p.name}" for p in TESTS.glob("test_*.py")
                  if re.search(r"\bpytest\.mark\.fast\b", p.read_text(encoding="utf-8")))


def test_the_fast_modules_can_share_the_machine():
    fast = fast_modules()
    assert "tests/test_side_by_side.py" in fast and "tests/test_grading_capstone.py" not in fast
    assert problems(fast) == []
    assert re.search(r"^test-fast:.*\n\t\$\(TWO_AT_A_TIME\) ", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M)


def test_a_broken_list_is_caught():
    assert session_fixtures() >= {"graded_class", "plain_class"}
    broken = ["tests/test_learner_kit.py", "tests/test_learner_kit.py", "tests/test_nowhere.py",
              "tests/test_grading_capstone.py", "README.md"]
    found = problems(broken)
    assert found[0] == "tests/test_learner_kit.py: named twice"
    assert "tests/test_nowhere.py: no test module of tests/" in found
    assert "README.md: no test module of tests/" in found
    assert "tests/test_grading_capstone.py: uses the session fixture(s) graded_class" in found
    makefile = "X := 1\nSIDE_BY_SIDE := tests/a.py \\\n  tests/b.py\ntest:\n"
    assert side_by_side(makefile) == ["tests/a.py", "tests/b.py"]


@pytest.mark.parametrize("worker,offset", [("gw0", 0), ("gw1", 5000), ("", 0)])
def test_each_worker_grades_with_uids_of_its_own(worker, offset):
    """conftest.py under a pytest-xdist worker: the uid range moved by 5000 per worker, in
    the environment (grading commands) and in classroom.isolation.uids (in-process runs)."""
    code = ("import os, conftest\nfrom classroom.isolation import uids\n"
            "print(uids.UID_BASE, os.environ.get('ANDREA_UID_BASE'))")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER", "ANDREA_UID_BASE")}
    env.update(ANDREA_UID_BASE="63000", PYTEST_XDIST_WORKER=worker)
    r = subprocess.run([sys.executable, "-c", code], cwd=TESTS, env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(63000 + offset)] * 2
