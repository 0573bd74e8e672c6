"""The built book, opened in a real browser with no network.

Headless Chromium (Debian's package, driven by Playwright) loads every page of
_build/html from a local HTTP server. Every request that is not for localhost is
blocked and recorded. On every page: math is typeset by the vendored MathJax and no
raw TeX is left, every image has loaded, the console shows no error; every internal
link (and its #fragment) resolves; the search page finds a term. A screenshot of one
chapter is saved to _build/screenshots/ for review.

Layout: on the chapters (book/01..09), no code-cell output is wider than its box at
1280 px, and shown code never wraps (a long line scrolls inside its box); no page scrolls
sideways at 420 px (wide math, tables, code and figures scroll inside their own box, with
a visible cue at the edge), no formula is clipped, names in inline code break only between
their parts, figures with panels side by side keep a legible scale.
Accessibility: axe-core (vendored, tests/vendor/axe-core) finds no serious or critical
violation on any page of any edition; no id appears twice on a page;
every diagram has an alt text, translated in each edition. Every chapter has its
objectives and its summary; exercise
solutions are folded until their title is clicked (pages with none are skipped);
numbers computed at build time read as body text;
the welcome page is in the left navigation; each notebook chapter offers its .ipynb and
its source for download. Launch buttons are tested without a browser (launch_links).

Editions: the German (_build/html/de) and Georgian (_build/html/ka) editions are part of
every check above that walks every page (math, images, links, no network). On top of
that: each edition's pages are in its language and say so (<html lang>); the language
menu on every page links to the same page in all three editions, and choosing a
language opens it; each edition shows its own figures; the Georgian pages draw every
Georgian letter with the vendored Noto Sans Georgian (the face is loaded, Chromium reports
it as the font that rendered the text, and no letter comes out as the missing-glyph box).
"""
from __future__ import annotations

import contextlib
import functools
import http.server
import queue
import re
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


def _chapters() -> list[str]:
    """book/01..09 as built pages (the numbered chapters of _toc.yml)."""
    return [p for p in _pages() if re.fullmatch(r"book/0[1-9]_[a-z0-9_]+\.html", p)]


def _pages() -> list[str]:
    if not (HTML / "index.html").is_file():
        pytest.fail("_build/html/index.html is missing: build the book first (make book)")
    pages = [p.relative_to(HTML).as_posix() for p in HTML.rglob("*.html")]

    def in_edition(p: str) -> str:  # the page's path inside its edition (de/..., ka/...)
        first, _, rest = p.partition("/")
        return rest if first in ("de", "ka") and rest else p

    # index.html only redirects to the first chapter: test_front_page_redirects covers it.
    return sorted(p for p in pages if in_edition(p) != "index.html"
                  and not in_edition(p).startswith(("_static/", "_sources/", "reports/", "notebooks/")))


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


@contextlib.contextmanager
def _chromium(blocked: list[str]):
    """A context of headless Chromium at a desktop's width that lets through only requests
    for localhost: every other request is aborted and its URL added to ``blocked``."""
    from playwright.sync_api import sync_playwright

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
        try:
            yield context
        finally:
            context.close()
            browser.close()


@pytest.fixture(scope="module")
def browser_context(server):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install Debian's chromium package (make sysdeps)")
    blocked: list[str] = []
    with _chromium(blocked) as context:
        yield context, blocked


# Browsers that walk the pages side by side: a page keeps its renderer busy (layout,
# MathJax, axe-core's audit) while the test waits, so two of them use both cores.
WALKERS = 2


def _each_page(blocked: list[str], read) -> dict:
    """{page: read(page, rel)} for every page of every edition (_pages(), in its order),
    each opened in a new tab and closed after. The pages are shared out between WALKERS
    browsers, one per thread (Playwright's synchronous API wants its own instance in each
    thread), with the network blocked as in ``browser_context``."""
    pages = _pages()
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for rel in pages:
        todo.put(rel)
    results: dict = {}
    failures: list[BaseException] = []

    def walk():
        try:
            with _chromium(blocked) as context:
                while not failures:
                    try:
                        rel = todo.get_nowait()
                    except queue.Empty:
                        return
                    page = context.new_page()
                    try:
                        results[rel] = read(page, rel)
                    finally:
                        page.close()
        except BaseException as exc:  # noqa: BLE001 - raised again in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=walk, name=f"walker-{i}") for i in range(WALKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise failures[0]
    return {rel: results[rel] for rel in pages}


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

# Figures each chapter draws (a build that drops figures must not pass), in every edition.
EDITIONS = ("", "de/", "ka/")
MIN_FIGURES = {f"{edition}{page}": n for edition in EDITIONS for page, n in (
    ("book/02_attention_plus_mlp.html", 1), ("book/03_residual_connections.html", 2),
    ("book/04_layernorm_and_placement.html", 2), ("book/05_mlp_and_gelu.html", 2))}


