"""A feedback page graded on the hub, fetched and opened by the learner, reaches the chapters.

The page is built by the grader's page builder (``feedback.build_page``) with the address
the hub's grading run gives ``c.CourseBook.url``, ``/hub/user-redirect/andrea-book/``
(scripts/hub.py), from a notebook that links a chapter in English, German and Georgian.
It is put where ``nbgrader fetch_feedback`` puts it, ``<assignment>/feedback/<timestamp>/``,
in the workspace of a learner's JupyterLab served under ``/user/learner/`` as the hub
serves each user (scripts/lab.py as ``make lab`` starts it; without a hub, its server
answers ``/hub/user-redirect/`` itself, as the hub does for a user's server). In headless
Chromium, with nothing but loopback reachable:

- the page opened as a file of the server (``/user/learner/files/...``, Jupyter's own
  Content-Security-Policy and sandbox on top of the page's): each chapter link, clicked,
  opens that chapter of the book the server serves, in the link's edition, styled, its math
  typeset and its figures shown, with no request failing;
- the page opened in JupyterLab (its HTML viewer, a sandboxed frame): the link opens the
  chapter in that frame.
"""
from __future__ import annotations

import os
import sys
import urllib.parse
from pathlib import Path

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from traitlets.config import Config

from jupyter_browser import (assert_book_page_loaded, free_port, jupyter_options, loopback_context, record_failures,
                             start_server, stop_server)

from andrea_lab import LINK_PREFIX, chapter_link
from classroom.reporting import chapters, feedback

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "andrea-hub-feedback-token"
BASE_URL = "/user/learner/"
CHAPTER = "04_layernorm_and_placement"
FEEDBACK = "02_layernorm/feedback/2026-12-06 10:00:00.000000 UTC/layernorm.html"
EDITIONS = ("en", "de", "ka")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def fetched_page(tmp_path_factory):
    """A learner's lab under BASE_URL with the fetched feedback page in its workspace."""
    if not (chapters.BUILT_BOOK / "book" / f"{CHAPTER}.html").is_file():
        pytest.fail("the book is not built: make test builds it first (make book)")
    tmp = tmp_path_factory.mktemp("hub-feedback")
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(
        "Your LayerNorm, $\\hat{x} = (x - \\mu) / \\sqrt{\\sigma^2 + \\epsilon}$: " + ", ".join(
            f"[{edition}]({chapter_link('book/' + CHAPTER, edition)})" for edition in EDITIONS)))
    cfg = Config()
    cfg.CourseBook.url = LINK_PREFIX  # what the hub's grading run reads from nbgrader_config.py
    page = tmp / "workspace" / FEEDBACK
    done = feedback.build_page(HTMLExporter().from_notebook_node(nb)[0], page, cfg)
    assert not done["shipped"] and not done["notes"], done
    assert sorted(p.name for p in page.parent.iterdir()) == ["layernorm.html"]  # what the exchange releases
    port = free_port()
    cmd = [sys.executable, str(ROOT / "scripts" / "lab.py"), "--workspace", str(tmp / "workspace"),
           "--exchange", str(tmp / "exchange"), "--state", str(tmp / "state"), "--",
           *jupyter_options(port, TOKEN), f"--ServerApp.base_url={BASE_URL}"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "ANDREA_LANG"))}
    proc = start_server(cmd, tmp, env, tmp / "server.log", port, TOKEN, base_url=BASE_URL)
    try:
        yield port
    finally:
        stop_server(proc)


def _chapter_url(port: int, edition: str) -> str:
    return f"http://127.0.0.1:{port}{BASE_URL}andrea-book/{'' if edition == 'en' else edition + '/'}book/{CHAPTER}.html"


@pytest.mark.parametrize("edition", EDITIONS)
def test_a_chapter_link_of_the_fetched_page_opens_the_chapter(fetched_page, browser, edition):
    port = fetched_page
    blocked: list[str] = []
    context = loopback_context(browser, blocked)
    failures = record_failures(context)
    page = context.new_page()
    resp = page.goto(f"http://127.0.0.1:{port}{BASE_URL}files/{urllib.parse.quote(FEEDBACK)}?token={TOKEN}",
                     wait_until="load")
    assert resp is not None and resp.status == 200
    assert "script-src 'none'" in (page.locator("meta[http-equiv='Content-Security-Policy']")
                                   .get_attribute("content") or "")
    assert page.locator("mjx-container svg").count() > 0  # the page is the grader's, math typeset
    link = page.locator(f"a[href='{chapter_link('book/' + CHAPTER, edition)}']")
    assert link.count() == 1, page.eval_on_selector_all("a", "els => els.map(a => a.getAttribute('href'))")
    with page.expect_navigation(wait_until="load"):
        link.click()
    assert page.url == _chapter_url(port, edition), page.url
    state = assert_book_page_loaded(page, failures, edition)
    assert state["title"].strip(), state
    context.close()
    assert not blocked, blocked


def test_the_page_opened_in_jupyterlab_reaches_the_chapter(fetched_page, browser):
    """Double-clicked in the file browser, the page opens in JupyterLab's HTML viewer (a
    sandboxed frame, untrusted): its chapter link opens the chapter in that frame."""
    port = fetched_page
    blocked: list[str] = []
    context = loopback_context(browser, blocked)
    page = context.new_page()
    page.goto(f"http://127.0.0.1:{port}{BASE_URL}lab/tree/{urllib.parse.quote(FEEDBACK)}?reset&token={TOKEN}",
              wait_until="load")
    frame_element = page.wait_for_selector(".jp-HTMLViewer iframe", timeout=60_000)
    frame = frame_element.content_frame()
    frame.wait_for_selector(f"a[href='{chapter_link('book/' + CHAPTER, 'de')}']", timeout=60_000)
    frame.click(f"a[href='{chapter_link('book/' + CHAPTER, 'de')}']")
    target = _chapter_url(port, "de")
    frame = frame_element.content_frame()
    frame.wait_for_url(target, timeout=30_000)
    frame.wait_for_load_state("load")
    assert frame.evaluate("() => document.documentElement.lang").startswith("de")
    assert CHAPTER.split("_", 1)[1].split("_")[0].lower() in frame.evaluate("() => document.title").lower()
    context.close()
    assert not blocked, blocked
