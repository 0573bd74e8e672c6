"""Build the course book, in English, German and Georgian, into _build/html (what `make book` runs).

Steps, each cheap when there is nothing to do:

1. Vendor MathJax 3 and the Noto Sans Georgian web font (both pinned) with npm into
   book/_vendor, so pages typeset math and show Georgian script with no internet and
   whatever fonts the reader has. They reach the HTML through ``html_extra_path``.
   MathJax's Node modules (the same version) go to book/_vendor/node, for the grader,
   which typesets the math of feedback pages as it builds them.
2. Stage the released exercise notebooks (exercises/) so chapter 8 (the exercises) can link them.
3. Key the execution cache on the code the chapters import: a hash of andrea_ref/,
   cuda/ and exercises/. When it changes (or the last build failed) the jupyter
   cache, Sphinx's saved environment and the HTML are dropped and every page is rebuilt, so
   no page shows output computed by older code. Edits to the chapters themselves
   are noticed by the cache as usual.
4. Build the English edition into _build/html (the same build as ``jupyter-book
   build . -W -n --keep-going``, run by scripts/book_edition.py), which executes the
   chapters; then the German and Georgian editions, side by side, into _build/html/de
   and _build/html/ka from the same execution cache, their prose from the catalogs in
   book/locales (an edition whose catalogs changed is read again in full; one with
   nothing new is left as it is). The build
   fails if Sphinx fails in any edition, if any cell fails, or if
   _build/html/reports holds anything.

Usage: python scripts/build_book.py [--all]   (--all: rebuild everything)
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
HTML = BUILD / "html"
VENDOR = ROOT / "book" / "_vendor"
EXTRA = VENDOR / "html"  # html_extra_path in _config.yml
MATHJAX_VERSION = "3.2.2"
MATHJAX_DIR = EXTRA / "_static" / "mathjax"
FONT_PACKAGE, FONT_VERSION = "@fontsource/noto-sans-georgian", "5.3.0"
FONT_DIR = EXTRA / "_static" / "fonts"
# The faces book/_static/andrea.css declares (regular and bold), and the font's licence.
FONT_FILES = ("noto-sans-georgian-georgian-400-normal.woff2", "noto-sans-georgian-georgian-700-normal.woff2")
LOCALES = ROOT / "book" / "locales"
HASH_FILE = BUILD / ".andrea_inputs.sha256"
# What the chapters read besides their own text.
HASHED_DIRS = ("andrea_ref", "cuda", "exercises")
HASHED_FILES = ("_config.yml", "_toc.yml", "book/references.bib")
SKIP_PARTS = {"__pycache__", ".ipynb_checkpoints", "build"}


sys.path.insert(0, str(ROOT / "scripts"))
from book_edition import EDITIONS  # noqa: E402  English at the root of the site, the others in a folder each


def log(msg: str) -> None:
    print(f"[book] {msg}", flush=True)


def npm_install(package: str, version: str, what: str) -> Path:
    """Install one pinned npm package into book/_vendor/npm; return its folder."""
    npm = shutil.which("npm")
    if npm is None:
        sys.exit(f"[book] npm is needed once to vendor {what} (Debian: apt-get install npm)")
    npm_dir = VENDOR / "npm"
    npm_dir.mkdir(parents=True, exist_ok=True)
    log(f"vendoring {package} {version} with npm")
    subprocess.run(
        [npm, "install", "--no-save", "--no-audit", "--no-fund", "--loglevel=error",
         "--prefix", str(npm_dir), f"{package}@{version}"],
        check=True,
    )
    return npm_dir / "node_modules" / package


def vendor_mathjax() -> None:
    """Install MathJax 3 once into book/_vendor (ignored by git)."""
    if (MATHJAX_DIR / "tex-chtml.js").is_file():
        return
    es5 = npm_install("mathjax", MATHJAX_VERSION, "MathJax 3") / "es5"
    tmp = MATHJAX_DIR.with_name("mathjax.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    # The TeX-to-HTML bundle and what it loads on demand (fonts, TeX extensions,
    # the context menu). The speech engine and the other bundles are not needed.
    shutil.copy2(es5 / "tex-chtml.js", tmp / "tex-chtml.js")
    for sub in ("input", "output", "a11y", "ui", "adaptors"):
        shutil.copytree(es5 / sub, tmp / sub)
    shutil.rmtree(MATHJAX_DIR, ignore_errors=True)
    tmp.rename(MATHJAX_DIR)


def vendor_fonts() -> None:
    """Install the Georgian web font once into book/_vendor (ignored by git)."""
    if all((FONT_DIR / name).is_file() for name in FONT_FILES):
        return
    package = npm_install(FONT_PACKAGE, FONT_VERSION, "the Georgian font")
    FONT_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copy2(package / "LICENSE", FONT_DIR / "NotoSansGeorgian-LICENSE.txt")
    for name in FONT_FILES:
        shutil.copy2(package / "files" / name, FONT_DIR / name)


def vendor_node_mathjax() -> None:
    """MathJax for Node (mathjax-full, the same version), with which the grader typesets the
    math of feedback pages when it builds them (classroom/reporting/mathsvg.py)."""
    sys.path.insert(0, str(ROOT))
    from classroom.reporting import mathsvg
    mathsvg.vendor(npm_install, MATHJAX_VERSION)


def files_hash(paths, seed: str = "") -> str:
    """A hash of files' names (relative to the repository) and contents, in a fixed order."""
    h = hashlib.sha256(seed.encode())
    for p in sorted(paths):
        h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _tree(base: Path, skip_top=()) -> list[Path]:
    """The files under `base` that the build reads (no caches, no build outputs)."""
    if not base.is_dir():
        return []
    return [p for p in base.rglob("*") if p.is_file() and p.relative_to(base).parts[0] not in skip_top
            and not SKIP_PARTS & set(p.relative_to(base).parts) and p.suffix not in {".pyc", ".so", ".o"}]