def test_every_page_renders_offline(server, browser_context, visited):
    context, blocked = browser_context
    problems: list[str] = []
    links: dict[str, str] = {}
    math_pages = 0
    for rel, f in visited.items():
        if f["status"] != 200:
            problems.append(f"{rel}: HTTP {f['status'] or 'no response'}")
        math = f["math"]
        if math["hasMath"]:
            math_pages += 1
            if not math["loaded"] or math["typeset"] == 0:
                problems.append(f"{rel}: math on the page but MathJax did not typeset it ({math})")
        if math.get("raw"):
            problems.append(f"{rel}: raw TeX left in the page text: {math['raw']}")
        images = f["images"]
        if images["broken"]:
            problems.append(f"{rel}: images not loaded: {images['broken']}")
        if images["no_alt"]:
            problems.append(f"{rel}: images without alt text: {images['no_alt']}")
        if images["count"] < MIN_FIGURES.get(rel, 0):
            problems.append(f"{rel}: {images['count']} figures, expected at least {MIN_FIGURES[rel]}")
        for href in f["links"]:
            if href.startswith(server):
                links.setdefault(href, rel)
        if f["errors"]:
            problems.append(f"{rel}: console errors: {f['errors']}")
    assert math_pages >= 3 * len(EDITIONS), f"expected math on several chapters, found it on {math_pages} pages"
    for edition in EDITIONS[1:]:
        assert sum(p.startswith(edition) for p in _pages()) >= 10, f"the {edition} edition is missing pages"
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
    for edition in ("", "de/", "ka/"):
        page = context.new_page()
        page.goto(server + edition + "index.html")
        page.wait_for_url(f"{server}{edition}book/01_welcome.html", timeout=10_000)
        assert "ANDREA" in page.title()
        page.close()


def test_search_finds_a_term(server, browser_context):
    context, _ = browser_context
    page = context.new_page()
    page.goto(server + "search.html?q=LayerNorm", wait_until="load")
    page.wait_for_selector("ul.search li", timeout=20_000)
    hits = page.eval_on_selector_all("ul.search li a", "els => els.map(e => e.getAttribute('href'))")
    page.close()
    assert any("04_layernorm_and_placement" in h for h in hits), hits


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


def _wait_for_math(page) -> None:
    page.evaluate("async () => { if (window.MathJax && MathJax.startup && MathJax.startup.promise)"
                  " await MathJax.startup.promise; }")


# The widest elements that stick out of the viewport (to say what makes a page scroll).
PAGE_OVERFLOW_JS = """() => {
  const width = document.documentElement.clientWidth;
  const total = Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);
  const culprits = [];
  if (total > width + 1) {
    for (const e of document.querySelectorAll('article *')) {
      const r = e.getBoundingClientRect();
      if (r.right > width + 1 && e.offsetParent !== null) {
        let inside = false;  // already inside a box that scrolls or clips
        for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
          const s = getComputedStyle(p);
          if (['auto', 'scroll', 'hidden', 'clip'].includes(s.overflowX) && p.getBoundingClientRect().right <= width + 1) { inside = true; break; }
        }
        if (!inside) culprits.push(`${e.tagName.toLowerCase()}.${e.className}`.slice(0, 80) + ` (right edge ${Math.round(r.right)} px)`);
      }
      if (culprits.length >= 5) break;
    }
  }
  return {width, total, culprits};
}"""


def test_chapter_outputs_fit_at_1280px(visited):
    """No printed output is cut off on the right on a desktop screen, and shown code keeps
    its lines: a long one scrolls inside its box (with the edge cue), it never wraps."""
    chapters = {rel: visited[rel]["chapter"] for rel in _chapters()}
    outputs = sum(c["outputs"] for c in chapters.values())
    problems = [f"{rel}: {p}" for rel, c in chapters.items() for p in c["too_wide"]]
    assert outputs > 0, "no code-cell output found on any chapter"
    assert not problems, "outputs wider than their box, or code that wraps, at 1280 px:\n" + "\n".join(problems)


# Printed output wider than its box (cut off, or reachable only by scrolling sideways).
OUTPUT_OVERFLOW_JS = """() => {
  const boxes = document.querySelectorAll(
    'div.cell_output, div.cell_output .output, div.cell_output pre, div.cell_output .text_html');
  return Array.from(boxes).filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1
                                       && !['auto', 'scroll'].includes(getComputedStyle(e).overflowX))
    .map(e => `${e.className || e.tagName}: ${e.scrollWidth} px in ${e.clientWidth} px: `
              + JSON.stringify(e.innerText.slice(0, 60)));
}"""

