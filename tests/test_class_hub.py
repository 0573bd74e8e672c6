"""A class on the course's JupyterHub, end to end, in a real browser with no network.

Run by ``make test-class`` (as root: it creates OS users), with the hub's environment
(``.venv-hub``: JupyterHub beside the course's requirements) and the proxy from
``hub/node_modules``. The hub is ``hub/jupyterhub_config.py``, started by ``scripts/hub.py
run`` exactly as ``make hub`` does, on 127.0.0.1 with free ports, a temporary exchange and
state folder, and the shared-password authenticator (the one setting a test needs; a class
uses PAM or its institution's login).

1. The test creates an instructor and two learners as OS users (private homes).
2. The instructor's course folder is prepared (``scripts/hub.py course``) and the
   instructor releases ``02_layernorm`` with ``nbgrader release_assignment``, run as the
   instructor's OS user; the instructor logs in and is offered every nbgrader tool, and
   the Formgrader lists the course's assignments, this one as released.
3. Each learner logs in in headless Chromium, opens Nbgrader -> Assignment List (no
   instructor tool on offer, no Formgrader served), fetches the assignment, opens the
   notebook, follows its chapter link to the book its own server serves (styled, math
   typeset, figures shown, no request failed), types an answer into the answer cell (one the solution's code, one with the
   unbiased variance), saves, and submits from the Assignment List.
4. ``scripts/hub.py return``: the instructor collects; the course's grading command
   (``python -m classroom.grade``, sandboxed, independent check) grades into the course
   gradebook; the feedback is released through nbgrader's exchange.
5. Each learner clicks Fetch Feedback, opens their feedback page and sees their own
   score: 10 of 10 for the right answer, less for the wrong one.
6. Neither learner reaches the other's work: not the other's server (the hub refuses),
   not the other's home, not a listing of the exchange's submissions or feedback (the
   learner's own OS user is tried).

Users, processes and folders are removed at the end, pass or fail.
"""
from __future__ import annotations

import csv
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from jupyter_browser import assert_book_page_loaded, follow_chapter_link, loopback_context, record_failures

