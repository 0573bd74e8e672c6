"""The learner's kit (`make learner-kit`): no solution in it, and it works away from the
repository, as its README says.

The kit is built into a temporary folder. Every file in it is read, and every member of
the wheel, the sdist and the zip: none may hold a line of solution code or hidden test
from `solutions/` (classroom.scan's secrets), an nbgrader BEGIN SOLUTION / BEGIN HIDDEN
TESTS marker, or a path from `solutions/`, the gradebook or `classroom/` (a line the
reference package itself holds is no secret: the course hands that package to learners).

Then the kit is installed as its README says, into `<kit>/.venv` (a fresh virtual
environment in the temporary folder, PYTHONPATH unset; the README's install line runs
as written, less PyTorch's CPU index, which cannot be reached here: torch comes from the
local CPU wheel). The kernel's self-check runs (building the CPU twin from the sources
packaged in the wheel) and every notebook runs top to bottom as a script with its answer
cells taken from `solutions/`. The kit is started with its one command, `andrea-lab`
(English, German, Georgian), and used in Chromium: a chapter link opens the book in a
tab, styled, with math and figures; no dead Assignment List; a notebook typed, run and
validated; `andrea-lab validate` fails with the whole message on a wrong answer.
"""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from andrea_lab import CHAPTER_LINK
from andrea_ref.grading.manifest import load
from classroom import scan

ROOT = Path(__file__).resolve().parent.parent
from scripts import learner_kit  # noqa: E402
from jupyter_browser import (
    assert_book_page_loaded, follow_chapter_link, free_port, http_get, jupyter_options,
    loopback_context, open_notebook, record_failures, run_all_and_wait, start_server,
    stop_server, type_into_cell)

TOKEN = "andrea-kit-test-token"
LANGS = ("en", "de", "ka")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

MARKERS = ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END SOLUTION", "END HIDDEN TESTS")
FORBIDDEN_PATHS = ("solutions/", "gradebook", "classroom/", ".release-manifest", "_grading/")


@pytest.fixture(scope="module")
def kit(tmp_path_factory):
    html = ROOT / "_build" / "html"
    if not (html / "index.html").is_file():
        pytest.fail("_build/html/index.html is missing: build the book first (make book)")
    out = tmp_path_factory.mktemp("kit") / "learner-kit"
    t0 = time.perf_counter()
    archive = learner_kit.build(out, html)
    print(f"kit built in {time.perf_counter() - t0:.1f} s")
    return out, archive


@pytest.fixture(scope="module")
def secrets():
    found = scan.secret_lines(ROOT / "solutions")
    assert len(found) > 10
    return found


def _members(path: Path, data: bytes):
    """(name, bytes) for a file, or for every member of an archive (recursively)."""
    name = path.as_posix()
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                if not info.is_dir():
                    yield from _members(Path(name) / info.filename, zf.read(info))
    elif name.endswith(".tar.gz"):
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for m in tar.getmembers():
                if m.isfile():
                    yield from _members(Path(name) / m.name, tar.extractfile(m).read())
    else:
        yield name, data


def _leaks(name: str, data: bytes, secrets: dict[str, str], tmp: Path) -> list[str]:
    found = [f"path: {p}" for p in FORBIDDEN_PATHS if p in name]
    text = data.decode("utf-8", errors="replace")
    found += [f"marker: {m}" for m in MARKERS if m in text]
    suffix = Path(name).suffix
    if suffix in (".ipynb", ".html"):  # the scan's own parsing: cells, outputs, HTML as text
        probe = tmp / f"probe{suffix}"
        probe.write_bytes(data)
        lines = scan.scan_file(probe, secrets)
    else:
        lines = scan._leaks_in_text(text, secrets)
    return found + lines


def _readme_commands(kit: Path) -> dict[str, list[str]]:
    """{section title: the lines of its bash code blocks} of the kit's README."""
    out: dict[str, list[str]] = {}
    for section in re.split(r"^## ", (kit / "README.md").read_text(), flags=re.M)[1:]:
        title, _, body = section.partition("\n")
        for block in re.findall(r"```bash\n(.*?)```", body, re.S):
            out.setdefault(title.strip(), []).extend(ln for ln in block.splitlines() if ln.strip())
    return out