# Shown code whose lines wrap (white-space other than pre), or that is wider than its box
# without scrolling inside it.
CODE_LINES_JS = """() => {
  const problems = [];
  for (const e of document.querySelectorAll('div.cell_input pre, article div.highlight pre')) {
    if (e.offsetParent === null || e.closest('.cell_output')) continue;  // printed output wraps
    const s = getComputedStyle(e);
    if (s.whiteSpace !== 'pre') problems.push(`code wraps (white-space: ${s.whiteSpace}): ` + JSON.stringify(e.innerText.slice(0, 60)));
    else if (e.scrollWidth > e.clientWidth + 1 && !['auto', 'scroll'].includes(s.overflowX))
      problems.push(`code cut off (${e.scrollWidth} px in ${e.clientWidth} px): ` + JSON.stringify(e.innerText.slice(0, 60)));
  }
  return problems;
}"""

# At a phone's width: everything wider than its box scrolls inside it and shows the edge
# cue; formulas are not clipped; names in inline code break only between their parts
# (at a space, or a <wbr> break point), never inside a word; figures with panels side by
# side keep a legible scale.
NARROW_JS = r"""() => {
  const problems = [];
  const scrolls = s => ['auto', 'scroll'].includes(s.overflowX);
  const boxes = 'div.pst-scrollable-table-container, div.cell_output .text_html, div.cell_output figure, '
    + 'div.cell_input pre, article div.highlight pre, div.math, mjx-container[display="true"]';
  for (const e of document.querySelectorAll(boxes)) {
    if (e.offsetParent === null || e.scrollWidth <= e.clientWidth + 1) continue;
    const s = getComputedStyle(e);
    const name = `${e.tagName.toLowerCase()}.${e.className}`.slice(0, 60);
    if (!scrolls(s)) problems.push(`${name} is ${e.scrollWidth} px wide in ${e.clientWidth} px and does not scroll`);
    else if (!s.backgroundImage.includes('gradient')) problems.push(`${name} scrolls sideways with no visible cue`);
  }
  for (const e of document.querySelectorAll('article mjx-container')) {
    if (e.offsetParent === null) continue;
    const s = getComputedStyle(e);
    if (e.scrollHeight > e.clientHeight + 2 && s.overflowY !== 'visible')
      problems.push(`formula clipped: ${e.scrollHeight} px tall in ${e.clientHeight} px`);
    if (e.scrollWidth > e.clientWidth + 1 && !scrolls(s) && !scrolls(getComputedStyle(e.parentElement)))
      problems.push(`formula cut off: ${e.scrollWidth} px wide in ${e.clientWidth} px`);
  }
  for (const code of document.querySelectorAll('article code.literal')) {
    if (code.offsetParent === null) continue;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let t = walker.nextNode(); t; t = walker.nextNode()) {
      const text = t.textContent;
      let last = null;
      for (let i = 0; i < text.length; i++) {
        const r = document.createRange(); r.setStart(t, i); r.setEnd(t, i + 1);
        const box = r.getBoundingClientRect();
        if (box.width === 0 && box.height === 0) continue;
        if (last !== null && box.top > last.top + last.height / 2 && !/[\s-]/.test(text[i - 1]))
          problems.push(`${JSON.stringify(code.innerText.slice(0, 60))} breaks inside a word, before ${JSON.stringify(text.slice(i, i + 12))}`);
        last = box;
      }
    }
  }
  for (const img of document.querySelectorAll('div.cell_output img')) {
    if (img.offsetParent === null || !img.naturalWidth) continue;
    const scale = img.getBoundingClientRect().width / img.naturalWidth;
    if (scale < 0.6) problems.push(`figure ${img.getAttribute('src')} shrinks to ${scale.toFixed(2)} of its size`);
  }
  return problems;
}"""


def test_no_page_scrolls_sideways_at_420px(server, browser_context):
    """On a phone-sized screen only wide formulas, tables, code and figures scroll, inside
    their own box and visibly so; formulas are whole, names in code break between their
    parts, figures with panels side by side stay legible."""
    _, blocked = browser_context

    def read(page, rel):
        page.set_viewport_size({"width": 420, "height": 860})
        page.goto(server + rel, wait_until="load")
        _wait_for_math(page)
        found = page.evaluate(PAGE_OVERFLOW_JS)
        problems = []
        if found["total"] > found["width"] + 1:
            problems.append(f"{rel}: page is {found['total']} px wide in a {found['width']} px "
                            f"viewport; sticking out: {found['culprits']}")
        return problems + [f"{rel}: {p}" for p in page.evaluate(NARROW_JS)]

    problems = [p for found in _each_page(blocked, read).values() for p in found]
    assert not problems, "\n".join(problems)