if Path(sys.prefix).name != ".venv-hub":  # the course's own environment has JupyterHub too (the image's)
    pytest.skip("the hub's environment (.venv-hub): run `make test-class`", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
PROXY = ROOT / "hub" / "node_modules" / ".bin" / "configurable-http-proxy"
ASSIGNMENT = "02_layernorm"
NOTEBOOK = "layernorm.ipynb"
FULL_MARKS = 10.0
PASSWORD = "class-" + secrets.token_hex(8)
INSTRUCTOR_PASSWORD = "teach-" + secrets.token_hex(20)  # the authenticator asks for 32 characters or more
TAG = secrets.token_hex(3)
INSTRUCTOR = f"ablteach{TAG}"
RIGHT = f"ablright{TAG}"
WRONG = f"ablwrong{TAG}"
LEARNERS = (RIGHT, WRONG)
WRONG_BODY = ("    mean = x.mean(dim=-1, keepdim=True)\n"
              "    var = x.var(dim=-1, keepdim=True)\n"
              "    return gamma * (x - mean) / torch.sqrt(var + eps) + beta\n")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _solution_body() -> str:
    """The answer lines of the solution notebook (between its solution markers)."""
    nb = json.loads((ROOT / "solutions" / ASSIGNMENT / NOTEBOOK).read_text())
    for cell in nb["cells"]:
        src = "".join(cell["source"])
        if "### BEGIN SOLUTION" in src:
            body = src.split("### BEGIN SOLUTION\n", 1)[1].split("### END SOLUTION", 1)[0]
            return "\n".join(ln for ln in body.splitlines() if ln.strip()) + "\n"
    raise AssertionError("no solution cell in the solution notebook")


def _answer_cell(source: str, body: str) -> str:
    """The released answer cell with its stub replaced by ``body``."""
    stub = re.search(r"^[ \t]*# YOUR CODE HERE\n[ \t]*raise NotImplementedError\(\)[ \t]*$", source, re.M)
    assert stub, source
    return source[:stub.start()] + body.rstrip("\n") + source[stub.end():]


def _as(user: str, code: str) -> subprocess.CompletedProcess:
    """Python code run as the OS user ``user``."""
    pw = pwd.getpwnam(user)
    return subprocess.run([sys.executable, "-c", code], user=pw.pw_uid, group=pw.pw_gid, extra_groups=[],
                          env={"HOME": pw.pw_dir, "PATH": "/usr/bin:/bin"}, cwd="/",
                          capture_output=True, text=True, timeout=60)


def _pids_of(uids: set[int]) -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if d.stat().st_uid in uids:
                    pids.append(int(d.name))
            except OSError:
                pass
    return pids


def _kill_users_processes(uids: set[int]) -> None:
    """The servers and kernels the hub started for the test's users, by pid."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in _pids_of(uids):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while _pids_of(uids) and time.monotonic() < deadline:
            time.sleep(0.2)


@pytest.fixture(scope="module")
def hub():
    if os.geteuid() != 0:
        pytest.fail("the class test creates OS users: run it as root (make test-class)")
    if not PROXY.exists():
        pytest.fail(f"{PROXY} missing: make test-class installs it (npm install --prefix hub)")
    base = Path(tempfile.mkdtemp(prefix="andrea-class-"))
    os.chmod(base, 0o755)  # the learners' servers reach the exchange inside it
    exchange, state = base / "exchange", base / "state"
    created: list[str] = []
    uids: set[int] = set()
    proc = log = None
    try:
        for user in (INSTRUCTOR, *LEARNERS):
            subprocess.run(["useradd", "--create-home", "--home-dir", str(base / "home" / user),
                            "--shell", "/bin/bash", "--user-group", user], check=True, capture_output=True)
            created.append(user)
            pw = pwd.getpwnam(user)
            uids.add(pw.pw_uid)
            os.chmod(pw.pw_dir, 0o700)
        os.chmod(base / "home", 0o755)
        ports = {k: _free_port() for k in ("ANDREA_HUB_PORT", "ANDREA_HUB_API_PORT", "ANDREA_HUB_PROXY_API_PORT")}
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "ANDREA_"))}
        env.update({k: str(v) for k, v in ports.items()})
        env.update(ANDREA_HUB_AUTH="shared-password", ANDREA_HUB_PASSWORD=PASSWORD,
                   ANDREA_HUB_INSTRUCTOR_PASSWORD=INSTRUCTOR_PASSWORD,
                   ANDREA_HUB_INSTRUCTORS=INSTRUCTOR, ANDREA_HUB_LEARNERS=",".join(LEARNERS),
                   ANDREA_HUB_EXCHANGE=str(exchange), ANDREA_HUB_STATE=str(state),
                   ANDREA_HUB_BOOK=str(base / "book"))
        hubpy = [sys.executable, str(ROOT / "scripts" / "hub.py")]
        subprocess.run([*hubpy, "setup"], env=env, check=True, capture_output=True)
        r = subprocess.run([*hubpy, "course", INSTRUCTOR], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        log = open(base / "hub.log", "w")
        proc = subprocess.Popen([*hubpy, "run"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        url = f"http://127.0.0.1:{ports['ANDREA_HUB_PORT']}"
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the hub exited with {proc.returncode}:\n{(base / 'hub.log').read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(url + "/hub/api/", timeout=5) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("the hub did not answer within 120 s:\n" + (base / "hub.log").read_text()[-4000:])
            time.sleep(0.5)
        yield {"url": url, "env": env, "base": base, "exchange": exchange, "hubpy": hubpy}
    finally:
        if proc is not None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        if log is not None:
            log.close()
            hub_log = base / "hub.log"
            if hub_log.exists():
                keep = ROOT / "_build" / "test-class-hub.log"
                keep.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(hub_log, keep)
        _kill_users_processes(uids)
        for user in created:
            subprocess.run(["userdel", "--remove", user], capture_output=True)
            subprocess.run(["groupdel", user], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def _context(browser, blocked: list[str]):
    return loopback_context(browser, blocked, 60_000)


def _login(context, url: str, user: str, password: str = PASSWORD):
    page = context.new_page()
    page.goto(url + "/hub/login", wait_until="load")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(re.compile(rf"/user/{user}/lab"), timeout=180_000)
    page.wait_for_selector("#jp-main-dock-panel", timeout=120_000)
    page.wait_for_selector(".jp-DirListing-item, .jp-DirListing-content", timeout=60_000)
    return page


def _nbgrader_menu(page) -> list[str]:
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").first.click()
    page.wait_for_selector(".lm-Menu-content")
    return page.eval_on_selector_all(".lm-Menu-content .lm-Menu-itemLabel", "els => els.map(e => e.textContent.trim())")


def _assignment_list(page):
    labels = _nbgrader_menu(page)
    assert "Assignment List" in labels, labels
    for tool in ("Formgrader", "Course List", "Create Assignment", "Create assignment"):
        assert tool not in labels, f"a learner is offered {tool}: {labels}"
    page.locator(".lm-Menu-content .lm-Menu-itemLabel", has_text="Assignment List").first.click()
    page.wait_for_selector("#released_assignments_list, #fetched_assignments_list")
    return page


def _row(page, list_id: str):
    return page.locator(f"#{list_id} .list_item", has_text=ASSIGNMENT)


def _learner_hands_in(browser, url: str, user: str, body: str, blocked: list[str]):
    context = _context(browser, blocked)
    page = _login(context, url, user)
    _assignment_list(page)
    # and the Formgrader is not served to a learner at all
    assert page.request.get(f"{url}/user/{user}/formgrader/api/assignments").status == 404
    fetch = _row(page, "released_assignments_list").locator("button", has_text="Fetch").first
    fetch.wait_for()
    fetch.click()
    submit = _row(page, "fetched_assignments_list").locator("button", has_text="Submit").first
    submit.wait_for()
    home = Path(pwd.getpwnam(user).pw_dir)
    assert (home / ASSIGNMENT / NOTEBOOK).is_file(), "fetched notebook not in the learner's home"

    # open the fetched notebook and type the answer into its answer cell
    nb_page = context.new_page()
    nb_page.bring_to_front()  # a page in the background gets no animation frames: JupyterLab's save waits for one
    nb_page.goto(f"{url}/user/{user}/lab/tree/{ASSIGNMENT}/{NOTEBOOK}", wait_until="load")
    cell = nb_page.locator(".jp-CodeCell", has_text="YOUR CODE HERE").first
    cell.wait_for(timeout=120_000)
    # the kernel up and idle: the notebook is ready (a save while it starts waits for it)
    nb_page.locator(".jp-StatusBar-Item", has_text=re.compile(r"\|\s*Idle")).first.wait_for(timeout=180_000)
    # the notebook's chapter link opens the real book, served by the learner's own server
    failures = record_failures(context)
    href, tab = follow_chapter_link(nb_page)
    assert href.startswith("/hub/user-redirect/andrea-book/book/"), href
    assert tab.url.startswith(f"{url}/user/{user}/andrea-book/book/"), tab.url
    assert_book_page_loaded(tab, failures, "en")
    tab.close()
    nb_page.bring_to_front()
    released = json.loads((home / ASSIGNMENT / NOTEBOOK).read_text())
    source = next("".join(c["source"]) for c in released["cells"]
                  if c["cell_type"] == "code" and "# YOUR CODE HERE" in "".join(c["source"]))
    answer = _answer_cell(source, body)
    cell.locator(".cm-content").click()
    nb_page.keyboard.press("Control+a")
    nb_page.keyboard.insert_text(answer)
    nb_page.keyboard.press("Control+s")
    deadline = time.monotonic() + 120
    while True:
        saved = json.loads((home / ASSIGNMENT / NOTEBOOK).read_text())
        if any("".join(c["source"]) == answer for c in saved["cells"]):
            break
        if time.monotonic() > deadline:
            shot = ROOT / "_build" / "screenshots" / f"test-class-{user}.png"
            shot.parent.mkdir(parents=True, exist_ok=True)
            nb_page.screenshot(path=str(shot))
            got = [("".join(c["source"])) for c in saved["cells"] if "def layer_norm" in "".join(c["source"])]
            pytest.fail(f"the answer typed in the browser was not saved (screenshot {shot}); "
                        f"the answer cell on disk:\n{got}\nexpected:\n{answer!r}")
        nb_page.wait_for_timeout(500)  # (Playwright passes requests on only while it runs)
    nb_page.close()

    # hand it in from the Assignment List
    page.bring_to_front()
    page.reload(wait_until="load")
    page.wait_for_selector("#jp-main-dock-panel", timeout=120_000)
    _assignment_list(page)
    submit = _row(page, "fetched_assignments_list").locator("button", has_text="Submit").first
    submit.wait_for()
    submit.click()
    _row(page, "submitted_assignments_list").first.wait_for(timeout=60_000)
    context.close()


def _learner_reads_feedback(browser, url: str, user: str, blocked: list[str]) -> str:
    context = _context(browser, blocked)
    page = _login(context, url, user)
    _assignment_list(page)
    fetch = page.locator("#submitted_assignments_list button", has_text="Fetch Feedback").first
    fetch.wait_for()
    fetch.click()
    home = Path(pwd.getpwnam(user).pw_dir)
    deadline = time.monotonic() + 60
    while not list((home / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK[:-6]}.html")):
        assert time.monotonic() < deadline, "Fetch Feedback put no page in the learner's home"
        page.wait_for_timeout(500)
    (page_file,) = (home / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK[:-6]}.html")
    rel = page_file.relative_to(home).as_posix()
    fb = context.new_page()
    fb.bring_to_front()
    resp = fb.goto(f"{url}/user/{user}/files/{rel}", wait_until="load")
    assert resp is not None and resp.status == 200, rel
    text = fb.inner_text("body")
    context.close()
    return text


def _score_shown(text: str) -> tuple[float, float]:
    m = re.search(r"Score:\s*([\d.]+)\s*/\s*([\d.]+)", text)
    assert m, text[:2000]
    return float(m.group(1)), float(m.group(2))


def test_class_on_the_hub(hub, browser):
    url, env, exchange = hub["url"], hub["env"], hub["exchange"]
    course = Path(pwd.getpwnam(INSTRUCTOR).pw_dir) / "andrea-block-lab"
    blocked: list[str] = []

    # the instructor releases (nbgrader's command line, as the instructor's OS user)
    pw = pwd.getpwnam(INSTRUCTOR)
    r = subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "release_assignment", ASSIGNMENT],
                       cwd=course, user=pw.pw_uid, group=pw.pw_gid, extra_groups=[], capture_output=True, text=True,
                       env={"HOME": pw.pw_dir, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
                            "JUPYTER_CONFIG_PATH": str(ROOT / "hub" / "jupyter-config" / "instructor"),
                            "ANDREA_EXCHANGE": str(exchange)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert (exchange / "andrea-block-lab" / "outbound" / ASSIGNMENT / NOTEBOOK).is_file()

    # the instructor's JupyterLab: every nbgrader tool; the Formgrader works on the course
    # folder and sees the release in the shared exchange
    context = _context(browser, blocked)
    page = _login(context, url, INSTRUCTOR, INSTRUCTOR_PASSWORD)
    labels = _nbgrader_menu(page)
    page.keyboard.press("Escape")
    assert {"Formgrader", "Course List", "Assignment List"} <= set(labels), labels
    resp = page.request.get(f"{url}/user/{INSTRUCTOR}/formgrader/api/assignments")
    assert resp.status == 200, resp.status
    status = {a["name"]: a["status"] for a in resp.json()}
    released = sorted(p.name for p in (ROOT / "exercises").iterdir() if p.is_dir())
    assert sorted(status) == released and status[ASSIGNMENT] == "released", status
    context.close()

    # two learners fetch, answer in the browser and submit
    _learner_hands_in(browser, url, RIGHT, _solution_body(), blocked)
    _learner_hands_in(browser, url, WRONG, WRONG_BODY, blocked)

    # the instructor collects; the course's grader grades; the feedback is released
    r = subprocess.run([*hub["hubpy"], "return", INSTRUCTOR, ASSIGNMENT], env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    out = Path(env["ANDREA_HUB_STATE"]) / "grading" / ASSIGNMENT / "out"
    grades = {}
    with open(out / "grades.csv", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["assignment"] == ASSIGNMENT:
                grades[row["student_id"]] = float(row["score"])
    assert grades.get(RIGHT) == FULL_MARKS, grades
    assert grades.get(WRONG) is not None and grades[WRONG] < FULL_MARKS, grades

    # each learner fetches feedback and reads their own page, with their own score
    seen = {}
    for user in LEARNERS:
        text = _learner_reads_feedback(browser, url, user, blocked)
        seen[user] = _score_shown(text)
    assert seen[RIGHT] == (FULL_MARKS, FULL_MARKS), seen
    assert seen[WRONG] == (grades[WRONG], FULL_MARKS), seen

    # and only their own: not the other's server, home, submission or feedback
    for user, other in ((RIGHT, WRONG), (WRONG, RIGHT)):
        context = _context(browser, blocked)
        page = _login(context, url, user)
        other_fb = next((Path(pwd.getpwnam(other).pw_dir) / ASSIGNMENT / "feedback").glob(f"*/{NOTEBOOK[:-6]}.html"))
        rel = other_fb.relative_to(pwd.getpwnam(other).pw_dir).as_posix()
        resp = page.goto(f"{url}/user/{other}/files/{rel}", wait_until="load")
        assert "Score:" not in page.inner_text("body"), f"{user} read {other}'s feedback through the hub"
        assert resp is None or resp.status in (403, 404) or f"/user/{user}/" in page.url or "/hub/" in page.url, \
            (resp.status if resp else None, page.url)
        context.close()
        for path, what in ((other_fb, "the other's feedback page"),
                           (Path(pwd.getpwnam(other).pw_dir) / ASSIGNMENT / NOTEBOOK, "the other's notebook")):
            r = _as(user, f"open({str(path)!r}).read()")
            assert "PermissionError" in r.stderr, f"{user} could read {what}: {r.stdout}{r.stderr}"
        for folder in ("inbound", "feedback"):
            r = _as(user, f"import os; print(os.listdir({str(exchange / 'andrea-block-lab' / folder)!r}))")
            assert "PermissionError" in r.stderr, f"{user} could list the exchange's {folder}: {r.stdout}"
    assert not blocked, blocked