def test_kit_holds_what_a_learner_needs(kit):
    out, archive = kit
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    notebooks = sorted(n for n in names if n.startswith("notebooks/"))
    assert notebooks == sorted(f"notebooks/{p.relative_to(ROOT / 'exercises').as_posix()}"
                               for p in (ROOT / "exercises").glob("*/*.ipynb"))
    assert notebooks == sorted(f"notebooks/{a.path}" for a in load())
    assert "book/index.html" in names and any(n.startswith("book/book/") for n in names)
    translated = sorted(n for n in names if n.startswith(("notebooks-de/", "notebooks-ka/")))
    assert len(translated) == 2 * len(load())
    for lang in ("de", "ka"):
        assert f"book/{lang}/book/01_welcome.html" in names
    # every link of a notebook is a chapter link of its edition, to a page the kit's book has
    links = 0
    for nb in notebooks + translated:
        lang = nb.split("/")[0].partition("-")[2] or "en"
        for cell in json.loads((out / nb).read_text())["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for target in re.findall(r"\]\(([^)\s]+)\)", "".join(cell["source"])):
                m = CHAPTER_LINK.fullmatch(target)
                assert m and (m.group("lang") or "en") == lang, (nb, target)
                assert (out / "book" / (m.group("lang") or "") / f"{m.group('page')}.html").is_file(), (nb, target)
                links += 1
    assert links >= 15
    wheels = [n for n in names if n.endswith(".whl")]
    assert len(wheels) == 1 and any(n.endswith(".tar.gz") for n in names)
    assert {"README.md", "requirements.txt", "jupyter-config/nbgrader_config.py",
            "jupyter-config/labconfig/page_config.json", "jupyter-config/custom/custom.css"} <= names
    server = json.loads((out / "jupyter-config" / "jupyter_server_config.json").read_text())
    assert server["ServerApp"]["jpserver_extensions"]["andrea_lab"] is True
    readme = (out / "README.md").read_text()
    wheel = wheels[0].split("/")[-1]
    assert "Hand in" in readme and ".venv/bin/andrea-lab validate " in readme
    # the exact CPU-only install line, and the one command
    assert _readme_commands(out)["Install (once)"] == [
        "python3 -m venv .venv",
        f".venv/bin/pip install {learner_kit.CPU_INDEX} dist/{wheel} -r requirements.txt"]
    assert learner_kit.CPU_INDEX == "--extra-index-url https://download.pytorch.org/whl/cpu"
    assert _readme_commands(out)["Work"][0].split("#")[0].strip() == ".venv/bin/andrea-lab"
    with zipfile.ZipFile(out / wheels[0]) as zf:
        # the checks' messages in German and Georgian travel with the package
        assert {"andrea_ref/locales/de/LC_MESSAGES/grading.po",
                "andrea_ref/locales/ka/LC_MESSAGES/grading.po"} <= set(zf.namelist())
        packaged = set(zf.namelist())
        (entry_points,) = [n for n in packaged if n.endswith(".dist-info/entry_points.txt")]
        assert "andrea-lab = andrea_lab.launch:main" in zf.read(entry_points).decode()
    assert {"andrea_ref/kernels/csrc/gelu_math.h", "andrea_ref/kernels/csrc/gelu_kernels.cu",
            "andrea_ref/grading/gelu.py", "andrea_lab/server.py", "andrea_lab/launch.py",
            "andrea_ref/data/tinyshakespeare.txt", "andrea_ref/data/README.md"} <= packaged
    with zipfile.ZipFile(archive) as zf:
        assert len([n for n in zf.namelist() if not n.endswith("/")]) == len(names)


def test_kit_holds_no_solution(kit, secrets, tmp_path):
    out, archive = kit
    leaks: dict[str, list[str]] = {}
    scanned = 0
    for path in sorted(p for p in [*out.rglob("*"), archive] if p.is_file()):
        for name, data in _members(path, path.read_bytes()):
            scanned += 1
            found = _leaks(name, data, secrets, tmp_path)
            if found:
                leaks[name] = found
    assert scanned > 100  # the book's pages, the notebooks, the package (twice), the zip
    assert not leaks, "\n".join(f"{n}: {v}" for n, v in leaks.items())


