"""Build the instructor edition of the book (what ``make instructor`` runs).

    python -m classroom.instructor_book [--only-solutions] [--solutions DIR] [--out DIR]

The instructor edition is the course book plus a part "Solutions" with every
instructor notebook of ``solutions/``, executed: the solution code and the hidden
tests are shown, and after each graded test cell a line states that it passed and
what it was worth. A solution that fails any graded test fails the build (cells are
executed with errors raising, and the pages are checked afterwards).

Nothing of the learner edition is touched: the book's ``_config.yml`` and ``_toc.yml``
are copied into ``OUT`` (default ``_build_instructor/``), the copy gets the extra TOC
part, and Jupyter Book writes to ``OUT/_build/html`` with its own execution cache.
The solution notebooks are staged in ``OUT/solutions/`` (their links to the
chapters rewritten for that depth) so the originals stay exactly as they are.
``--only-solutions`` builds the solutions part alone (for tests; its links to the
chapters cannot resolve there, so warnings are not errors in that mode, while failing
cells and the page checks still fail it). The execution cache is dropped whenever ``andrea_ref/``, ``cuda/``, ``exercises/``
or ``solutions/`` change, as the learner build does for its inputs.
"""
from __future__ import annotations

import argparse
import copy
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

from andrea_lab import CHAPTER_LINK

from .isolation.bwrap import KERNEL_THREADS
from .scan import html_text, normalise, secret_lines

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "_build_instructor"
HASHED = ("andrea_ref", "cuda", "exercises", "solutions", "book", "_config.yml", "_toc.yml")
TICK_TAG = "instructor-check"


def log(msg: str) -> None:
    print(f"[instructor] {msg}", flush=True)