AXE = ROOT / "tests" / "vendor" / "axe-core" / "axe.min.js"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"  # axe-core 4.14.1 (its README)


def test_accessibility_audit_of_every_page(visited):
    """axe-core (vendored in tests/vendor/axe-core) over every page of every edition (at a
    desktop's width, where the navigation is shown too, once the math is typeset): no
    violation of impact serious or critical."""
    import hashlib
    assert hashlib.sha256(AXE.read_bytes()).hexdigest() == AXE_SHA256, f"{AXE} is not the recorded axe-core"
    problems = [f"{rel}: {v['impact']} {v['id']} ({v['help']}): {v['nodes']}"
                for rel, f in visited.items() for v in f["axe"]]
    assert len(visited) >= 3 * 10, f"only {len(visited)} pages audited"
    assert not problems, "\n".join(problems)


PAGE_FACTS_JS = """() => {
  const seen = {};
  for (const e of document.querySelectorAll('[id]')) seen[e.id] = (seen[e.id] || 0) + 1;
  return {
    dupes: Object.entries(seen).filter(([, n]) => n > 1).map(([id, n]) => `${id} (${n} times)`),
    alts: [...document.querySelectorAll('div.graphviz object')].map(e => e.textContent.trim()),
    labels: [...document.querySelectorAll('[aria-label]')].map(e => e.getAttribute('aria-label')),
  };
}"""


MENU_JS = """els => els.map(e => ({lang: e.getAttribute('hreflang'), href: e.href,
                                 current: e.getAttribute('aria-current')}))"""

AXE_JS = """async () => {
  const r = await axe.run(document, {resultTypes: ['violations']});
  return r.violations.filter(v => ['serious', 'critical'].includes(v.impact)).map(v => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 3).map(n => n.target.join(' ') + ': ' + (n.failureSummary || '').slice(0, 160))}));
}"""


def _solutions(page, rel: str) -> tuple[int, list[str]]:
    """(solutions that open on a click, problems): every exercise solution of the page is a
    folded dropdown, hidden until its title is clicked."""
    checked, problems = 0, []
    solutions = page.locator("article .solution")
    for i in range(solutions.count()):
        sol = solutions.nth(i)
        label = f"{rel}: solution {i + 1} ({sol.locator('.admonition-title').first.inner_text().strip()[:50]!r})"
        body = sol.locator(":scope > :not(.admonition-title)")
        if "dropdown" not in (sol.get_attribute("class") or "").split() or body.count() == 0:
            problems.append(f"{label}: not a folded dropdown (needs `:class: dropdown`)")
            continue
        if any(body.nth(j).is_visible() for j in range(body.count())):
            problems.append(f"{label}: visible before it is clicked")
            continue
        sol.locator(":scope > .admonition-title").first.click()
        try:
            body.first.wait_for(state="visible", timeout=3_000)
        except Exception:
            problems.append(f"{label}: still hidden after a click on its title")
            continue
        checked += 1
    return checked, problems


GLUE_STYLES_JS = """() => Array.from(document.querySelectorAll(
    'article span.pasted-text, article p > span.output, article li > span.output')).map(e => {
  const s = getComputedStyle(e), p = getComputedStyle(e.parentElement);
  return {text: e.innerText, weight: s.fontWeight, pweight: p.fontWeight,
          family: s.fontFamily, pfamily: p.fontFamily, parent: e.parentElement.tagName};
})"""


def _chapter_facts(page) -> dict:
    """What the chapter tests read on a numbered chapter, its math typeset."""
    boxes = {}
    for cls in ("objectives", "summary"):
        box = page.locator(f"article .admonition.{cls}")
        boxes[cls] = box.count() > 0 and box.first.is_visible() and len(box.first.inner_text().strip()) >= 20
    return {"outputs": page.locator("div.cell_output").count(),
            "too_wide": page.evaluate(OUTPUT_OVERFLOW_JS) + page.evaluate(CODE_LINES_JS),
            "boxes": boxes, "glue": page.evaluate(GLUE_STYLES_JS),
            "downloads": page.eval_on_selector_all(".dropdown-download-buttons a", "els => els.map(e => e.href)")}


