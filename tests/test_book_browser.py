"""The built book, opened in a real browser with no network.

Headless Chromium (Debian's package, driven by Playwright) loads every page of
_build/html from a local HTTP server. Every request that is not for localhost is
blocked and recorded. On every page: math is typeset by the vendored MathJax and no
raw TeX is left, every image has loaded, the console shows no error; every internal
link (and its #fragment) resolves; the search page finds a term. A screenshot of one
chapter is saved to _build/screenshots/ for review.
"""
from __future__ import annotations

import functools
import http.server
import shutil
import threading
import urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

pytestmark = pytest.mark.slow


def _pages() -> list[str]:
    if not (HTML / "index.html").is_file():
        pytest.fail("_build/html/index.html is missing: build the book first (make book)")
    pages = [p.relative_to(HTML).as_posix() for p in HTML.rglob("*.html")]
    # index.html only redirects to the first chapter: test_front_page_redirects covers it.
    return sorted(p for p in pages if p != "index.html"
                  and not p.startswith(("_static/", "_sources/", "reports/", "notebooks/")))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output readable
        pass


@pytest.fixture(scope="module")
def server():
    _pages()
    handler = functools.partial(_QuietHandler, directory=str(HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture(scope="module")
def browser_context(server):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium package (make sysdeps)")
    from playwright.sync_api import sync_playwright

    blocked: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})

        def route(r):
            host = urllib.parse.urlsplit(r.request.url).hostname
            if host in ("127.0.0.1", "localhost"):
                r.continue_()
            else:
                blocked.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        yield context, blocked
        context.close()
        browser.close()


TYPESET_JS = """async () => {
  const hasMath = document.querySelector('.math') !== null;
  if (hasMath) {
    for (let i = 0; i < 200 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++) {
      await new Promise(r => setTimeout(r, 50));
    }
    if (!(window.MathJax && MathJax.startup)) return {hasMath, loaded: false};
    await MathJax.startup.promise;
  }
  const text = document.body.innerText;
  return {
    hasMath,
    loaded: !!window.MathJax,
    typeset: document.querySelectorAll('mjx-container').length,
    raw: ['$$', '\\\\(', '\\\\)', '\\\\[', '\\\\]', '\\\\begin{'].filter(s => text.includes(s)),
  };
}"""

IMAGES_JS = """async () => {
  const imgs = Array.from(document.querySelectorAll('article img'));
  await Promise.all(imgs.map(i => i.complete ? null : new Promise(r => { i.onload = i.onerror = r; })));
  return {
    count: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    no_alt: imgs.filter(i => !(i.getAttribute('alt') || '').trim()).map(i => i.getAttribute('src')),
  };
}"""

# Figures each chapter draws (a build that drops figures must not pass).
MIN_FIGURES = {"book/02_attention_plus_mlp.html": 1, "book/03_residual_connections.html": 2,
               "book/04_layernorm_and_placement.html": 2,
               "book/05_mlp_and_gelu.html": 2}


def test_every_page_renders_offline(server, browser_context):
    context, blocked = browser_context
    problems: list[str] = []
    links: dict[str, str] = {}
    math_pages = 0
    for rel in _pages():
        page = context.new_page()
        errors: list[str] = []
        page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
        response = page.goto(server + rel, wait_until="load")
        if response is None or response.status != 200:
            problems.append(f"{rel}: HTTP {response.status if response else 'no response'}")
        math = page.evaluate(TYPESET_JS)
        if math["hasMath"]:
            math_pages += 1
            if not math["loaded"] or math["typeset"] == 0:
                problems.append(f"{rel}: math on the page but MathJax did not typeset it ({math})")
        if math.get("raw"):
            problems.append(f"{rel}: raw TeX left in the page text: {math['raw']}")
        images = page.evaluate(IMAGES_JS)
        if images["broken"]:
            problems.append(f"{rel}: images not loaded: {images['broken']}")
        if images["no_alt"]:
            problems.append(f"{rel}: images without alt text: {images['no_alt']}")
        if images["count"] < MIN_FIGURES.get(rel, 0):
            problems.append(f"{rel}: {images['count']} figures, expected at least {MIN_FIGURES[rel]}")
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
            if href.startswith(server):
                links.setdefault(href, rel)
        if errors:
            problems.append(f"{rel}: console errors: {errors}")
        page.close()
    assert math_pages >= 3, f"expected math on several chapters, found it on {math_pages} pages"
    assert not blocked, f"pages tried to reach the network: {sorted(set(blocked))[:10]}"
    assert not problems, "\n".join(problems)

    # Every internal link resolves, fragments included.
    bad = []
    bodies: dict[str, str] = {}
    for href, source in sorted(links.items()):
        target, _, fragment = href.partition("#")
        if target not in bodies:
            resp = context.request.get(target)
            bodies[target] = resp.text() if resp.ok else None
            if not resp.ok:
                bad.append(f"{source} -> {href}: HTTP {resp.status}")
                continue
        body = bodies[target]
        if fragment and body is not None and target.endswith(".html"):
            frag = urllib.parse.unquote(fragment)
            if f'id="{frag}"' not in body and f"id='{frag}'" not in body:
                bad.append(f"{source} -> {href}: no element with id {frag!r}")
    assert len(links) > 20
    assert not bad, "\n".join(bad)


def test_front_page_redirects_to_the_first_chapter(server, browser_context):
    context, _ = browser_context
    page = context.new_page()
    page.goto(server + "index.html")
    page.wait_for_url("**/book/01_welcome.html", timeout=10_000)
    assert "ANDREA" in page.title()
    page.close()


def test_search_finds_a_term(server, browser_context):
    context, _ = browser_context
    page = context.new_page()
    page.goto(server + "search.html?q=LayerNorm", wait_until="load")
    page.wait_for_selector("ul.search li", timeout=20_000)
    hits = page.eval_on_selector_all("ul.search li a", "els => els.map(e => e.getAttribute('href'))")
    page.close()
    assert any("03_residual_connections" in h for h in hits), hits


def test_screenshot_of_a_chapter(server, browser_context):
    context, _ = browser_context
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = context.new_page()
    page.goto(server + "book/03_residual_connections.html", wait_until="load")
    page.evaluate("async () => { if (window.MathJax && MathJax.startup) await MathJax.startup.promise; }")
    top = SCREENSHOTS / "03_residual_connections_top.png"
    page.screenshot(path=str(top))
    page.locator("#fig-gradflow").scroll_into_view_if_needed()
    figure = SCREENSHOTS / "03_residual_connections_figure.png"
    page.screenshot(path=str(figure))
    page.close()
    assert top.stat().st_size > 20_000 and figure.stat().st_size > 20_000
