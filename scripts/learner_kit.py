"""Build the learner's kit: everything a learner receives, and nothing else.

    .venv/bin/python scripts/learner_kit.py [--out _build/learner-kit]   (make learner-kit)

The kit (``_build/learner-kit/``, and ``_build/andrea-block-lab-learner-kit.zip``):

    README.md          how to install, open the notebooks and hand work in
    requirements.txt   JupyterLab and nbgrader, pinned as the course tests them
    dist/              the course package: a wheel and an sdist of andrea_ref
                       (the GELU kernel's sources inside, as andrea_ref/kernels/csrc/)
    notebooks/         the released notebooks (exercises/), NN_topic/name.ipynb
    notebooks-de/      the same notebooks in German, and notebooks-ka/ in Georgian
                       (classroom/notebook_i18n.py; the checks answer in their language)
    _build/html/       the built course book (open _build/html/index.html); at the
                       place the notebooks' chapter links expect it
    jupyter-config/    JupyterLab for a learner: nbgrader's instructor tools off (lab/learner/)

Taken from the repository: ``exercises/*/*.ipynb`` (not its release manifest), the
package and ``cuda/``'s kernel sources (through a staging copy, so that only what
``pyproject.toml`` and ``MANIFEST.in`` name is built), ``_build/html`` and
``lab/learner/``. Never anything from ``solutions/``, the gradebook or ``classroom/``.
The sdist is built first and the wheel is built from the unpacked sdist, so the sdist
is proven complete. ``tests/test_learner_kit.py`` scans the result for solution lines
and installs it away from the repository.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "_build" / "learner-kit"
ZIP_NAME = "andrea-block-lab-learner-kit.zip"

# Pins of the learner's tools, as in requirements.txt (the course's tested versions).
LEARNER_REQUIREMENTS = """\
# JupyterLab and nbgrader for the graded notebooks (install the course wheel from dist/ too)
jupyterlab>=4.2,<5
nbgrader==0.9.6
ipykernel>=6.29
"""

README = """\
# ANDREA Block Lab: learner's kit

Four graded notebooks on the inside of a transformer block, the course book, and the
course package `andrea_ref` they are checked against.

| folder | what it holds |
|---|---|
| `notebooks/` | the notebooks, to do in order: `01_layernorm`, `02_gelu`, `03_mlp`, `04_block` |
| `notebooks-de/`, `notebooks-ka/` | the same notebooks in German (Deutsch) and Georgian (ქართული): the checks answer in the notebook's language |
| `_build/html/` | the course book: open `_build/html/index.html` in a browser (works offline; German in `_build/html/de/`, Georgian in `_build/html/ka/`); the notebooks' chapter links open its pages |
| `dist/` | the course package, `{wheel}` (and its source, `{sdist}`) |
| `jupyter-config/` | JupyterLab's settings for learners (nbgrader's instructor tools turned off) |

## Install (once)

You need Python 3.11 on Linux or macOS (a C++ compiler lets the GELU kernel's CPU twin
build; without one the course falls back to plain PyTorch). In this folder:

```bash
python3 -m venv .venv
.venv/bin/pip install dist/{wheel} -r requirements.txt
.venv/bin/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (ANDREA Block Lab)"
```