@pytest.fixture(scope="module")
def visited(server, browser_context):
    """{page: what it shows}: every page of every edition opened once at a desktop's width
    and read by every test that walks all pages: the HTTP status and console errors from
    the load on; as loaded, its ids, diagrams' alt texts, accessible names, language and
    language menu (and a Georgian page's letters and fonts); once its math is typeset,
    the math, images and links, a chapter's outputs, code, admonitions, computed numbers
    and downloads, then axe-core's audit; last, its exercise solutions clicked open (the
    only change made to the page)."""
    _, blocked = browser_context
    chapters = set(_chapters())

    def read(page, rel):
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        response = page.goto(server + rel, wait_until="load")
        f = {**page.evaluate(PAGE_FACTS_JS), "language": page.evaluate(LANGUAGE_TEXT_JS),
             "status": response.status if response is not None else None,
             "menu": page.eval_on_selector_all(".andrea-language-menu a.dropdown-item", MENU_JS),
             # read by test_georgian_pages_have_every_glyph
             "glyphs": _glyph_facts(page) if rel.startswith("ka/book/") else None}
        f["math"] = page.evaluate(TYPESET_JS)  # waits for MathJax where the page has math
        f["images"] = page.evaluate(IMAGES_JS)
        f["links"] = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
        if rel in chapters:
            f["chapter"] = _chapter_facts(page)
        f["errors"] = list(errors)  # the page's own: not the audit's, not the clicks'
        page.add_script_tag(path=str(AXE))
        f["axe"] = page.evaluate(AXE_JS)
        f["solutions"] = _solutions(page, rel)
        return f

    return _each_page(blocked, read)


def test_every_id_on_a_page_is_unique(visited):
    """No two elements of a page share an id (a link to one would land on the other)."""
    problems = [f"{rel}: {f['dupes'][:8]}" for rel, f in visited.items() if f["dupes"]]
    assert len(visited) >= 3 * 10
    assert not problems, "\n".join(problems)


def test_diagrams_have_alt_text_in_every_edition(visited):
    """Every Graphviz diagram is described in words, in the page's language: its fallback
    text is an alt text, not the DOT source."""
    problems, diagrams = [], 0
    english: dict[str, list[str]] = {}
    for rel, facts in visited.items():
        alts = facts["alts"]
        diagrams += len(alts)
        edition, _, rest = rel.partition("/")
        key = rest if edition in ("de", "ka") else rel
        for alt in alts:
            if not alt or "digraph" in alt or "->" in alt or len(alt) < 40:
                problems.append(f"{rel}: a diagram without alt text: {alt[:80]!r}")
        if edition not in ("de", "ka"):
            english[key] = alts
        elif key in english and set(alts) & set(english[key]):
            problems.append(f"{rel}: alt text left in English: {sorted(set(alts) & set(english[key]))[0][:80]!r}")
    assert diagrams >= 5 * 3, f"expected the book's five diagrams in three editions, found {diagrams}"
    assert not problems, "\n".join(problems)


def test_every_chapter_has_objectives_and_summary(visited):
    chapters = _chapters()
    assert len(chapters) == 9, chapters
    missing = [f"{rel}: no visible admonition of class {cls!r}"
               for rel in chapters for cls, shown in visited[rel]["chapter"]["boxes"].items() if not shown]
    assert not missing, "chapters without their objectives or summary " \
        "(`:::{admonition} ...` with `:class: objectives` / `:class: summary`):\n" + "\n".join(missing)


def test_solutions_stay_folded_until_clicked(visited):
    checked = sum(f["solutions"][0] for f in visited.values())
    problems = [p for f in visited.values() for p in f["solutions"][1]]
    if checked == 0 and not problems:
        pytest.skip("no page has an exercise solution yet")
    assert not problems, "\n".join(problems)


def test_computed_numbers_read_as_body_text(visited):
    """{glue:text} and {glue:} values are set in the paragraph's own weight and font, not bold or code."""
    seen, problems = 0, []
    for rel in _chapters():
        for st in visited[rel]["chapter"]["glue"]:
            seen += 1
            if st["weight"] != st["pweight"] or st["family"] != st["pfamily"]:
                problems.append(f"{rel}: {st['text']!r} is set in weight {st['weight']} / {st['family'][:30]} "
                                f"inside {st['parent']} of weight {st['pweight']} / {st['pfamily'][:30]}")
    assert seen > 10, f"only {seen} computed numbers found in the chapters"
    assert not problems, "\n".join(problems[:20])


def test_welcome_page_is_in_the_navigation(server, browser_context):
    context, _ = browser_context
    page = context.new_page()
    page.goto(server + "book/03_residual_connections.html", wait_until="load")
    hrefs = page.eval_on_selector_all("nav.bd-docs-nav a, .bd-sidebar-primary nav a",
                                      "els => els.map(e => e.getAttribute('href'))")
    page.close()
    assert any(h and h.split("#")[0].endswith("01_welcome.html") for h in hrefs), hrefs
    # the welcome page, chapters 02..08, the glossary and the references (this page links to itself as #)
    assert len(hrefs) >= 10, hrefs