def catalogs_hash(language: str) -> str:
    """A hash of one language's book catalogs (.po)."""
    return files_hash((LOCALES / language).rglob("*.po"))


def edition_command(language: str, fresh: bool) -> list[str]:
    outdir = HTML if language == "en" else HTML / language
    cmd = [sys.executable, str(ROOT / "scripts" / "book_edition.py"), "html", language, str(outdir)]
    if fresh:
        cmd.append("--fresh")
    log(f"{language} edition -> {outdir.relative_to(ROOT)}" + (" (all pages)" if fresh else ""))
    return cmd


def extension_hash() -> str:
    """The book's own Sphinx extension, templates and styles: Sphinx does not notice when
    they change, so every page is read again then (the execution cache still holds)."""
    return files_hash(p for sub in ("_ext", "_templates", "_static") for p in _tree(ROOT / "book" / sub))


def sources_hash(digest: str) -> str:
    """Everything an edition is made of but its catalogs: the chapters, the book's
    extension, templates and styles, the configuration and the code (``digest``)."""
    return files_hash(_tree(ROOT / "book", skip_top=("locales", "_vendor")), seed=digest)


def build_translations(env: dict, full: bool, digest: str, extension: str) -> int:
    """The German and Georgian editions, side by side (one process each; no cell runs
    again, the execution cache is shared). An edition whose sources and catalogs are
    what its last good build had is left as it is. Sphinx does not notice a changed
    catalog, so an edition whose catalogs changed is read again in full."""
    sources = sources_hash(digest)
    running = []
    for language in EDITIONS[1:]:
        catalogs = f"{catalogs_hash(language)} {extension}"
        fresh_stamp = BUILD / f".catalogs-{language}.sha256"
        done_stamp = BUILD / f".edition-{language}.sha256"
        state = f"{sources} {catalogs}"
        if not full and done_stamp.is_file() and done_stamp.read_text().strip() == state \
                and (HTML / language / "index.html").is_file():
            log(f"{language} edition: up to date")
            continue
        fresh = full or not fresh_stamp.is_file() or fresh_stamp.read_text().strip() != catalogs
        for stamp in (fresh_stamp, done_stamp):
            stamp.unlink(missing_ok=True)
        logfile = BUILD / f"edition-{language}.log"
        with logfile.open("w") as out:
            proc = subprocess.Popen(edition_command(language, fresh), env=env, stdout=out, stderr=subprocess.STDOUT)
        running.append((language, proc, logfile, catalogs, state))
    rc = 0
    for language, proc, logfile, catalogs, state in running:
        code = proc.wait()
        text = logfile.read_text(errors="replace")
        if code:
            print(text[-20000:], flush=True)
            log(f"{language} edition FAILED (exit {code}); its log: {logfile.relative_to(ROOT)}")
            rc = rc or code
            continue
        for line in text.splitlines():
            if "WARNING" in line or "ERROR" in line:
                print(line, flush=True)
        (BUILD / f".catalogs-{language}.sha256").write_text(catalogs + "\n")
        (BUILD / f".edition-{language}.sha256").write_text(state + "\n")
    return rc


