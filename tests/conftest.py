"""Fixtures shared by the test modules.

pytest's default import mode puts tests/ on ``sys.path``, so the helper modules here
(grading_submissions, jupyter_browser, ...) are imported by name; the course's packages
(andrea_ref, classroom, andrea_lab, and scripts/ and deploy/ as namespace packages) are
importable from the repository root, which ``make venv`` puts on the virtual environment's
path. No test edits ``sys.path``, and no test module imports another.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path

# `make test` runs a few modules two at a time, one per pytest-xdist worker (Makefile,
# SIDE_BY_SIDE). A grading run takes a range of sandbox uids of its own and refuses one in
# use: each worker gets its own range (ANDREA_UID_BASE, read by classroom.isolation.uids
# before any test module imports the grader). A test may use up to UID_BASE + 2200
# (test_course_manifest), so the ranges lie 5000 apart.
from classroom.isolation import uids  # noqa: E402  (standard library only)

_XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _XDIST_WORKER.startswith("gw") and _XDIST_WORKER[2:].isdigit():
    os.environ["ANDREA_UID_BASE"] = str(uids.UID_BASE + 5000 * int(_XDIST_WORKER[2:]))
    importlib.reload(uids)

import pytest  # noqa: E402

from jupyter_browser import CHROMIUM  # noqa: E402


@pytest.fixture(scope="module")
def browser():
    """The system's Chromium under Playwright, one per module."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium package (make sysdeps)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture(scope="module")
def browser_without_emoji_font(browser, tmp_path_factory):
    """A second Chromium (of the same Playwright as ``browser``) whose fontconfig sees
    the system's fonts less every emoji font, as in a lab image with none installed."""
    conf = tmp_path_factory.mktemp("fontconfig") / "fonts.conf"
    conf.write_text("""<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd"><fontconfig>
  <dir>/usr/share/fonts</dir><cachedir>%s</cachedir>
  <selectfont><rejectfont><glob>*[Ee]moji*</glob><glob>*Symbola*</glob></rejectfont></selectfont>
</fontconfig>""" % (conf.parent / "cache"))
    env = {**os.environ, "FONTCONFIG_FILE": str(conf)}
    b = browser.browser_type.launch(executable_path=CHROMIUM, args=["--no-sandbox"], env=env)
    yield b
    b.close()


@pytest.fixture(scope="session")
def graded_class(tmp_path_factory):
    """One class graded by the real grader, once per run, for the tests that only read its
    results (tests/graded_class.py): ``{"summary": run's summary, "out": its folder}``."""
    import graded_class
    return graded_class.grade(tmp_path_factory.mktemp("graded-class"))


@pytest.fixture(scope="session")
def plain_class(tmp_path_factory):
    """The catalogue graded by plain nbgrader, once per run, for the tests that only read
    its courses and gradebooks (tests/plain_class.py)."""
    import plain_class
    return plain_class.grade(tmp_path_factory.mktemp("plain-class"))


@pytest.fixture(scope="module", params=["zygote", "sandbox per notebook"])
def host(request, tmp_path_factory):
    """A real sandboxed answer server, in a zygote and in a sandbox per notebook."""
    from classroom.isolation import answers, uids
    from classroom.isolation import bwrap as sandbox

    root = Path(__file__).resolve().parent.parent
    work = tmp_path_factory.mktemp("answer")
    os.chmod(work, 0o755)
    uid = uids.UID_BASE + 980 if os.geteuid() == 0 else None
    ro, pypath = sandbox.default_ro_paths(root)
    spec = sandbox.SandboxSpec(scratch_root=str(work), runtime_dir=str(work), pidfile=str(work / "pid"), uid=uid,
                               ro_paths=ro, pythonpath=pypath,
                               limits=sandbox.Limits(memory=3 << 30, processes=128, cpu_seconds=120))
    h = answers.AnswerHost(spec, work / "server", zygote=request.param == "zygote")
    h.start()
    if request.param == "zygote" and h.mode != "zygote":
        pytest.skip(f"no nested namespaces here: {h.why_not_zygote}")
    yield h
    h.close()
