"""`make lab` as a learner sees it, in a real browser with no network.

The learner's JupyterLab (scripts/lab.py, exactly as `make lab` starts it, with a
temporary workspace, exchange and settings folder) is started on loopback with a token
and driven in headless Chromium (Debian's package, through Playwright):

- the file browser lists the four released notebooks' folders and no `solutions`;
- `solutions/` cannot be reached by URL: `/files/`, `/api/contents/` and `/lab/tree/`
  paths that climb out of the workspace (`..`, encoded or not) all fail;
- Nbgrader -> Assignment List opens with no "Error fetching courses" and no exchange
  error dialog, and the server log has no exchange error;
- no Formgrader, Course List or Create Assignment is offered (menu, sidebar, URL).

The instructor's lab (`make lab-instructor`) is started too, and its Nbgrader menu does
offer Formgrader and Course List: the learner test's selectors would see them.
"""
from __future__ import annotations

import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from jupyter_browser import browser, loopback_context  # noqa: E402,F401 (browser: a fixture)

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "andrea-lab-test-token"
NOTEBOOKS = ["01_layernorm", "02_gelu", "03_mlp", "04_block"]
INSTRUCTOR_TOOLS = ("Formgrader", "Course List", "Create assignment", "Create Assignment")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str) -> tuple[int, bytes]:
    """A raw GET (the path sent byte for byte, no client-side normalisation)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sep = "&" if "?" in path else "?"
    conn.putrequest("GET", f"{path}{sep}token={TOKEN}", skip_accept_encoding=True)
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, body


def _start_lab(tmp: Path, *extra: str):
    port = _free_port()
    log = open(tmp / "server.log", "w")
    cmd = [sys.executable, str(ROOT / "scripts" / "lab.py"), *extra,
           "--workspace", str(tmp / "workspace"), "--exchange", str(tmp / "exchange"),
           "--state", str(tmp / "state"), "--",
           "--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           f"--IdentityProvider.token={TOKEN}", "--ServerApp.port_retries=0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUPYTER")}
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.flush()
            pytest.fail(f"the lab exited with {proc.returncode}:\n{(tmp / 'server.log').read_text()[-3000:]}")
        try:
            if _get(port, "/api/status")[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.5)
    else:
        pytest.fail("the lab did not answer within 90 s")
    return proc, port, log


def _stop(proc, log):
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    log.close()


@pytest.fixture(scope="module")
def learner_lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("learner-lab")
    proc, port, log = _start_lab(tmp)
    try:
        yield port, tmp
    finally:
        _stop(proc, log)


def _context(browser, blocked: list[str]):
    return loopback_context(browser, blocked)


def _open_lab(context, port: int, path: str = "/lab"):
    page = context.new_page()
    page.goto(f"http://127.0.0.1:{port}{path}?reset&token={TOKEN}", wait_until="load")
    page.wait_for_selector("#jp-main-dock-panel", timeout=60_000)
    page.wait_for_selector(".jp-DirListing-item", timeout=60_000)
    return page


def _nbgrader_menu(page) -> list[str]:
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


@pytest.mark.parametrize("path", [
    "/files/../solutions/01_layernorm/layernorm.ipynb",
    "/files/..%2Fsolutions%2F01_layernorm%2Flayernorm.ipynb",
    "/files/%2E%2E/solutions/01_layernorm/layernorm.ipynb",
    "/files/../../solutions/01_layernorm/layernorm.ipynb",
    "/api/contents/../solutions/01_layernorm/layernorm.ipynb",
    "/api/contents/..%2Fsolutions%2F01_layernorm%2Flayernorm.ipynb",
    "/api/contents/%2E%2E%2F%2E%2E%2Fsolutions",
    "/files/solutions/01_layernorm/layernorm.ipynb",
    "/api/contents/solutions",
    "/nbconvert/html/../solutions/01_layernorm/layernorm.ipynb",
    "/nbconvert/html/..%2Fsolutions%2F01_layernorm%2Flayernorm.ipynb",
])
def test_solutions_unreachable_by_url(learner_lab, path):
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
    for path in ("/lab/tree/../solutions/01_layernorm/layernorm.ipynb",
                 "/lab/tree/..%2Fsolutions%2F01_layernorm%2Flayernorm.ipynb"):
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
    row = page.locator("#nbgrader-assignment-list .list_item", has_text="02_gelu").first
    row.get_by_role("button", name="Submit").click()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and set(inbound.iterdir()) == before:
        time.sleep(0.5)
    new = sorted(p.name for p in set(inbound.iterdir()) - before)
    assert len(new) == 1 and "+02_gelu+" in new[0], new
    assert (inbound / new[0] / "gelu.ipynb").is_file()
    page.wait_for_timeout(1000)
    assert not page.eval_on_selector_all(".jp-Dialog", "els => els.map(e => e.innerText)")

    # A notebook open: no Create Assignment sidebar, no instructor tool anywhere.
    page.goto(f"http://127.0.0.1:{port}/lab/tree/02_gelu/gelu.ipynb?token={TOKEN}", wait_until="load")
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


def test_chapter_link_opens_the_book_page(learner_lab, browser):
    """The notebook's chapter link (``../../_build/html/book/...``) opens the built
    chapter in JupyterLab, from the learner's workspace. (After the test that reads the
    server log: a kernel still connecting when the page closes logs a traceback.)"""
    port, tmp = learner_lab
    if not (ROOT / "_build" / "html" / "index.html").is_file():
        pytest.fail("the book is not built: make test builds it first (make book)")
    blocked: list[str] = []
    context = _context(browser, blocked)
    page = _open_lab(context, port, "/lab/tree/01_layernorm/layernorm.ipynb")
    page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=60_000)
    link = page.locator(".jp-RenderedMarkdown a[href*='_build/html/book/']").first
    link.wait_for(timeout=30_000)
    target = link.get_attribute("href").split("/")[-1]
    link.click()
    frame = page.frame_locator(f".jp-MainAreaWidget[title*='{target}'] iframe, .jp-HTMLViewer iframe").first
    heading = frame.locator("h1").first
    heading.wait_for(timeout=30_000)
    assert "LayerNorm" in heading.inner_text()
    page.wait_for_timeout(1000)
    # JupyterLab writes a checkpoint beside what it opens: into the workspace's copy only
    assert not list((ROOT / "_build" / "html").rglob(".ipynb_checkpoints"))
    assert not page.eval_on_selector_all(".jp-Dialog", "els => els.map(e => e.innerText)")
    context.close()
    assert not blocked, blocked


def test_instructor_lab_offers_the_tools(tmp_path, browser):
    """The control: `make lab-instructor` shows Formgrader and Course List in the same menu."""
    proc, port, log = _start_lab(tmp_path, "--instructor")
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
        _stop(proc, log)


def test_workspace_refresh_keeps_learner_edits(tmp_path):
    """A new release replaces an untouched copy, never an edited one (put beside it)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import lab

    exercises = tmp_path / "exercises"
    shutil.copytree(ROOT / "exercises", exercises, ignore=shutil.ignore_patterns(".*"))
    ws = tmp_path / "ws"
    assert lab.refresh_workspace(ws, exercises) == []
    assert sorted(p.relative_to(ws).as_posix() for p in ws.glob("*/*.ipynb")) == \
        sorted(p.relative_to(exercises).as_posix() for p in exercises.glob("*/*.ipynb"))
    edited, untouched = ws / "02_gelu" / "gelu.ipynb", ws / "03_mlp" / "mlp.ipynb"
    edited.write_text(edited.read_text().replace("raise NotImplementedError()", "return x"))
    mine = edited.read_bytes()
    for name in ("02_gelu/gelu.ipynb", "03_mlp/mlp.ipynb"):  # a new release of both
        src = exercises / name
        src.write_text(src.read_text().replace("# YOUR CODE HERE", "# YOUR CODE HERE (v2)"))
    kept = lab.refresh_workspace(ws, exercises)
    assert len(kept) == 1 and kept[0].startswith("02_gelu/gelu.ipynb"), kept
    assert edited.read_bytes() == mine
    assert (ws / "02_gelu" / "gelu.new-release.ipynb").read_bytes() == (exercises / "02_gelu/gelu.ipynb").read_bytes()
    assert untouched.read_bytes() == (exercises / "03_mlp/mlp.ipynb").read_bytes()
    assert lab.refresh_workspace(ws, exercises) == kept  # stable on the next start
