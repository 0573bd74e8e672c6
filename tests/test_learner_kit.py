"""The learner's kit (`make learner-kit`): no solution in it, and it works away from the
repository.

The kit is built into a temporary folder. Every file in it is read, and every member of
the wheel, the sdist and the zip: none may hold a line of solution code or hidden test
from `solutions/` (classroom.scan's secrets), an nbgrader BEGIN SOLUTION / BEGIN HIDDEN
TESTS marker, or a path from `solutions/`, the gradebook or `classroom/`. The one
exception is the reference package's own source, which the course hands to learners on
purpose: a secret line is allowed in `andrea_ref/<file>.py` only if the repository's own
`andrea_ref/<file>.py` holds it too.

Then the wheel goes into a fresh virtual environment in a temporary folder, with the
working directory outside the repository and PYTHONPATH unset: the kernel's self-check
runs (building the CPU twin from the sources packaged in the wheel), and every notebook
of the kit runs top to bottom as a script with its answer cells taken from `solutions/`
(the set-up, the self-check, whose report must say every property holds, and the graded
checks).
"""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from classroom import scan

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import learner_kit  # noqa: E402

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


def _allowed(name: str, secrets: dict[str, str]) -> set[str]:
    """Secret lines the repository's own copy of this package file holds (public)."""
    parts = name.split("/")
    if "andrea_ref" not in parts or not name.endswith(".py"):
        return set()
    own = ROOT.joinpath(*parts[len(parts) - 1 - parts[::-1].index("andrea_ref"):])
    if not own.is_file():
        return set()
    return set(scan._leaks_in_text(own.read_text(encoding="utf-8"), secrets))


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
    allowed = _allowed(name, secrets)
    return found + [ln for ln in lines if ln not in allowed]


def test_kit_holds_what_a_learner_needs(kit):
    out, archive = kit
    names = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    notebooks = sorted(n for n in names if n.startswith("notebooks/"))
    assert notebooks == sorted(f"notebooks/{p.relative_to(ROOT / 'exercises').as_posix()}"
                               for p in (ROOT / "exercises").glob("*/*.ipynb"))
    assert len(notebooks) == 4
    assert "_build/html/index.html" in names and any(n.startswith("_build/html/book/") for n in names)
    translated = sorted(n for n in names if n.startswith(("notebooks-de/", "notebooks-ka/")))
    assert len(translated) == 8
    for lang in ("de", "ka"):
        assert f"_build/html/{lang}/book/01_welcome.html" in names
    # every relative link of a notebook (chapter links) lands on a file of the kit
    for nb in notebooks + translated:
        for cell in json.loads((out / nb).read_text())["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            for target in re.findall(r"\]\(([^)#\s]+)", "".join(cell["source"])):
                if "://" not in target:
                    assert (out / nb).parent.joinpath(target).resolve().is_file(), (nb, target)
    wheels = [n for n in names if n.endswith(".whl")]
    assert len(wheels) == 1 and any(n.endswith(".tar.gz") for n in names)
    assert {"README.md", "requirements.txt", "jupyter-config/nbgrader_config.py",
            "jupyter-config/labconfig/page_config.json"} <= names
    readme = (out / "README.md").read_text()
    assert wheels[0].split("/")[-1] in readme and "Hand in" in readme
    with zipfile.ZipFile(out / wheels[0]) as zf:
        # the checks' messages in German and Georgian travel with the package
        assert {"andrea_ref/locales/de/LC_MESSAGES/grading.po",
                "andrea_ref/locales/ka/LC_MESSAGES/grading.po"} <= set(zf.namelist())
        packaged = set(zf.namelist())
    assert {"andrea_ref/kernels/csrc/gelu_math.h", "andrea_ref/kernels/csrc/gelu_kernels.cu",
            "andrea_ref/grading/gelu.py"} <= packaged
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
    parts = []
    for cell in json.loads(notebook.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        src = "".join(cell["source"])
        if meta.get("solution"):
            src = answers[(notebook.parent.name, meta["grade_id"])]
        assert not any(ln.lstrip().startswith(("%", "!")) for ln in src.splitlines()), src
        parts.append(src)
    parts.append("assert all_hold is True, 'the self-check reports a failing property'\n"
                 "print('NOTEBOOK OK')\n")
    return "\n\n".join(parts)


@pytest.fixture(scope="module")
def fresh_venv(kit, tmp_path_factory):
    out, _ = kit
    base = tmp_path_factory.mktemp("learner")
    assert ROOT not in base.parents
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["ANDREA_KERNEL_CACHE"] = str(base / "kernel-cache")
    venv = base / "venv"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, cwd=base, env=env)
    (wheel,) = (out / "dist").glob("*.whl")
    # torch pinned exactly as the course tests it (the local CPU wheel, as in `make venv`)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           str(wheel), "torch==2.13.0"], cwd=base, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"fresh venv with the wheel installed in {time.perf_counter() - t0:.1f} s")
    return venv / "bin" / "python", base, env


def test_installed_package_is_used_away_from_the_checkout(fresh_venv):
    python, base, env = fresh_venv
    code = ("import andrea_ref, andrea_ref.kernels.loader as L, sys; "
            "print(andrea_ref.__file__); print(L.SOURCE_DIR); print(sys.path)")
    proc = subprocess.run([str(python), "-c", code], cwd=base, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    pkg, sources, path = proc.stdout.splitlines()
    assert pkg.startswith(str(base / "venv")) and "site-packages" in pkg
    assert sources.startswith(str(base / "venv")) and sources.endswith("kernels/csrc")
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
    assert len(notebooks) == 4
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