def test_chapters_offer_their_notebook_and_source_for_download(browser_context, visited):
    context, _ = browser_context
    problems = []
    for rel in _chapters():
        links = visited[rel]["chapter"]["downloads"]
        stem = rel[: -len(".html")]
        md = [h for h in links if h.endswith(f"_sources/{stem}.md")]
        if not md:
            problems.append(f"{rel}: no download of {stem}.md ({links})")
        has_code = "```{code-cell}" in (ROOT / f"{stem}.md").read_text()
        nb = [h for h in links if h.endswith(f"_sources/{stem}.ipynb")]
        if has_code and not nb:
            problems.append(f"{rel}: no download of {stem}.ipynb ({links})")
        for href in md + nb:
            resp = context.request.get(href)
            if not resp.ok:
                problems.append(f"{rel}: {href} answers HTTP {resp.status}")
            elif href.endswith(".ipynb"):
                # the chapter's own code cells, runnable in Jupyter (outputs are there when the
                # chapter was executed by this build, not when its outputs came from the cache)
                nb = resp.json()
                code = [c for c in nb["cells"] if c["cell_type"] == "code"]
                if not code or not "".join(code[0]["source"]).startswith(_extension().SETUP_MARK):
                    problems.append(f"{rel}: the downloaded notebook does not start with the set-up cell")
                code = code[1:]
                expected = (ROOT / f"{stem}.md").read_text().count("```{code-cell}")
                if nb.get("metadata", {}).get("kernelspec", {}).get("language") != "python" \
                        or len(code) != expected:
                    problems.append(f"{rel}: the downloaded notebook has {len(code)} code cells "
                                    f"(the chapter has {expected}) or no Python kernelspec")
    assert not problems, "\n".join(problems)


def _extension():
    import andrea_book
    return andrea_book


def test_launch_buttons_follow_the_repository_address():
    """Off while `repository: url:` is empty; then Colab, and JupyterHub once a hub is named,
    both opening the chapter's notebook from the branch the book is published on."""
    ext = _extension()
    launch = {"notebook_interface": "jupyterlab", "jupyterhub_url": "", "notebooks_branch": "gh-pages",
              "colab_url": "https://colab.research.google.com"}
    page = "book/05_mlp_and_gelu"
    assert ext.launch_links(launch, "", page) == []
    assert ext.launch_links(launch, "https://example.org/not/github", page) == []
    assert ext.launch_links({**launch, "notebooks_branch": ""}, "https://github.com/o/r", page) == []
    links = ext.launch_links(launch, "https://github.com/andrea-lab/block-lab.git", page)
    assert [link["text"] for link in links] == ["Colab"]
    assert links[0]["url"] == ("https://colab.research.google.com/github/andrea-lab/block-lab/blob/"
                               "gh-pages/_sources/book/05_mlp_and_gelu.ipynb")
    links = ext.launch_links({**launch, "jupyterhub_url": "https://hub.example.org/"},
                             "https://github.com/andrea-lab/block-lab", page)
    assert [link["text"] for link in links] == ["JupyterHub", "Colab"]
    assert links[0]["url"] == ("https://hub.example.org/hub/user-redirect/git-pull?"
                               "repo=https%3A//github.com/andrea-lab/block-lab&branch=gh-pages&"
                               "urlpath=lab/tree/block-lab/_sources/book/05_mlp_and_gelu.ipynb")


