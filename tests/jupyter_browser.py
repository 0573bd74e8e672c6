"""Chromium for the tests that drive JupyterLab or JupyterHub (Playwright, the system's
chromium; the ``browser`` fixtures are in conftest.py): browser contexts that reach the
loopback servers only and record every other address a page tries, a Jupyter server
started and stopped for a test, and what a learner does and sees in JupyterLab: the
Nbgrader menu, a cell typed and run, a chapter link followed to the book, words split
across lines, glyphs drawn as boxes; and a page the grader wrote, opened offline with a
recorder of anything that runs (``open_page``)."""
from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def loopback_context(browser, blocked: list[str], default_timeout_ms: int | None = None):
    """A 1400 x 900 context whose requests to anything but loopback are aborted and
    appended to ``blocked``."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})

    def route(r):
        if urllib.parse.urlsplit(r.request.url).hostname in ("127.0.0.1", "localhost"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    context.route("**/*", route)
    if default_timeout_ms is not None:
        context.set_default_timeout(default_timeout_ms)
    return context


# ----------------------------------------------------------------------------- an offline page
# A page the grader writes, opened from disk with every request but its own folder's files
# blocked, and a recorder of anything that runs (the feedback pages, the class view).
RECORDER = """
window.__trap = (key) => window.__record(String(key));
for (const name of ['alert', 'confirm', 'prompt', 'print', 'open']) {
  window[name] = (...args) => window.__record(name + ':' + args.join(','));
}
"""


def open_page(browser, path: Path, *, allowed: Path | None = None, bypass_csp: bool = False, interact: bool = True):
    """Open ``path`` with the recorder; returns (page, context, events). Requests other than
    files under ``allowed`` (default: the page's folder) and data: images are blocked and
    recorded; ``events["fired"]`` lists every trap that ran, in Python (a navigation
    away cannot lose it)."""
    allowed = (allowed or path.parent).resolve()
    context = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=bypass_csp,
                                  java_script_enabled=True)
    events = {"requests": [], "console": [], "dialogs": [], "popups": [], "navigations": [], "failed": []}

    def route(r):
        url = r.request.url
        scheme = urllib.parse.urlsplit(url).scheme
        if scheme == "data" and url[5:].lower().startswith("image/"):
            return r.continue_()
        if scheme == "file":
            target = Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path)).resolve()
            if target == allowed or allowed in target.parents:
                if target.is_file():
                    return r.continue_()
        events["requests"].append(url[:200])
        return r.abort()

    context.route("**/*", route)
    events["fired"] = []
    context.expose_function("__record", lambda key: events["fired"].append(key))  # survives navigations
    context.add_init_script(RECORDER)
    page = context.new_page()
    page.on("console", lambda m: events["console"].append(f"{m.type}: {m.text}"[:300]))
    page.on("dialog", lambda d: (events["dialogs"].append(d.message), d.dismiss()))
    page.on("popup", lambda p: events["popups"].append(p.url))
    page.on("requestfailed", lambda r: events["failed"].append(r.url[:200]))
    page.on("framenavigated", lambda f: events["navigations"].append(f.url[:200]))
    page.goto(path.as_uri(), wait_until="load")
    if interact:
        # what a reader does: hover, focus and click every element (no navigation away)
        page.evaluate("""() => { for (const e of document.querySelectorAll('body *')) {
            for (const type of ['mouseover', 'mouseenter', 'focus', 'toggle', 'animationstart'])
              e.dispatchEvent(new Event(type)); } }""")
        page.evaluate("""() => { for (const a of document.querySelectorAll('a')) {
            const h = a.getAttribute('href') || '';
            if (!/^https?:/i.test(h) && !h.startsWith('book/'))
              a.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true})); } }""")
    page.wait_for_timeout(1500)  # meta refresh, animations, lazy handlers
    return page, context, events


# ----------------------------------------------------------------------------- a server

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port: int, path: str, token: str | None = None) -> tuple[int, bytes]:
    """A raw GET (the path sent byte for byte, no client-side normalisation), with the token."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    if token:
        path += ("&" if "?" in path else "?") + f"token={token}"
    conn.putrequest("GET", path, skip_accept_encoding=True)
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def jupyter_options(port: int, token: str) -> list[str]:
    """JupyterLab's options for a test: loopback, this port or none, this token, no browser."""
    return ["--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
            f"--IdentityProvider.token={token}", "--ServerApp.port_retries=0"]