def _inputs_hash(solutions: Path) -> str:
    h = hashlib.sha256()
    bases = [ROOT / p for p in HASHED if p != "solutions"] + [solutions]
    for base in bases:
        files = [base] if base.is_file() else sorted(
            p for p in base.rglob("*") if p.is_file() and "__pycache__" not in p.parts
            and "_vendor" not in p.parts and ".ipynb_checkpoints" not in p.parts) if base.exists() else []
        for p in files:
            h.update(str(p).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _graded_points(cell) -> tuple[str, float] | None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if meta.get("grade") and cell.get("cell_type") == "code":
        return meta.get("grade_id", "?"), float(meta.get("points", 0))
    return None


def stage_solution(src: Path, dest: Path, depth_extra: int) -> list[str]:
    """Copy one instructor notebook, add a "passed" line after each graded cell, fix
    relative links for the deeper location. Returns the graded cell ids."""
    nb = json.loads(src.read_text(encoding="utf-8"))
    cells, graded = [], []
    prefix = "../" * depth_extra
    banner = {"cell_type": "markdown", "metadata": {}, "id": "instructor-banner",
              "source": ["```{note}\n", "Instructor edition: this notebook shows the solution and the hidden "
                         "tests. Each graded cell below is followed by the line it prints when it passes.\n",
                         "```\n"]}
    for cell in nb["cells"]:
        if cell.get("cell_type") == "markdown":
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            # a chapter link points at the learner book's built page; in this book it is
            # a cross-reference to the chapter itself
            text = CHAPTER_LINK.sub(lambda m: f"../../{m.group('page')}.md{m.group('anchor') or ''}", text)
            cell["source"] = text.replace("](../", "](" + prefix + "../")
        cells.append(cell)
        found = _graded_points(cell)
        if found:
            gid, pts = found
            graded.append(gid)
            cells.append({"cell_type": "code", "execution_count": None, "outputs": [],
                          "id": f"passed-{gid}"[:64],
                          "metadata": {"tags": ["remove-input", TICK_TAG]},
                          "source": f"print('PASSED {gid} ({pts:g} points)')\n"})
    # the title stays first: put the banner right after it
    at = 1 if cells and cells[0].get("cell_type") == "markdown" else 0
    cells.insert(at, banner)
    nb["cells"] = cells
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")
    return graded


def write_config(out: Path, only_solutions: bool, staged: list[Path]) -> tuple[Path, Path]:
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    cfg = copy.deepcopy(cfg)
    cfg["title"] = f"{cfg.get('title', 'Book')} (instructor edition)"
    sph = cfg.setdefault("sphinx", {})
    # paths the learner config gives relative to the repository
    for name, path in list((sph.get("local_extensions") or {}).items()):
        sph["local_extensions"][name] = str(ROOT / path)
    conf = sph.setdefault("config", {})
    if "html_extra_path" in conf:
        conf["html_extra_path"] = [str(ROOT / p) for p in conf["html_extra_path"]]
    if "bibtex_bibfiles" in cfg:
        cfg["bibtex_bibfiles"] = [str(ROOT / p) for p in cfg["bibtex_bibfiles"]]
    # drop the learner config's patterns that would exclude the staged notebooks (e.g. "_build*"),
    # keep the build folders themselves excluded
    staged_parts = staged[0].relative_to(ROOT).parts[:-1] if staged else ()
    prefixes = ["/".join(staged_parts[: i + 1]) for i in range(len(staged_parts))]
    kept = [p for p in cfg.get("exclude_patterns", [])
            if not any(fnmatch.fnmatch(pre, p) or fnmatch.fnmatch(pre + "/x", p) for pre in prefixes)]
    cfg["exclude_patterns"] = kept + ["_build", "_build/**", f"{out.relative_to(ROOT)}/_build/**"]
    # one edition: the book's language menu links only to editions a site is built with
    conf["andrea_editions"] = ["en"]
    execute = cfg.setdefault("execute", {})
    execute["allow_errors"] = False
    conf["nb_execution_raise_on_error"] = True
    part = {"caption": "Solutions (instructor edition)",
            "chapters": [{"file": str(p.relative_to(ROOT).with_suffix(""))} for p in staged]}
    if only_solutions:
        new_toc = {"format": "jb-book", "root": toc["root"], "parts": [part]}
    else:
        chapters = toc.get("chapters")
        parts = toc.get("parts") or [{"caption": "Course", "chapters": chapters}]
        new_toc = {k: v for k, v in toc.items() if k not in ("chapters", "parts")}
        new_toc["parts"] = parts + [part]
    cfg_path, toc_path = out / "_config.yml", out / "_toc.yml"
    cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    toc_path.write_text(yaml.safe_dump(new_toc, sort_keys=False))
    return cfg_path, toc_path


def check_pages(out: Path, staged: dict[Path, list[str]], solutions: Path) -> list[str]:
    """Problems with the built solution pages (empty when all is well)."""
    problems = []
    html_root = out / "_build" / "html"
    reports = html_root / "reports"
    if reports.is_dir() and any(reports.rglob("*")):
        problems.append(f"cell failure reports in {reports}")
    hidden = secret_lines(solutions, kinds=("HIDDEN TESTS",))
    for nb, graded in staged.items():
        page = html_root / nb.relative_to(ROOT).with_suffix(".html")
        if not page.is_file():
            problems.append(f"no page for {nb.name}: {page}")
            continue
        text = "\n".join(normalise(ln) for ln in html_text(page.read_text(encoding="utf-8")).splitlines())
        for gid in graded:
            if f"PASSED {gid} (" not in text:
                problems.append(f"{page.name}: graded cell {gid} is not shown passing")
        if "Traceback" in text or "Error:" in text and "PASSED" not in text:
            problems.append(f"{page.name}: shows an error")
        source = "\n".join(normalise(ln) for c in json.loads(nb.read_text())["cells"]
                           for ln in "".join(c["source"]).splitlines())
        mine = {ln for ln in hidden if ln in source}
        if graded and not any(ln in text for ln in mine):
            problems.append(f"{page.name}: the hidden tests are not visible")
    return problems


def build(out: Path = DEFAULT_OUT, solutions: Path = ROOT / "solutions", only_solutions: bool = False,
          force: bool = False) -> int:
    start = time.perf_counter()
    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not only_solutions:
        # the learner build's own preparation: vendored MathJax and staged exercises
        sys.path.insert(0, str(ROOT / "scripts"))
        import build_book  # a script of scripts/, not a package: importable once scripts/ is on the path
        build_book.vendor_mathjax()
        build_book.stage_exercises()

    src = out / "solutions"
    shutil.rmtree(src, ignore_errors=True)
    staged: dict[Path, list[str]] = {}
    for nb in sorted(Path(solutions).glob("*/*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        dest = src / nb.parent.name / nb.name
        # the staged copy sits deeper in the book than solutions/<a>/ does
        staged[dest] = stage_solution(nb, dest, depth_extra=len(dest.relative_to(ROOT).parts) - 3)
    if not staged:
        log(f"no notebooks in {solutions}")
        return 1
    cfg_path, toc_path = write_config(out, only_solutions, list(staged))

    digest = _inputs_hash(Path(solutions)) + ("-solutions-only" if only_solutions else "")
    stamp = out / ".inputs.sha256"
    build_dir = out / "_build"
    if force or not stamp.is_file() or stamp.read_text().strip() != digest:
        log("inputs changed: dropping the execution cache")
        for stale in (".jupyter_cache", ".doctrees", "jupyter_execute", "html"):
            shutil.rmtree(build_dir / stale, ignore_errors=True)
    shutil.rmtree(build_dir / "html" / "reports", ignore_errors=True)
    stamp.unlink(missing_ok=True)

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    env.pop("MPLBACKEND", None)
    env.update(KERNEL_THREADS)  # the solutions' checks run as in the grader's sandbox: on one thread
    cmd = [str(Path(sys.executable).with_name("jupyter-book")), "build", str(ROOT), "--path-output", str(out),
           "--config", str(cfg_path), "--toc", str(toc_path), "--builder", "html", "-n", "--keep-going"]
    if not only_solutions:
        # warnings are errors, as in the learner build; the solutions part alone cannot
        # resolve its links to the chapters, so there they stay warnings
        cmd.append("-W")
    log(" ".join(cmd[1:]))
    rc = subprocess.run(cmd, env=env, cwd=ROOT).returncode
    problems = check_pages(out, staged, Path(solutions))
    reports = build_dir / "html" / "reports"
    if reports.is_dir():
        for report in sorted(p for p in reports.rglob("*") if p.is_file()):
            log(f"cell failure report {report}:")
            print(report.read_text(errors="replace")[-3000:], flush=True)
    for p in problems:
        log(f"problem: {p}")
    if rc == 0 and problems:
        rc = 1
    if rc == 0:
        stamp.write_text(digest + "\n")
        log(f"built {build_dir / 'html'} in {time.perf_counter() - start:.1f} s")
    else:
        log(f"FAILED (exit {rc}) after {time.perf_counter() - start:.1f} s")
    return rc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--solutions", type=Path, default=ROOT / "solutions",
                    help="instructor notebooks (<assignment>/<notebook>.ipynb)")
    ap.add_argument("--only-solutions", action="store_true", help="build only the solutions part")
    ap.add_argument("--all", action="store_true", help="drop the execution cache first")
    a = ap.parse_args(argv)
    return build(a.out, a.solutions, a.only_solutions, a.all)


if __name__ == "__main__":
    sys.exit(main())