The package needs PyTorch 2.13. Without a GPU, you can install PyTorch's CPU-only build
of torch 2.13 first (see PyTorch's installation page); pip then keeps it.

## Work

```bash
cd notebooks            # or notebooks-de, or notebooks-ka
JUPYTER_CONFIG_DIR="$PWD/../jupyter-config" ../.venv/bin/jupyter lab
```

In each notebook, write your code where it says `# YOUR CODE HERE` and delete the
`raise NotImplementedError()` line. Run the self-check cell as often as you like: it
prints a tick or a cross for each graded property, with the likely mistake. Cells that
start with 🔒 are locked (the set-up and the graded checks).

## Hand in

Restart the kernel and run all cells, then click **Validate** in the toolbar (or run
`.venv/bin/nbgrader validate notebooks/01_layernorm/layernorm.ipynb`). Then hand in the
`.ipynb` file where your instructor says. In a class run on the course's JupyterHub, open
**Nbgrader → Assignment List** there and click **Submit** next to the assignment (you may
submit again: the latest submission is the one collected).
"""


def _copy_package_sources(stage: Path) -> None:
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in"):
        shutil.copy2(ROOT / name, stage / name)
    shutil.copytree(ROOT / "andrea_ref", stage / "andrea_ref",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "csrc", "*.egg-info"))
    (stage / "cuda").mkdir()
    for pattern in ("*.cu", "*.cpp", "*.h"):
        for src in (ROOT / "cuda").glob(pattern):
            shutil.copy2(src, stage / "cuda" / src.name)


def _backend(cwd: Path, call: str) -> str:
    """Call setuptools' PEP 517 backend in ``cwd`` (no isolated build environment: the
    course's own setuptools builds it, offline)."""
    code = f"import setuptools.build_meta as b, sys; print(b.{call})"
    proc = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"building the package failed ({call}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.stdout.strip().splitlines()[-1]


def build_distributions(dist: Path) -> tuple[Path, Path]:
    """The sdist, then the wheel built from the unpacked sdist; both into ``dist``."""
    dist.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="andrea-kit-") as tmp:
        stage = Path(tmp) / "stage"
        stage.mkdir()
        _copy_package_sources(stage)
        sdist = dist / _backend(stage, f"build_sdist({str(dist)!r})")
        unpacked = Path(tmp) / "unpacked"
        with tarfile.open(sdist) as tar:
            tar.extractall(unpacked, filter="data")
        (src,) = [p for p in unpacked.iterdir() if p.is_dir()]
        wheel = dist / _backend(src, f"build_wheel({str(dist)!r})")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    if "andrea_ref/kernels/csrc/gelu_math.h" not in names:
        raise SystemExit(f"{wheel.name} lacks the kernel sources (andrea_ref/kernels/csrc/)")
    return wheel, sdist


def build(out: Path = DEFAULT_OUT, html: Path = ROOT / "_build" / "html") -> Path:
    """Build the kit into ``out`` (replacing it) and zip it beside; return the zip."""
    if not (html / "index.html").is_file():
        raise SystemExit(f"{html}/index.html is missing: build the book first (make book)")
    notebooks = sorted((ROOT / "exercises").glob("*/*.ipynb"))
    if len(notebooks) < 4:
        raise SystemExit("exercises/ holds fewer than four released notebooks: run make release")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    wheel, sdist = build_distributions(out / "dist")
    for nb in notebooks:
        dest = out / "notebooks" / nb.relative_to(ROOT / "exercises")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(nb, dest)
    sys.path.insert(0, str(ROOT))
    from classroom import notebook_i18n
    for language in notebook_i18n.TRANSLATED:
        notebook_i18n.release(language, dest=out / f"notebooks-{language}")
    shutil.copytree(html, out / "_build" / "html", ignore=shutil.ignore_patterns(".buildinfo", ".doctrees"))
    shutil.copytree(ROOT / "lab" / "learner", out / "jupyter-config",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (out / "requirements.txt").write_text(LEARNER_REQUIREMENTS, encoding="utf-8")
    (out / "README.md").write_text(README.format(wheel=wheel.name, sdist=sdist.name), encoding="utf-8")

    archive = out.parent / ZIP_NAME
    archive.unlink(missing_ok=True)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(out.rglob("*")):
            if path.is_file():
                zf.write(path, Path("andrea-block-lab") / path.relative_to(out))
    return archive


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    a = ap.parse_args(argv)
    archive = build(a.out.resolve(), a.html.resolve())
    files = sum(1 for p in a.out.rglob("*") if p.is_file())
    print(f"learner kit: {a.out} ({files} files), {archive} ({archive.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