def start_server(cmd: list[str], cwd: Path, env: dict, log_path: Path, port: int, token: str,
                 base_url: str = "/", timeout_s: float = 120):
    """Start ``cmd`` (a Jupyter server on ``port``) in a session of its own, its output in
    ``log_path``; return the process once ``/api/status`` answers."""
    log = open(log_path, "w")
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    proc.log = log
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.flush()
            pytest.fail(f"{cmd[0]} exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            if http_get(port, f"{base_url}api/status", token)[0] == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.5)
    stop_server(proc)
    pytest.fail(f"the server did not answer within {timeout_s:.0f} s:\n{log_path.read_text()[-3000:]}")


def stop_server(proc) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    proc.log.close()


# ----------------------------------------------------------------------------- JupyterLab

def open_lab(context, port: int, token: str, path: str = "/lab"):
    """A page of JupyterLab at ``path`` (workspace reset), once its file browser lists something."""
    page = context.new_page()
    sep = "&" if "?" in path else "?"
    page.goto(f"http://127.0.0.1:{port}{path}{sep}reset&token={token}", wait_until="load")
    page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
    page.wait_for_selector(".jp-DirListing-item", timeout=60_000)
    return page


def open_notebook(context, port: int, token: str, notebook: str):
    page = open_lab(context, port, token, f"/lab/tree/{notebook}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    return page


def nbgrader_menu(page) -> list[str]:
    """The labels of the Nbgrader menu (empty if there is no such menu)."""
    menus = page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader")
    if menus.count() == 0:
        return []
    menus.first.click()
    page.wait_for_selector(".lm-Menu-content", timeout=10_000)
    labels = page.eval_on_selector_all(".lm-Menu-content .lm-Menu-itemLabel",
                                       "els => els.map(e => e.textContent.trim())")
    page.keyboard.press("Escape")
    return labels


def menu_command(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).first.click()
    page.locator(".lm-Menu-content .lm-Menu-itemLabel", has_text=item).first.click()


def type_into_cell(page, contains: str, source: str) -> None:
    """Replace the source of the code cell whose text holds ``contains``, as typed."""
    cell = page.locator(".jp-NotebookPanel .jp-CodeCell", has_text=contains).first
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(source)


def notebook_state(page) -> str:
    """What a learner sees of the open notebook, for a failure message: the kernel's
    status, any dialog, and each code cell's prompt, first line and outputs."""
    return page.evaluate(r"""() => {
      const text = (el, n) => (el ? el.innerText : '').replace(/\s+/g, ' ').trim().slice(0, n);
      const lines = [];
      for (const el of document.querySelectorAll('.jp-NotebookPanel-toolbar [title], .jp-StatusBar-Widget [title]')) {
        const title = el.getAttribute('title');
        if (/kernel|execut/i.test(title)) lines.push('toolbar: ' + title.replace(/\s+/g, ' ').slice(0, 200));
      }
      for (const el of document.querySelectorAll('[data-status]')) lines.push('status: ' + el.dataset.status);
      for (const el of document.querySelectorAll('.jp-Dialog')) lines.push('dialog: ' + text(el, 400));
      for (const el of document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell')) {
        lines.push('cell ' + text(el.querySelector('.jp-InputArea-prompt'), 20) + ' '
                   + text(el.querySelector('.cm-content'), 80) + ' => '
                   + text(el.querySelector('.jp-OutputArea'), 300));
      }
      return lines.join('\n');
    }""")


def run_all_and_wait(page, output_text: str, timeout_ms: int = 180_000):
    """Run -> Run All Cells once the kernel is idle; wait for an output holding
    ``output_text`` and an idle kernel. On a timeout the failure shows the notebook's
    state (``notebook_state``)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        # on a busy machine the page can show the cells before the notebook has its kernel:
        # Run All then opens JupyterLab's Select Kernel dialog and runs nothing
        page.wait_for_selector(".jp-NotebookPanel-toolbar .jp-Notebook-ExecutionIndicator[data-status='idle']",
                               state="attached", timeout=timeout_ms)
        menu_command(page, "Run", "Run All Cells")
        out = page.locator(".jp-OutputArea-output", has_text=output_text).first
        out.wait_for(timeout=timeout_ms)
        page.wait_for_function("""() => ![...document.querySelectorAll('.jp-InputArea-prompt')]
                                  .some(p => p.textContent.includes('[*]'))""", timeout=timeout_ms)
    except PlaywrightTimeout as exc:
        raise AssertionError(f"{exc.message.splitlines()[0]}\n{notebook_state(page)}") from None
    return out


def words_split_across_lines(locator) -> list[str]:
    """Every word (run of non-space characters) of the element that the browser draws
    on more than one line."""
    return locator.evaluate(r"""el => {
      const split = [];
      const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        for (const m of n.data.matchAll(/\S+/g)) {
          const r = document.createRange();
          r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
          const tops = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
          if (tops.size > 1) split.push(m[0]);
        }
      }
      return split;
    }""")


def drawn_as_box(locator, text: str) -> dict[str, bool]:
    """For each character of ``text``: whether the browser, in the element's font, draws
    it exactly as it draws a code point no font has (a box, or nothing)."""
    return locator.evaluate(r"""(el, text) => {
      const c = document.createElement('canvas'); c.width = 96; c.height = 64;
      const g = c.getContext('2d', {willReadFrequently: true});
      const font = getComputedStyle(el).font;
      const draw = ch => { g.clearRect(0, 0, 96, 64); g.font = font; g.fillStyle = '#000';
                           g.textBaseline = 'top'; g.fillText(ch, 8, 8);
                           return g.getImageData(0, 0, 96, 64).data.join(','); };
      const missing = draw('\u{10FFFD}');
      const out = {};
      for (const ch of text) { if (ch.trim()) out[ch] = draw(ch) === missing; }
      return out;
    }""", text)


def record_failures(context) -> list[tuple[object, str]]:
    """(page, what) for every request of ``context`` that failed or answered 400 or more,
    from now on."""
    failures: list[tuple[object, str]] = []

    def response(r):
        if r.status >= 400:
            failures.append((r.frame.page, f"HTTP {r.status} {r.url}"))

    context.on("response", response)
    context.on("requestfailed", lambda r: failures.append((r.frame.page, f"{r.failure} {r.url}")))
    return failures


def follow_chapter_link(page, timeout_ms: int = 60_000):
    """Click the first chapter link of the notebook open in ``page`` (JupyterLab) and
    return (its href, the browser tab it opened, loaded)."""
    link = page.locator(".jp-RenderedMarkdown a[href*='/andrea-book/']").first
    link.wait_for(timeout=timeout_ms)
    href = link.get_attribute("href")
    with page.context.expect_page(timeout=timeout_ms) as new:
        link.click()
    tab = new.value
    tab.wait_for_load_state("load", timeout=timeout_ms)
    return href, tab


# What a reader sees of a book page once it has loaded: its language, the theme's style
# sheets (every one parsed, the theme's colour variables set), MathJax's work (every
# math element typeset, no TeX delimiters left as text) and the figures (decoded, with
# a width).
_BOOK_PAGE_STATE = """async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
  const links = [...document.querySelectorAll('link[rel="stylesheet"]')];
  const math = [...document.querySelectorAll('.math')];
  const imgs = [...document.querySelectorAll('article img, main img')];
  await Promise.all(imgs.map(i => i.decode().catch(() => null)));
  return {
    lang: document.documentElement.lang,
    title: (document.querySelector('h1') || {}).textContent || '',
    stylesheets: links.length,
    unparsed: links.filter(l => !l.sheet).map(l => l.href),
    theme: getComputedStyle(document.documentElement).getPropertyValue('--pst-color-primary').trim(),
    math: math.length,
    typeset: math.filter(m => m.querySelector('mjx-container')).length,
    rawTex: math.filter(m => /\\\\\\(|\\\\\\[|\\$\\$/.test(m.textContent)).length,
    images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
  };
}"""


def book_page_state(tab, timeout_ms: int = 60_000) -> dict:
    tab.wait_for_function("() => !window.MathJax || (MathJax.startup && MathJax.startup.promise)",
                          timeout=timeout_ms)
    return tab.evaluate(_BOOK_PAGE_STATE)


def assert_book_page_loaded(tab, failures, language: str) -> dict:
    """The chapter opened in ``tab`` is the real book in ``language``: styled, its math
    typeset, its figures shown, and no request of the tab failed."""
    state = book_page_state(tab)
    assert state["lang"].split("-")[0] == language, state
    assert state["stylesheets"] >= 3 and not state["unparsed"] and state["theme"], state
    assert state["math"] > 0 and state["typeset"] == state["math"] and not state["rawTex"], state
    assert state["images"] > 0 and not state["broken"], state
    failed = [what for page, what in failures if page == tab]
    assert not failed, failed
    return state