def test_launch_buttons_are_off_in_this_build():
    """The book's _config.yml leaves the repository address empty, so no page has a launch button."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    if (config.get("repository") or {}).get("url"):
        pytest.skip("a repository address is set: launch buttons are on")
    for rel in _chapters():
        text = (HTML / rel).read_text()
        assert "launch-buttons" not in text and "git-pull?" not in text, rel


def test_references_are_listed_the_way_they_are_cited(server, browser_context):
    """The text cites author-year ("Xiong et al., 2020"); the list is labelled the same way."""
    context, _ = browser_context
    page = context.new_page()
    page.goto(server + "book/references.html", wait_until="load")
    labels = page.eval_on_selector_all("article .citation .label, article dl.citation dt",
                                       "els => els.map(e => e.innerText.replace(/[\\[\\]]/g, '').trim())")
    cited = page.context.request.get(server + "book/05_mlp_and_gelu.html").text()
    page.close()
    assert len(labels) >= 5, labels
    bad = [label for label in labels if not re.fullmatch(r"[A-Z][^\d]+, (19|20)\d\d[a-z]?", label)]
    assert not bad, f"bibliography labels that are not author-year: {bad}"
    # a parenthetical citation in a chapter reads exactly as its label in the list
    in_text = {re.sub(r"</?em>", "", m) for m in re.findall(r'references\.html#[^"]+"[^>]*>([^<]*(?:<em>[^<]*</em>[^<]*)?)</a>', cited)}
    assert in_text & set(labels), (sorted(in_text)[:5], labels[:5])


# ------------------------------------------------------------------------ editions
def _edition_pages(edition: str) -> list[str]:
    """The chapters, glossary and references of one edition, relative to the edition."""
    return [p[len(edition):] for p in _pages() if p.startswith(edition) and p[len(edition):].startswith("book/")]


LANGUAGE_TEXT_JS = """() => {
  const text = (document.querySelector('article') || document.body).innerText;
  const letters = (text.match(/\\p{L}/gu) || []).length;
  const georgian = (text.match(/[\\u10A0-\\u10FF\\u1C90-\\u1CBF\\u2D00-\\u2D2F]/gu) || []).length;
  const words = text.toLowerCase().match(/\\p{L}+/gu) || [];
  const german = words.filter(w => ['und', 'der', 'die', 'das', 'ist', 'nicht', 'mit', 'ein', 'eine', 'wird'].includes(w)).length;
  const english = words.filter(w => ['the', 'and', 'is', 'of', 'that', 'with', 'which'].includes(w)).length;
  return {lang: document.documentElement.lang, letters, georgian, german, english, words: words.length};
}"""


def test_each_edition_is_in_its_language(visited):
    problems = []
    for edition, lang in (("", "en"), ("de/", "de"), ("ka/", "ka")):
        pages = _edition_pages(edition)
        assert len(pages) >= 10, f"edition {lang}: {pages}"
        # the bibliography lists the papers under their own (English) titles
        for rel in (p for p in pages if p != "book/references.html"):
            t = visited[edition + rel]["language"]
            if t["lang"] != lang:
                problems.append(f"{edition}{rel}: <html lang={t['lang']!r}>, expected {lang!r}")
            if lang == "ka" and t["georgian"] < 0.5 * t["letters"]:
                problems.append(f"{edition}{rel}: only {t['georgian']} of {t['letters']} letters are Georgian")
            if lang == "de" and not (t["german"] > 2 * t["english"] and t["german"] >= 0.02 * t["words"]):
                problems.append(f"{edition}{rel}: does not read as German ({t})")
            if lang == "en" and t["english"] < 0.02 * t["words"]:
                problems.append(f"{edition}{rel}: does not read as English ({t})")
    assert not problems, "\n".join(problems)


def test_the_themes_own_english_labels_are_translated(visited):
    """The accessible names the themes write in English in their own code (the primary
    navigation, the print table of contents, the toggle buttons of folded solutions) read
    in the edition's language once the page has loaded, in every page of it."""
    from babel.messages.pofile import read_po
    labels = ("Main", "Page", "Toggle hidden content")
    problems = []
    for edition in ("de", "ka"):
        with (ROOT / "book" / "locales" / edition / "LC_MESSAGES" / "booktheme.po").open("rb") as f:
            words = {m.id: m.string for m in read_po(f) if m.id in labels}
        assert set(words) == set(labels) and all(words.values()), (edition, words)
        seen = set()
        for rel in _edition_pages(edition + "/"):
            names = visited[edition + "/" + rel]["labels"]
            problems += [f"{edition}/{rel}: aria-label {n!r}" for n in names if n in labels]
            seen |= {n for n in names if n in words.values()}
        assert seen == set(words.values()), (edition, set(words.values()) - seen)  # each met somewhere
    assert not problems, "\n".join(problems)


def test_language_menu_opens_the_same_page_in_every_edition(server, browser_context, visited):
    context, _ = browser_context
    problems = []
    for edition in EDITIONS:
        for rel in _edition_pages(edition):
            items = visited[edition + rel]["menu"]
            want = {"en": server + rel, "de": server + "de/" + rel, "ka": server + "ka/" + rel}
            got = {i["lang"]: i["href"] for i in items}
            if got != want:
                problems.append(f"{edition}{rel}: language menu {got}, expected {want}")
            current = [i["lang"] for i in items if i["current"] == "page"]
            if current != [edition.rstrip("/") or "en"]:
                problems.append(f"{edition}{rel}: the menu marks {current} as this page's language")
    assert not problems, "\n".join(problems[:20])
    # choosing a language in the menu, as a reader does it
    page = context.new_page()
    page.goto(server + "book/03_residual_connections.html", wait_until="load")
    for name, lang in (("Deutsch", "de"), ("ქართული", "ka"), ("English", "en")):
        page.click(".andrea-language-menu button.dropdown-toggle")
        page.click(f".andrea-language-menu a.dropdown-item[hreflang={lang}]")
        page.wait_for_load_state("load")
        assert page.url == server + ("" if lang == "en" else f"{lang}/") + "book/03_residual_connections.html", (name, page.url)
        assert page.evaluate("document.documentElement.lang") == lang
    page.close()