def stage_exercises() -> None:
    """Copy exercises/*/*.ipynb to book/_vendor/html/notebooks, served as _build/html/notebooks/.

    (Not "exercises/": Sphinx applies exclude_patterns to html_extra_path too.)
    """
    dest = EXTRA / "notebooks"
    shutil.rmtree(dest, ignore_errors=True)
    src = ROOT / "exercises"
    for nb in sorted(src.glob("*/*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        target = dest / nb.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(nb, target)


def inputs_hash() -> str:
    return files_hash([p for d in HASHED_DIRS for p in _tree(ROOT / d)]
                      + [ROOT / f for f in HASHED_FILES if (ROOT / f).is_file()])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="drop every cache and rebuild all pages")
    args = parser.parse_args()
    start = time.perf_counter()
    os.chdir(ROOT)
    vendor_mathjax()
    vendor_fonts()
    vendor_node_mathjax()
    stage_exercises()

    digest = inputs_hash()
    previous = HASH_FILE.read_text().strip() if HASH_FILE.is_file() else None
    full = args.all or previous != digest
    if full:
        why = "--all" if args.all else ("first build" if previous is None else "andrea_ref/cuda/exercises changed")
        log(f"full rebuild ({why}): clearing the execution cache")
        # the HTML too: no page of a renamed or removed chapter is left behind
        for stale in (BUILD / ".jupyter_cache", BUILD / ".doctrees", BUILD / "jupyter_execute", HTML,
                      *BUILD.glob(".doctrees-html-*"), *BUILD.glob(".catalogs-*.sha256"),
                      *BUILD.glob(".edition-*.sha256"), BUILD / ".extension.sha256"):
            shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
    # A build that succeeds must not inherit the reports of an earlier failure.
    shutil.rmtree(HTML / "reports", ignore_errors=True)
    HASH_FILE.unlink(missing_ok=True)  # written back only if this build succeeds

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    # The kernels must draw figures inline: a non-interactive backend set by the caller
    # (e.g. MPLBACKEND=Agg in CI) would silently drop every figure from the book.
    env.pop("MPLBACKEND", None)
    extension = extension_hash()
    ext_stamp = BUILD / ".extension.sha256"
    fresh = full or not ext_stamp.is_file() or ext_stamp.read_text().strip() != extension
    ext_stamp.unlink(missing_ok=True)
    rc = subprocess.run(edition_command("en", fresh=fresh), env=env).returncode
    if rc == 0:
        ext_stamp.write_text(extension + "\n")

    reports = sorted(p for p in (HTML / "reports").rglob("*") if p.is_file()) if (HTML / "reports").is_dir() else []
    for report in reports:
        log(f"cell failure report {report.relative_to(ROOT)}:")
        print(report.read_text(errors="replace")[-4000:], flush=True)
    if rc == 0 and reports:
        rc = 1
    if rc == 0 and not (HTML / "index.html").is_file():
        log("no _build/html/index.html was written")
        rc = 1
    if rc == 0:
        rc = build_translations(env, full, digest, extension)
    if rc == 0:
        BUILD.mkdir(exist_ok=True)
        HASH_FILE.write_text(digest + "\n")
        log(f"built _build/html (English), _build/html/de and _build/html/ka in {time.perf_counter() - start:.1f} s")
    else:
        log(f"FAILED (exit {rc}) after {time.perf_counter() - start:.1f} s")
    return rc


if __name__ == "__main__":
    sys.exit(main())
