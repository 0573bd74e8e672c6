"""`make lab` as a learner sees it, in a real browser with no network.

The learner's JupyterLab (scripts/lab.py, exactly as `make lab` starts it, with a
temporary workspace, exchange and settings folder) is started on loopback with a token
and driven in headless Chromium (Debian's package, through Playwright):

- the file browser lists the four released notebooks' folders and no `solutions`;
- `solutions/` cannot be reached by URL: `/files/`, `/api/contents/`, `/lab/tree/` and
  `/andrea-book/` paths that climb out of their folder (`..`, encoded or not) all fail;
- Nbgrader -> Assignment List opens with no "Error fetching courses" and no exchange
  error dialog, and the server log has no exchange error;
- no Formgrader, Course List or Create Assignment is offered (menu, sidebar, URL);
- a chapter link opens the real book in a new tab, in each edition (``ANDREA_LANG=de``
  and ``ka`` start labs of their own) and under another ``base_url``: styled, its math
  typeset, its figures decoded, no request failed;
- Jupyter's news pop-up is off; the self-check's lines wrap at spaces, at any width;
  the lock marker is drawn as letters by a Chromium with no emoji font; run as root, the
  lab says so.

The instructor's lab (`make lab-instructor`) is started too, and its Nbgrader menu does
offer Formgrader and Course List: the learner test's selectors would see them.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
import urllib.parse
from pathlib import Path

import pytest
from playwright.sync_api import expect

from jupyter_browser import (
    assert_book_page_loaded, drawn_as_box, follow_chapter_link,
    free_port, http_get, jupyter_options, loopback_context, nbgrader_menu, open_lab, open_notebook,
    record_failures, run_all_and_wait, start_server, stop_server, type_into_cell,
    words_split_across_lines)

ROOT = Path(__file__).resolve().parent.parent
from andrea_lab import CHAPTER_LINK  # noqa: E402
from andrea_ref.grading.manifest import load  # noqa: E402
from classroom import notebook_i18n  # noqa: E402

TOKEN = "andrea-lab-test-token"
COURSE = load()  # the course manifest
NOTEBOOKS = COURSE.names
INSTRUCTOR_TOOLS = ("Formgrader", "Course List", "Create assignment", "Create Assignment")
LANGS = ("en", "de", "ka")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _get(port: int, path: str, token: str | None = TOKEN) -> tuple[int, bytes]:
    return http_get(port, path, token)


def _start_lab(tmp: Path, *extra: str, env_extra: dict | None = None, base_url: str = "/"):
    """scripts/lab.py as `make lab` runs it (a clean environment: no JUPYTER_* variables)."""
    port = free_port()
    cmd = [sys.executable, str(ROOT / "scripts" / "lab.py"), *extra,
           "--workspace", str(tmp / "workspace"), "--exchange", str(tmp / "exchange"),
           "--state", str(tmp / "state"), "--", *jupyter_options(port, TOKEN)]
    if base_url != "/":
        cmd.append(f"--ServerApp.base_url={base_url}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "ANDREA_LANG"))}
    env.update(env_extra or {})
    proc = start_server(cmd, tmp, env, tmp / "server.log", port, TOKEN, base_url=base_url)
    return proc, port


@pytest.fixture(scope="module")
def learner_lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("learner-lab")
    # the solutions beside the served workspace, so that a URL climbing out of it ("..")
    # names a real solution notebook, as it would in a checkout
    shutil.copytree(ROOT / "solutions", tmp / "solutions")
    proc, port = _start_lab(tmp)
    try:
        yield port, tmp
    finally:
        stop_server(proc)


def _context(browser, blocked: list[str]):
    return loopback_context(browser, blocked)


def _open_lab(context, port: int, path: str = "/lab"):
    return open_lab(context, port, TOKEN, path)


_nbgrader_menu = nbgrader_menu


def test_file_browser_shows_released_notebooks_only(learner_lab, browser):
    port, tmp = learner_lab
    blocked: list[str] = []
    context = _context(browser, blocked)
    page = _open_lab(context, port)
    page.wait_for_function("document.querySelectorAll('.jp-DirListing-item').length >= 4", timeout=30_000)
    names = page.eval_on_selector_all(".jp-DirListing-item .jp-DirListing-itemText",
                                      "els => els.map(e => e.textContent.trim())")
    assert sorted(names) == NOTEBOOKS, names
    for folder in NOTEBOOKS:
        status, body = _get(port, f"/api/contents/{folder}")
        assert status == 200
        assert [c["name"] for c in __import__("json").loads(body)["content"]
                if c["name"].endswith(".ipynb")] == [f"{folder.split('_', 1)[1]}.ipynb"]
    context.close()
    assert not blocked, blocked


def _solution_urls(assignment) -> list[str]:
    """The URLs that try to reach ``assignment``'s solution notebook from the learner's
    lab: climbing out of the workspace (``..``, encoded or not) or naming it outright."""
    climb = f"../solutions/{assignment.path}"
    encoded = urllib.parse.quote(climb, safe="")  # ..%2Fsolutions%2F02_layernorm%2Flayernorm.ipynb
    return [f"/files/{climb}", f"/files/{encoded}", f"/files/%2E%2E/solutions/{assignment.path}",
            f"/files/../{climb}", f"/api/contents/{climb}", f"/api/contents/{encoded}",
            f"/files/solutions/{assignment.path}", f"/nbconvert/html/{climb}", f"/nbconvert/html/{encoded}"]


# every assignment's real solution path, read from the course manifest (a renumbered
# course changes the cases with it)
SOLUTION_URLS = {url: a.solution for a in COURSE for url in _solution_urls(a)}
SOLUTION_URLS.update({"/api/contents/%2E%2E%2F%2E%2E%2Fsolutions": ROOT / "solutions",
                      "/api/contents/solutions": ROOT / "solutions"})
LAYERNORM = COURSE["02_layernorm"]


@pytest.mark.parametrize("path", list(SOLUTION_URLS))
def test_solutions_unreachable_by_url(learner_lab, path):
    assert SOLUTION_URLS[path].exists(), f"{path} names no solution of this course"
    port, _ = learner_lab
    status, body = _get(port, path)
    assert status >= 400, f"{path}: HTTP {status}"
    assert b"BEGIN SOLUTION" not in body and b"HIDDEN TESTS" not in body


def test_lab_tree_url_does_not_open_a_solution(learner_lab, browser):
    port, _ = learner_lab
    blocked: list[str] = []
    context = _context(browser, blocked)
    served: list[tuple[str, int]] = []
    page = context.new_page()
    page.on("response", lambda r: served.append((r.url, r.status)) if "/api/contents" in r.url else None)
    climb = f"../solutions/{LAYERNORM.path}"
    for path in (f"/lab/tree/{climb}", f"/lab/tree/{urllib.parse.quote(climb, safe='')}"):
        page.goto(f"http://127.0.0.1:{port}{path}?token={TOKEN}", wait_until="load")
        page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
        page.wait_for_timeout(3000)
        assert "BEGIN SOLUTION" not in page.inner_text("body")
        assert not page.locator(".jp-NotebookPanel").filter(has_text="BEGIN SOLUTION").count()
    opened = [(u, s) for u, s in served if "solutions" in urllib.parse.unquote(u) and s < 400]
    assert not opened, opened
    context.close()
    assert not blocked, blocked


def test_assignment_list_without_error_and_no_instructor_tools(learner_lab, browser):
    port, tmp = learner_lab
    blocked: list[str] = []
    context = _context(browser, blocked)
    page = _open_lab(context, port)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))

    labels = _nbgrader_menu(page)
    assert "Assignment List" in labels and "Validate" not in INSTRUCTOR_TOOLS
    assert not [t for t in INSTRUCTOR_TOOLS if t in labels], labels

    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.click()
    page.locator(".lm-Menu-content .lm-Menu-itemLabel", has_text="Assignment List").first.click()
    page.wait_for_selector("#nbgrader-assignment-list", timeout=30_000)
    page.wait_for_timeout(4000)  # the panel fetches the courses, then each list
    panel = page.inner_text("#nbgrader-assignment-list")
    assert "Error" not in panel, panel
    dialogs = page.eval_on_selector_all(".jp-Dialog", "els => els.map(e => e.innerText)")
    assert not dialogs, dialogs
    assert "andrea-block-lab" in panel  # the course id, configured by the project
    for name in NOTEBOOKS:  # released, and already in the workspace ("downloaded")
        assert name in panel, panel

    # Hand-in: Submit puts the learner's notebook into the exchange's inbound folder.
    inbound = tmp / "exchange" / "andrea-block-lab" / "inbound"
    before = set(inbound.iterdir())
    row = page.locator("#nbgrader-assignment-list .list_item", has_text="03_gelu").first
    row.get_by_role("button", name="Submit").click()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and set(inbound.iterdir()) == before:
        time.sleep(0.5)
    new = sorted(p.name for p in set(inbound.iterdir()) - before)
    assert len(new) == 1 and "+03_gelu+" in new[0], new
    assert (inbound / new[0] / "gelu.ipynb").is_file()
    page.wait_for_timeout(1000)
    assert not page.eval_on_selector_all(".jp-Dialog", "els => els.map(e => e.innerText)")

    # A notebook open: no Create Assignment sidebar, no instructor tool anywhere.
    page.goto(f"http://127.0.0.1:{port}/lab/tree/03_gelu/gelu.ipynb?token={TOKEN}", wait_until="load")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    page.wait_for_timeout(1500)
    tabs = page.eval_on_selector_all(".lm-TabBar-tabLabel, .lm-TabBar-tab[title]",
                                     "els => els.map(e => e.textContent.trim() + ' ' + (e.title || ''))")
    text = page.inner_text("body")
    for tool in INSTRUCTOR_TOOLS:
        assert tool not in text, tool
        assert not [t for t in tabs if tool in t], tabs
    for url in ("/formgrader", "/formgrader/manage_assignments", "/formgraders"):
        assert _get(port, url)[0] == 404, url

    log = (tmp / "server.log").read_text()
    assert "exchange directory" not in log.lower(), log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    context.close()
    assert not errors, errors
    assert not blocked, blocked


@pytest.fixture(scope="module")
def edition_lab(learner_lab, tmp_path_factory):
    """The learner's lab of an edition: English is ``learner_lab``; ``ANDREA_LANG=de``
    and ``ka`` (and English under another ``base_url``) are started when first asked for."""
    started: dict[str, tuple] = {}

    def get(key: str):
        if key == "en":
            return learner_lab[0], "/"
        if key not in started:
            tmp = tmp_path_factory.mktemp(f"lab-{key}")
            base_url = "/user/learner/" if key == "base-url" else "/"
            env = {} if key == "base-url" else {"ANDREA_LANG": key}
            proc, port = _start_lab(tmp, env_extra=env, base_url=base_url)
            started[key] = (proc, port, base_url)
        return started[key][1], started[key][2]

    yield get
    for proc, _, _ in started.values():
        stop_server(proc)


def _book_built():
    if not (ROOT / "_build" / "html" / "index.html").is_file():
        pytest.fail("the book is not built: make test builds it first (make book)")


@pytest.mark.parametrize("key", [*LANGS, "base-url"])
def test_chapter_link_opens_the_book_in_a_new_tab(edition_lab, browser, key):
    """A learner clicks the notebook's chapter link: the chapter opens in a tab of its own,
    served by the same server (after the redirect of ``/hub/user-redirect/``), in the
    notebook's edition, styled, with its math typeset and its figures shown, and no
    request failed. (After the test that reads the server log: a kernel still connecting
    when the page closes logs a traceback.)"""
    _book_built()
    port, base_url = edition_lab(key)
    language = "en" if key == "base-url" else key
    blocked: list[str] = []
    context = _context(browser, blocked)
    failures = record_failures(context)
    page = open_lab(context, port, TOKEN, f"{base_url}lab/tree/02_layernorm/layernorm.ipynb")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    href, tab = follow_chapter_link(page)
    m = CHAPTER_LINK.fullmatch(href)
    assert m and (m.group("lang") or "en") == language, href
    edition = "" if language == "en" else f"{language}/"
    assert tab.url == f"http://127.0.0.1:{port}{base_url}andrea-book/{edition}{m.group('page')}.html", tab.url
    state = assert_book_page_loaded(tab, failures, language)
    assert state["title"].strip(), state
    # the notebook stays open beside it, untouched, with no dialog
    assert page.locator(".jp-NotebookPanel .jp-Cell").count() > 0
    assert not page.eval_on_selector_all(".jp-Dialog", "els => els.map(e => e.innerText)")
    assert not list((ROOT / "_build" / "html").rglob(".ipynb_checkpoints"))
    context.close()
    assert not blocked, blocked


def test_every_chapter_link_names_a_built_page(tmp_path):
    """Every link in every released notebook, in each edition, is a chapter link of the
    served book whose page is built (no link to a file beside the notebook)."""
    _book_built()
    folders = {"en": ROOT / "exercises"}
    for lang in LANGS[1:]:
        folders[lang] = notebook_i18n.release(lang, dest=tmp_path / lang)
    found = 0
    for lang, folder in folders.items():
        for nb in sorted(folder.glob("*/*.ipynb")):
            for cell in json.loads(nb.read_text())["cells"]:
                if cell["cell_type"] != "markdown":
                    continue
                for target in re.findall(r"\]\(([^)\s]+)\)", "".join(cell["source"])):
                    m = CHAPTER_LINK.fullmatch(target)
                    assert m, (nb, target)
                    assert (m.group("lang") or "en") == lang, (nb, target)
                    page = ROOT / "_build" / "html" / (m.group("lang") or "") / f"{m.group('page')}.html"
                    assert page.is_file(), (nb, target)
                    found += 1
    assert found >= 5 * len(LANGS)


def test_book_is_served_to_the_logged_in_only_and_only_the_book(learner_lab):
    port, _ = learner_lab
    _book_built()
    assert _get(port, "/andrea-book/index.html")[0] == 200
    assert _get(port, "/andrea-book/")[0] == 200  # the front page
    for page in ("/andrea-book/index.html", "/andrea-book/", "/andrea-book/book/04_layernorm_and_placement.html"):
        status, _ = _get(port, page, token=None)
        assert status in (302, 403), (page, status)  # to the login page
    # the files a page loads are the published course's, for any request (a hub's browser
    # fetches fonts and MathJax in CORS mode, without the credentials JupyterHub asks for)
    status, body = _get(port, "/andrea-book/_static/andrea.css", token=None)
    assert status == 200 and body, status
    for path in ("/andrea-book/.buildinfo", f"/andrea-book/../solutions/{LAYERNORM.path}",
                 f"/andrea-book/{urllib.parse.quote(f'../../solutions/{LAYERNORM.path}', safe='')}",
                 f"/andrea-book/%2E%2E/%2E%2E/solutions/{LAYERNORM.path}"):
        status, body = _get(port, path)
        assert status >= 400 and b"BEGIN SOLUTION" not in body, (path, status)


def test_news_pop_up_is_off(learner_lab, browser):
    """No "receive official Jupyter news?" toast over the notebook on the first start."""
    port, tmp = learner_lab
    status, body = _get(port, "/lab/api/settings/@jupyterlab/apputils-extension:notification")
    assert status == 200
    composite = json.loads(body)["settings"]
    assert composite["fetchNews"] == "false" and composite["checkForUpdates"] is False, composite
    blocked: list[str] = []
    context = _context(browser, blocked)
    page = open_notebook(context, port, TOKEN, "04_mlp/mlp.ipynb")
    page.wait_for_timeout(5000)  # JupyterLab asks a few seconds after it starts
    toasts = page.eval_on_selector_all(".Toastify__toast, .jp-Notification-Toast",
                                       "els => els.map(e => e.innerText)")
    assert not [t for t in toasts if "news" in t.lower()], toasts
    context.close()
    assert not blocked, blocked


UNBIASED = """def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(var + eps) + beta
"""


def test_self_check_lines_wrap_at_spaces(learner_lab, browser):
    """A learner types a classic mistake (the unbiased variance) and runs the notebook:
    the self-check's long explanation wraps between words, in a wide window and in a
    narrow one."""
    port, _ = learner_lab
    blocked: list[str] = []
    context = _context(browser, blocked)
    page = open_notebook(context, port, TOKEN, "02_layernorm/layernorm.ipynb")
    type_into_cell(page, "def layer_norm(", UNBIASED)
    out = run_all_and_wait(page, "properties hold.")
    text = out.inner_text()
    assert "Likely mistake" in text and "3 of 4 properties hold." in text, text
    for width in (1400, 640):
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(500)
        assert not words_split_across_lines(out.locator("pre").first), width
    context.close()
    assert not blocked, blocked


def test_lock_marker_is_drawn_without_an_emoji_font(learner_lab, browser_without_emoji_font):
    """The locked cells' marker is letters, drawn as letters where no emoji font is
    installed; the emoji it replaced would be drawn as a box there (the control)."""
    port, _ = learner_lab
    blocked: list[str] = []
    context = loopback_context(browser_without_emoji_font, blocked)
    page = open_notebook(context, port, TOKEN, "01_block/block.ipynb")
    first_lines = page.locator(".jp-CodeCell .cm-line:first-child")
    # the set-up cell, the first code cell (JupyterLab draws the editors of cells off
    # screen later; every locked cell's first line is checked in test_learner_ergonomics).
    # CodeMirror puts a line element on the page before it fills it with the cell's
    # source, so the wait is for the text, not for the element.
    expect(first_lines.first).to_have_text(re.compile(r"^# \[locked\] "), timeout=30_000)
    boxes = drawn_as_box(first_lines.first, "# [locked] \U0001F512")
    assert boxes.pop("\U0001F512") is True, "the control: this Chromium has an emoji font"
    assert not [ch for ch, box in boxes.items() if box], boxes
    for nb in (ROOT / "exercises").glob("*/*.ipynb"):  # and no emoji left in the text
        assert "\U0001F512" not in nb.read_text(encoding="utf-8"), nb
    context.close()
    assert not blocked, blocked


def test_root_is_said_and_allowed(learner_lab):
    _, tmp = learner_lab
    log = (tmp / "server.log").read_text()
    if os.geteuid() == 0:
        assert log.startswith("warning: running as root"), log[:300]
    else:
        assert "running as root" not in log


def test_instructor_lab_offers_the_tools(tmp_path, browser):
    """The control: `make lab-instructor` shows Formgrader and Course List in the same menu."""
    proc, port = _start_lab(tmp_path, "--instructor")
    try:
        blocked: list[str] = []
        context = _context(browser, blocked)
        page = _open_lab(context, port)
        labels = _nbgrader_menu(page)
        assert {"Formgrader", "Course List", "Assignment List"} <= set(labels), labels
        assert _get(port, "/formgrader")[0] in (200, 302)  # served (it redirects to its first page)
        context.close()
        assert not blocked, blocked
    finally:
        stop_server(proc)


def test_workspace_refresh_keeps_learner_edits(tmp_path):
    """A new release replaces an untouched copy, never an edited one (put beside it)."""
    from scripts import lab

    exercises = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", exercises, ignore=shutil.ignore_patterns(".*"))
    ws = tmp_path / "ws"
    assert lab.refresh_workspace(ws, exercises) == []
    assert sorted(p.relative_to(ws).as_posix() for p in ws.glob("*/*.ipynb")) == \
        sorted(p.relative_to(exercises).as_posix() for p in exercises.glob("*/*.ipynb"))
    edited, untouched = ws / "03_gelu" / "gelu.ipynb", ws / "04_mlp" / "mlp.ipynb"
    edited.write_text(edited.read_text().replace("raise NotImplementedError()", "return x"))
    mine = edited.read_bytes()
    for name in ("03_gelu/gelu.ipynb", "04_mlp/mlp.ipynb"):  # a new release of both
        src = exercises / name
        src.write_text(src.read_text().replace("# YOUR CODE HERE", "# YOUR CODE HERE (v2)"))
    kept = lab.refresh_workspace(ws, exercises)
    assert len(kept) == 1 and kept[0].startswith("03_gelu/gelu.ipynb"), kept
    assert edited.read_bytes() == mine
    assert (ws / "03_gelu" / "gelu.new-release.ipynb").read_bytes() == (exercises / "03_gelu/gelu.ipynb").read_bytes()
    assert untouched.read_bytes() == (exercises / "04_mlp/mlp.ipynb").read_bytes()
    assert lab.refresh_workspace(ws, exercises) == kept  # stable on the next start
