"""Feedback pages as a learner reads them: offline, in a real browser, at 1200 px.

One learner hands in two notebooks (LayerNorm with the unbiased variance, which fails
one property; GELU solved, which passes all three). The course's grading command
grades them on a temporary folder and gradebook; its output must hold no library
warning. Then headless Chromium (Debian's package, driven by Playwright) opens each
feedback page from disk with every request but the page's own blocked and recorded,
and checks: math typeset when the page was built (SVG, no script on the page, no raw
TeX left), tables with borders, nothing wider than the window (the "Likely mistake"
line wraps), the chapter link opening the copy of the chapter shipped beside the page,
and every verdict shown once. A screenshot is saved to _build/screenshots/ for review.

Needs the built book (make book), as tests/test_book_browser.py does. The JavaScript
trap, pasted images, a page that cannot be built and pages copied elsewhere are in
tests/test_feedback_trap.py.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from grading_submissions import ASSIGNMENTS, CASES, make_submission  # noqa: E402

from classroom.reporting import chapters, feedback, mathsvg  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WIDTH = 1200
STUDENT = "learner1"
HANDED_IN = {"02_layernorm": "ln_unbiased", "03_gelu": "gelu_solution"}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The grading command run once over one learner's folder: its output and pages."""
    if not (HTML / "book").is_dir() or mathsvg.unavailable():
        pytest.fail(f"_build/html or MathJax for Node is missing: build the book first (make book) "
                    f"({mathsvg.unavailable() or 'no _build/html/book'})")
    tmp = tmp_path_factory.mktemp("feedback")
    by_name = {c.student: c for c in CASES}
    for assignment, name in HANDED_IN.items():
        nb_file = ASSIGNMENTS[assignment][0]
        released = json.loads((ROOT / "exercises" / assignment / nb_file).read_text())
        solution = json.loads((ROOT / "solutions" / assignment / nb_file).read_text())
        path = tmp / "subs" / STUDENT / assignment / nb_file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(make_submission(by_name[name], released, solution))
    out = tmp / "out"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "classroom.grade", str(tmp / "subs"), "--workers", "1",
                           "--out", str(out), "--db", f"sqlite:///{tmp / 'gradebook.db'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900)
    return {"proc": proc, "out": out, "seconds": time.monotonic() - t0}


def _page(graded, assignment: str) -> Path:
    nb = Path(ASSIGNMENTS[assignment][0]).stem
    page = graded["out"] / "feedback" / STUDENT / assignment / f"{nb}.html"
    assert page.is_file(), (page, graded["proc"].stdout[-3000:], graded["proc"].stderr[-3000:])
    return page