def test_each_edition_shows_its_own_figures(server, browser_context):
    """The figures' labels are drawn per language: the images differ between editions."""
    context, _ = browser_context
    rel = "book/03_residual_connections.html"
    sources = {}
    for edition in EDITIONS:
        page = context.new_page()
        page.goto(server + edition + rel, wait_until="load")
        sources[edition] = page.eval_on_selector_all("article figure img", "els => els.map(e => e.src.split('/').pop())")
        page.close()
    assert len(sources[""]) >= 2, sources
    for edition in EDITIONS[1:]:
        assert len(sources[edition]) == len(sources[""]), sources
        assert not set(sources[edition]) & set(sources[""]), f"{edition}: same images as English: {sources}"


GLYPHS_JS = """async () => {
  await document.fonts.ready;
  const text = document.body.innerText;
  const letters = Array.from(new Set(text.match(/[\\u10A0-\\u10FF\\u1C90-\\u1CBF\\u2D00-\\u2D2F]/gu) || []));
  // load the face for every letter on the page, then check how each one is drawn
  await document.fonts.load('16px "Noto Sans Georgian"', letters.join(''));
  const faces = Array.from(document.fonts).filter(f => f.family.replace(/"/g, '') === 'Noto Sans Georgian');
  const canvas = document.createElement('canvas');
  canvas.width = canvas.height = 40;
  const ctx = canvas.getContext('2d', {willReadFrequently: true});
  const draw = ch => {
    ctx.clearRect(0, 0, 40, 40);
    ctx.font = '24px "Noto Sans Georgian"';
    ctx.fillText(ch, 4, 30);
    return Array.from(ctx.getImageData(0, 0, 40, 40).data).join(',');
  };
  // the missing-glyph box: a private-use code point no font here has
  const tofu = draw('\\uE000');
  const missing = letters.filter(ch => draw(ch) === tofu || ctx.measureText(ch).width === 0);
  const body = getComputedStyle(document.querySelector('article p') || document.body).fontFamily;
  return {letters: letters.length, missing, body,
          faces: faces.map(f => ({weight: f.weight, status: f.status}))};
}"""


def _glyph_facts(page) -> dict:
    """GLYPHS_JS's facts of a Georgian page as loaded, and the fonts Chromium really drew
    its first heading with (``fonts``)."""
    g = page.evaluate(GLYPHS_JS)
    cdp = page.context.new_cdp_session(page)
    cdp.send("DOM.enable")
    cdp.send("CSS.enable")
    root = cdp.send("DOM.getDocument")["root"]["nodeId"]
    node = cdp.send("DOM.querySelector", {"nodeId": root, "selector": "article h1"})["nodeId"]
    g["fonts"] = cdp.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"] if node else []
    cdp.detach()
    return g


def test_georgian_pages_have_every_glyph(visited):
    problems = []
    pages = _edition_pages("ka/")
    for rel in pages:
        g = visited["ka/" + rel]["glyphs"]
        fonts = g["fonts"]
        if g["letters"] < 20:
            problems.append(f"ka/{rel}: only {g['letters']} distinct Georgian letters")
        if g["missing"]:
            problems.append(f"ka/{rel}: drawn as missing-glyph boxes: {g['missing']}")
        if not any(f["status"] == "loaded" for f in g["faces"]):
            problems.append(f"ka/{rel}: Noto Sans Georgian was not loaded ({g['faces']})")
        if not g["body"].startswith('"Noto Sans Georgian"'):
            problems.append(f"ka/{rel}: body text font is {g['body']!r}")
        used = {f["familyName"]: f for f in fonts}
        if "Noto Sans Georgian" not in used or not used["Noto Sans Georgian"].get("isCustomFont"):
            problems.append(f"ka/{rel}: the heading was drawn with {sorted(used)}, not the vendored Noto Sans Georgian")
    assert len(pages) >= 10
    assert not problems, "\n".join(problems)


def test_numbers_are_written_the_editions_way(server, browser_context):
    """A value glued into the text: 92,331,264 in English is 92 331 264 in German and Georgian."""
    context, _ = browser_context
    texts = {}
    for edition in EDITIONS:
        page = context.new_page()
        page.goto(server + edition + "book/06_andrea_120m.html", wait_until="load")
        texts[edition] = page.evaluate("document.querySelector('article').innerText")
        page.close()
    from andrea_ref import ANDREA_120M, count_parameters
    n = count_parameters(ANDREA_120M).total
    assert f"{n:,}" in texts[""]
    for edition in EDITIONS[1:]:
        assert f"{n:,}".replace(",", "\u202f") in texts[edition], edition
        assert f"{n:,}" not in texts[edition], edition