def test_scan_finds_a_planted_leak(kit, secrets, tmp_path):
    """The same scan, on a wheel with a hidden test in it and a notebook with a solution line."""
    hidden = next(s for s, origin in secrets.items() if "(hidden tests)" in origin)
    solution = next(s for s, origin in secrets.items() if "(solution)" in origin and "var" in s)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("andrea_ref/grading/extra.py", f"def f():\n    {hidden}\n")
        zf.writestr("andrea_ref/mlp.py", f"    {solution}\n")
    found = {n: _leaks(n, d, secrets, tmp_path) for n, d in _members(Path("x.whl"), buf.getvalue())}
    assert found["x.whl/andrea_ref/grading/extra.py"] == [hidden]
    assert found["x.whl/andrea_ref/mlp.py"] == [solution]  # the repo's mlp.py does not hold it


def _solution_sources() -> dict[tuple[str, str], str]:
    """{(assignment, grade_id): source} of every answer cell in solutions/."""
    out = {}
    for path in (ROOT / "solutions").glob("*/*.ipynb"):
        for cell in json.loads(path.read_text())["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("solution"):
                out[(path.parent.name, meta["grade_id"])] = "".join(cell["source"])
    return out


def _notebook_script(notebook: Path, answers: dict) -> str:
    """The notebook's code cells as one script, answer cells replaced by the solution."""
    parts, verdicts = [], []
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        src = "".join(cell["source"])
        if meta.get("solution"):
            src = answers[(notebook.parent.name, meta["grade_id"])]
        assert not any(ln.lstrip().startswith(("%", "!")) for ln in src.splitlines()), src
        parts.append(src)
        verdicts += re.findall(r"^(\w+) = grading\.report_\w+\(", src, flags=re.M)
    assert verdicts, f"{notebook}: no self-check (`name = grading.report_...(fn)`) found"
    parts += [f"assert {v} is True, 'the self-check {v} reports a failing property'\n" for v in verdicts]
    parts.append("print('NOTEBOOK OK')\n")
    return "\n\n".join(parts)


@pytest.fixture(scope="module")
def fresh_venv(kit, tmp_path_factory):
    """The kit installed as its README says: ``<kit>/.venv``, made and filled by the
    README's install lines, run in the kit's folder (PyTorch's CPU index left out: it
    cannot be reached here, and the local torch wheel is the CPU build)."""
    out, _ = kit
    base = tmp_path_factory.mktemp("learner")
    assert ROOT not in base.parents and ROOT not in out.parents
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "ANDREA_LANG") and not k.startswith("JUPYTER")}
    env["ANDREA_KERNEL_CACHE"] = str(base / "kernel-cache")
    t0 = time.perf_counter()
    for line in _readme_commands(out)["Install (once)"]:
        line = line.replace(learner_kit.CPU_INDEX + " ", "")
        proc = subprocess.run(["bash", "-c", line.replace(" install ", " install --quiet ", 1)],
                              cwd=out, env=env, capture_output=True, text=True, timeout=1200)
        assert proc.returncode == 0, line + "\n" + proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"the kit installed as its README says in {time.perf_counter() - t0:.1f} s")
    return out / ".venv" / "bin" / "python", base, env