def test_grading_prints_no_library_warning(graded):
    proc = graded["proc"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "this run graded 2 submission(s)" in proc.stdout
    noisy = [ln for ln in (proc.stdout + proc.stderr).splitlines() if re.search(r"warning", ln, re.I)]
    assert not noisy, noisy


@pytest.fixture(scope="module")
def browser(graded):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium package (make sysdeps)")
    from playwright.sync_api import sync_playwright

    left: list[str] = []
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = b.new_context(viewport={"width": WIDTH, "height": 900})

        def route(r):
            if urllib.parse.urlsplit(r.request.url).scheme in ("file", "data"):
                r.continue_()
            else:
                left.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        context.on("request", lambda req: None if urllib.parse.urlsplit(req.url).scheme
                   in ("file", "data") else left.append(req.url))
        yield context, left
        context.close()
        b.close()


def _open(browser, page_path: Path):
    context, left = browser
    page = context.new_page()
    requests: list[str] = []
    errors: list[str] = []
    page.on("request", lambda req: requests.append(req.url))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(page_path.as_uri(), wait_until="load")
    return page, requests, errors


def _verdict_lines(page) -> list[str]:
    text = page.evaluate("() => document.body.innerText")
    return [ln.strip() for ln in text.splitlines() if ln.strip().startswith(("\u2713", "\u2717"))]


@pytest.mark.parametrize("assignment", sorted(HANDED_IN))
def test_feedback_page_reads_well_offline(graded, browser, assignment):
    page_path = _page(graded, assignment)
    page, requests, errors = _open(browser, page_path)
    _, left = browser
    try:
        # math: typeset when the page was built (SVG), no script on the page, no TeX left in the prose
        assert page.locator("mjx-container > svg").count() > 0
        assert page.evaluate("() => document.scripts.length") == 0
        prose = page.evaluate("""() => Array.from(document.querySelectorAll('div.text_cell_render'))
            .map(e => { const c = e.cloneNode(true); c.querySelectorAll('mjx-container').forEach(m => m.remove());
                        return c.innerText; }).join('\\n')""")
        assert "$" not in prose and "\\frac" not in prose and "\\varepsilon" not in prose, prose[:2000]
        assert not errors, errors

        # tables: the rules table has borders and a shaded header
        style = page.evaluate("""() => { const t = document.querySelector('div.text_cell_render table');
            const td = t.querySelector('td'), th = t.querySelector('th');
            return {collapse: getComputedStyle(t).borderCollapse, border: getComputedStyle(td).borderTopWidth,
                    style: getComputedStyle(td).borderTopStyle, head: getComputedStyle(th).backgroundColor}; }""")
        assert style["collapse"] == "collapse" and style["border"] != "0px" and style["style"] == "solid", style
        assert style["head"] not in ("rgba(0, 0, 0, 0)", "transparent"), style

        # width: nothing reaches past the window; long lines wrap
        assert page.evaluate("() => document.documentElement.scrollWidth") <= WIDTH
        too_wide = page.evaluate("""(w) => Array.from(document.body.querySelectorAll('*'))
            .filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 1 && r.right > w + 1; })
            .filter(e => !e.closest('mjx-assistive-mml'))
            .map(e => e.tagName + '.' + e.className + ': ' + (e.innerText || '').slice(0, 80))""", WIDTH)
        assert not too_wide, too_wide[:10]
        pres = page.evaluate("""() => Array.from(document.querySelectorAll('pre'))
            .filter(p => p.scrollWidth > p.clientWidth + 1).map(p => p.innerText.slice(0, 120))""")
        assert not pres, pres

        # the chapter link opens the copy of the chapter shipped beside the page
        links = page.evaluate("""() => Array.from(document.querySelectorAll('a[href]'))
            .map(a => [a.getAttribute('href'), a.href]).filter(h => h[0].includes('book/'))""")
        assert links, "no link to the book"
        for href, absolute in links:
            assert href.startswith("book/") and ".html" in href, href
            target = Path(urllib.request.url2pathname(urllib.parse.urlsplit(absolute).path))
            assert target.is_file() and target.parent.parent == page_path.parent, href
            chapter = browser[0].new_page()
            try:
                chapter.goto(absolute, wait_until="load")
                assert chapter.locator("article h1").count() == 1
                assert chapter.locator("mjx-container > svg").count() > 10
                assert chapter.evaluate("() => Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)")
            finally:
                chapter.close()

        # each verdict once: the grader's, one line per graded cell that passed, one failure per cell failed
        lines = _verdict_lines(page)
        assert len(lines) == len(set(lines)), lines
        ticks = [ln for ln in lines if ln.startswith("\u2713")]
        cells = ASSIGNMENTS[assignment][3]
        lost = {"02_layernorm": {"ln_normalise"}, "03_gelu": set()}[assignment]
        assert len(ticks) == len(cells) - len(lost), lines
        text = page.evaluate("() => document.body.innerText")
        assert text.count("Likely mistake") == len(lost), text.count("Likely mistake")
        if lost:
            mistake = page.locator("pre", has_text="Likely mistake")
            box = mistake.bounding_box()
            assert box and box["x"] + box["width"] <= WIDTH
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            mistake.scroll_into_view_if_needed()
            page.screenshot(path=str(SCREENSHOTS / f"feedback-{assignment}.png"))

        # nothing left the machine
        assert not left, left
        assert all(urllib.parse.urlsplit(u).scheme in ("file", "data") for u in requests), requests
        assert [u for u in requests if u.startswith("file:")] == [page_path.as_uri()], requests
    finally:
        page.close()


PAGE = ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>x</title>"
        "<!-- Load mathjax --><script src='https://cdn.example/mathjax.js'></script>"
        "<!-- End of mathjax configuration --><style>.x { color: red }</style></head><body>"
        "<p>$x^2$</p><a href='../../_build/html/book/05_mlp_and_gelu.html#gelu'>en</a>"
        "<a href='../../_build/html/de/book/05_mlp_and_gelu.html'>de</a>"
        "<a href='../../book/03_residual_connections.md'>older release</a><a href='other.html'>z</a></body></html>")


def test_a_published_book_address_is_used_for_the_links(tmp_path):
    """c.CourseBook.url in nbgrader_config.py: one setting sends the chapter links to the
    published book, in the linked edition; nothing is shipped and no script is loaded."""
    from traitlets.config import Config

    cfg = Config()
    cfg.CourseBook.url = "https://courses.example.org/andrea-block-lab"
    done = feedback.build_page(PAGE, tmp_path / "p.html", cfg)
    page = (tmp_path / "p.html").read_text()
    assert "cdn.example" not in page and "<script" not in page and "<mjx-container" in page
    base = "https://courses.example.org/andrea-block-lab/"
    assert f'href="{base}book/05_mlp_and_gelu.html#gelu"' in page
    assert f'href="{base}de/book/05_mlp_and_gelu.html"' in page
    assert f'href="{base}book/03_residual_connections.html"' in page
    assert 'href="other.html"' not in page  # a relative link to nothing shipped is left out
    assert not done["shipped"] and not (tmp_path / "book").exists()
    assert chapters.book_url(cfg) == base
    for unusable in ("", "file:///srv/book", "/srv/book", "javascript:alert(1)"):
        cfg.CourseBook.url = unusable
        assert chapters.book_url(cfg) == "", unusable


def test_without_an_address_the_linked_editions_are_shipped(tmp_path):
    done = feedback.build_page(PAGE, tmp_path / "p.html")
    page = (tmp_path / "p.html").read_text()
    assert 'href="book/05_mlp_and_gelu.html#gelu"' in page and 'href="book/03_residual_connections.html"' in page
    assert 'href="book/de/05_mlp_and_gelu.html"' in page
    assert done["shipped"] == ["book/03_residual_connections.html", "book/05_mlp_and_gelu.html",
                               "book/de/05_mlp_and_gelu.html"]
    for path, lang in (("book/05_mlp_and_gelu.html", "en"), ("book/de/05_mlp_and_gelu.html", "de")):
        shipped = (tmp_path / path).read_text()
        assert shipped.startswith("<!DOCTYPE html>") and "<script" not in shipped and "file://" not in shipped
        assert f'<html lang="{lang}"' in shipped and "<mjx-container" in shipped