def test_installed_package_is_used_away_from_the_checkout(fresh_venv):
    python, base, env = fresh_venv
    code = ("import andrea_ref, andrea_ref.kernels.loader as L, sys; "
            "print(andrea_ref.__file__); print(L.SOURCE_DIR); print(sys.path)")
    proc = subprocess.run([str(python), "-c", code], cwd=base, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    pkg, sources, path = proc.stdout.splitlines()
    venv = str(python.parent.parent)
    assert pkg.startswith(venv) and "site-packages" in pkg
    assert sources.startswith(venv) and sources.endswith("kernels/csrc")
    assert str(ROOT) not in path


def test_kernel_selfcheck_in_fresh_venv(fresh_venv):
    python, base, env = fresh_venv
    t0 = time.perf_counter()
    proc = subprocess.run([str(python), "-m", "andrea_ref.kernels.selfcheck", "--quick", "--no-bench"],
                          cwd=base, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "self-check passed" in proc.stdout
    # the CPU twin was compiled from the packaged sources (a C++ compiler is present here)
    status = subprocess.run([str(python), "-c", "import andrea_ref.kernels as k; print(k.status().backend)"],
                            cwd=base, env=env, capture_output=True, text=True)
    assert status.stdout.strip().splitlines()[-1] == "cpu-twin", status.stdout + status.stderr
    print(f"kernel self-check in the fresh venv: {time.perf_counter() - t0:.1f} s")


def test_every_notebook_self_check_in_fresh_venv(kit, fresh_venv):
    out, _ = kit
    python, base, env = fresh_venv
    answers = _solution_sources()
    notebooks = sorted((out / "notebooks").glob("*/*.ipynb"))
    assert [str(nb.relative_to(out)) for nb in notebooks] == sorted(f"notebooks/{a.path}" for a in load())
    for nb in notebooks:
        work = base / "work" / nb.parent.name
        work.mkdir(parents=True, exist_ok=True)
        script = work / (nb.stem + "_run.py")
        script.write_text(_notebook_script(nb, answers), encoding="utf-8")
        proc = subprocess.run([str(python), str(script)], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0 and "NOTEBOOK OK" in proc.stdout, (
            f"{nb.relative_to(out)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        assert "✗" not in proc.stdout, proc.stdout


# ----------------------------------------------------------------------------- the kit in use

@pytest.fixture(scope="module")
def kit_lab(kit, fresh_venv, tmp_path_factory):
    """The kit started with its one command, ``.venv/bin/andrea-lab [--lang L]``, in the
    kit's folder (as its README says), per language when first asked for."""
    out, _ = kit
    python, _, env = fresh_venv
    started: dict[str, tuple] = {}

    def get(lang: str):
        if lang not in started:
            port = free_port()
            logs = tmp_path_factory.mktemp(f"kit-lab-{lang}")
            cmd = [str(python.parent / "andrea-lab"), *(["--lang", lang] if lang != "en" else []),
                   "--", *jupyter_options(port, TOKEN)]
            proc = start_server(cmd, out, env, logs / "server.log", port, TOKEN, timeout_s=180)
            started[lang] = (proc, port, logs / "server.log")
        return started[lang][1], started[lang][2]

    yield get
    for proc, _, _ in started.values():
        stop_server(proc)


@pytest.mark.parametrize("lang", LANGS)
def test_kit_chapter_link_opens_the_book(kit_lab, browser, lang):
    """From the kit started with one command, a notebook's chapter link opens the kit's
    book in a new tab, in the notebook's edition: styled, math typeset, figures shown,
    no failed request."""
    port, _ = kit_lab(lang)
    # the one command opens the first notebook
    status, _ = http_get(port, "/lab", TOKEN)
    assert status == 200
    blocked: list[str] = []
    context = loopback_context(browser, blocked)
    failures = record_failures(context)
    page = open_notebook(context, port, TOKEN, "02_layernorm/layernorm.ipynb")
    href, tab = follow_chapter_link(page)
    edition = "" if lang == "en" else f"{lang}/"
    assert tab.url.startswith(f"http://127.0.0.1:{port}/andrea-book/{edition}book/"), (href, tab.url)
    assert_book_page_loaded(tab, failures, lang)
    context.close()
    assert not blocked, blocked


def test_kit_shows_no_dead_assignment_list_and_no_news(kit_lab, browser):
    """Outside a hub the kit has no exchange: no Assignment List to say "No courses
    found" (the server log says why), Validate is there, and no news pop-up."""
    port, log = kit_lab("en")
    blocked: list[str] = []
    context = loopback_context(browser, blocked)
    page = open_notebook(context, port, TOKEN, "03_gelu/gelu.ipynb")
    # no Assignment List, and no Nbgrader menu left empty by it
    assert page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").count() == 0
    page.locator(".jp-NotebookPanel-toolbar .jp-ToolbarButton", has_text="Validate").first.wait_for(timeout=30_000)
    page.wait_for_timeout(5000)  # JupyterLab would ask about news a few seconds after it starts
    assert "No courses found" not in page.inner_text("body")
    toasts = page.eval_on_selector_all(".Toastify__toast, .jp-Notification-Toast",
                                       "els => els.map(e => e.innerText)")
    assert not [t for t in toasts if "news" in t.lower()], toasts
    context.close()
    assert not blocked, blocked
    server_log = log.read_text()
    assert "the Assignment List is hidden" in server_log
    if os.geteuid() == 0:
        assert server_log.startswith("warning: running as root"), server_log[:300]


def test_kit_notebook_typed_run_and_validated(kit, kit_lab, fresh_venv, browser):
    """A learner types the answer into the kit's GELU notebook, runs every cell (the
    self-check: all ticks; no graded cell fails), saves, clicks Validate (success), and
    the kit's ``andrea-lab validate`` agrees (exit status 0)."""
    out, _ = kit
    python, _, env = fresh_venv
    port, _ = kit_lab("en")
    answer = _solution_sources()[("03_gelu", "gelu")]
    blocked: list[str] = []
    context = loopback_context(browser, blocked)
    page = open_notebook(context, port, TOKEN, "03_gelu/gelu.ipynb")
    type_into_cell(page, "def gelu(", answer)
    report = run_all_and_wait(page, "properties hold.")
    assert "3 of 3 properties hold." in report.inner_text(), report.inner_text()
    errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    assert errors.count() == 0, errors.all_inner_texts()
    page.keyboard.press("Control+S")
    page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')", timeout=30_000)
    page.locator(".jp-NotebookPanel-toolbar .jp-ToolbarButton", has_text="Validate").first.click()
    dialog = page.locator(".jp-Dialog")
    dialog.wait_for(timeout=180_000)
    assert "Success! Your notebook passes all the tests." in dialog.inner_text(), dialog.inner_text()
    context.close()
    assert not blocked, blocked
    saved = json.loads((out / "notebooks" / "03_gelu" / "gelu.ipynb").read_text())
    assert any(answer.strip() in "".join(c["source"]) for c in saved["cells"])
    proc = subprocess.run([str(python.parent / "andrea-lab"), "validate", "notebooks/03_gelu/gelu.ipynb"],
                          cwd=out, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "Success!" in proc.stdout, proc.stdout + proc.stderr


def test_kit_validate_fails_with_the_whole_message(kit, fresh_venv, tmp_path):
    """``andrea-lab validate`` on a wrong German answer: exit status 1, the check's message
    in German and whole; bad arguments: exit status 2 and one line."""
    out, _ = kit
    python, _, env = fresh_venv
    nb = json.loads((out / "notebooks-de" / "02_layernorm" / "layernorm.ipynb").read_text())
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            cell["source"] = ("def layer_norm(x, gamma, beta, eps=1e-5):\n"
                              "    m = x.mean(-1, keepdim=True)\n"
                              "    return gamma * (x - m) / torch.sqrt(x.var(-1, keepdim=True) + eps) + beta\n")
    wrong = tmp_path / "layernorm.ipynb"
    wrong.write_text(json.dumps(nb, ensure_ascii=False))
    cmd = str(python.parent / "andrea-lab")
    proc = subprocess.run([cmd, "validate", str(wrong), "--width", "80"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    from andrea_ref.i18n import gettext
    flat = " ".join(proc.stdout.split())
    mistake = gettext("Each token is normalised over the last axis with the biased variance.", "de")
    assert mistake != "Each token is normalised over the last axis with the biased variance."
    assert " ".join(mistake.split()) in flat, proc.stdout
    assert not [ln for ln in proc.stdout.splitlines() if ln.endswith("...") or len(ln) > 80], proc.stdout

    for args, says in ((["--lang", "fr"], "--lang must be one of en, de, ka, got 'fr'"),
                       (["--kit", str(tmp_path)], "--kit: "),
                       (["validate", str(tmp_path / "none.ipynb")], "is not a notebook file")):
        proc = subprocess.run([cmd, *args], cwd=out, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stdout == "", (args, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and says in lines[0] and "Traceback" not in proc.stderr, (args, proc.stderr)
