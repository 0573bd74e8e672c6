"""Build the learner's kit: everything a learner receives, and nothing else.

    .venv/bin/python scripts/learner_kit.py [--out _build/learner-kit]   (make learner-kit)

The kit (``_build/learner-kit/``, and ``_build/andrea-block-lab-learner-kit.zip``):

    README.md          how to install, start (one command), validate and hand work in
    requirements.txt   JupyterLab and nbgrader, pinned as the course tests them
    dist/              the course package: a wheel and an sdist of andrea_ref and andrea_lab
                       (the GELU kernel's sources inside, as andrea_ref/kernels/csrc/;
                       andrea_lab: the ``andrea-lab`` command and the Jupyter server
                       extension that serves the book)
    notebooks/         the released notebooks (exercises/), NN_topic/name.ipynb
    notebooks-de/      the same notebooks in German, and notebooks-ka/ in Georgian
                       (classroom/notebook_i18n.py; the checks answer in their language)
    book/              the built course book, all three editions (open book/index.html;
                       in JupyterLab the notebooks' chapter links open it in a tab)
    jupyter-config/    JupyterLab for a learner (lab/learner/): nbgrader's instructor
                       tools off, the book served, output lines wrapped at spaces

Taken from the repository: the released notebook of every assignment ``course.toml``
names (``exercises/<assignment>/<notebook>.ipynb``, not the release's record), the
packages and ``cuda/``'s kernel sources (through a staging copy, so that only what
``pyproject.toml`` and ``MANIFEST.in`` name is built), ``_build/html`` and
``lab/learner/``. Never anything from ``solutions/``, the gradebook or ``classroom/``.
The sdist is built first and the wheel is built from the unpacked sdist, so the sdist
is proven complete. ``tests/test_learner_kit.py`` scans the result for solution lines,
installs it into a fresh environment away from the repository as the README says, and
uses it in Chromium.
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
sys.path.insert(0, str(ROOT))  # the course's packages, when run with an interpreter that lacks them
from andrea_ref.grading.manifest import ManifestError, load  # noqa: E402
DEFAULT_OUT = ROOT / "_build" / "learner-kit"
ZIP_NAME = "andrea-block-lab-learner-kit.zip"

# Pins of the learner's tools, as in requirements.txt (the course's tested versions).
LEARNER_REQUIREMENTS = """\
# JupyterLab and nbgrader for the graded notebooks (install the course wheel from dist/ too)
jupyterlab>=4.2,<5
jupyter-server>=2.13,<3
nbgrader==0.9.6
ipykernel>=6.29
"""

# PyTorch's own index of CPU-only wheels (README of the repository, "Quick start"): as
# an extra index, pip takes torch from it (its 2.13.x+cpu wheel sorts above the plain
# release) and everything else from the usual index.
CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"

README = """\
# ANDREA Block Lab: learner's kit

The course's {count} graded notebooks on the inside of a transformer block, the course book, and the
course package they are checked against.

| folder | what it holds |
|---|---|
| `notebooks/` | the notebooks, to do in order: {order} |
| `notebooks-de/`, `notebooks-ka/` | the same notebooks in German (Deutsch) and Georgian (ქართული): the checks answer in the notebook's language |
| `book/` | the course book, in English, German (`book/de/`) and Georgian (`book/ka/`): the notebooks' chapter links open it; without JupyterLab open `book/index.html` in a browser (it works offline) |
| `dist/` | the course package, `{wheel}` (and its source, `{sdist}`) |
| `jupyter-config/` | JupyterLab's settings for learners |

## Install (once)

You need Python 3.11 on Linux or macOS (a C++ compiler lets the GELU kernel's
CPU twin build; without one the course falls back to plain PyTorch). In this folder:

```bash
python3 -m venv .venv
.venv/bin/pip install {cpu_index} dist/{wheel} -r requirements.txt
```

`{cpu_index}` gets PyTorch's CPU-only build of torch 2.13
instead of the CUDA build, which pulls in several GB of `nvidia-*`
packages a laptop without an NVIDIA GPU never uses. With an NVIDIA GPU, leave it out.

## Work

```bash
.venv/bin/andrea-lab              # German: --lang de, Georgian: --lang ka
```

This opens JupyterLab in your browser on the notebooks, starting with the first one
(stop it with Ctrl+C in the terminal); it finds the kit from any folder.
`.venv/bin/andrea-lab --help` shows the options, and anything after `--` goes to JupyterLab
(`.venv/bin/andrea-lab -- --port 8890 --no-browser`). Your edits are saved in
`notebooks/` (or `notebooks-de/`, `notebooks-ka/`); JupyterLab's own settings in
`.lab-state/`. Run as root (in a container, say), it warns and goes on.

In each notebook, write your code where it says `# YOUR CODE HERE` and delete the
`raise NotImplementedError()` line. Run the self-check cell as often as you like: it
prints a tick or a cross for each graded property, with the likely mistake. Code cells
whose first line starts with `# [locked]` are locked (the set-up and the graded checks).
A chapter link opens the book's chapter in a new browser tab.

## Hand in

Restart the kernel and run all cells, then click **Validate** in the notebook's toolbar,
or in a terminal:

```bash
.venv/bin/andrea-lab validate notebooks/{first}
```

It runs the notebook in a fresh kernel as the grader will, shows every failing check's
message in full, and exits with status 1 when a check fails (0 when all pass). Then
hand in the `.ipynb` file where your instructor says. The kit has no Nbgrader
Assignment List: that needs the course's JupyterHub, where you open **Nbgrader →
Assignment List** and click **Submit** next to the assignment (you may submit again:
the latest submission is the one collected).
"""


def _copy_package_sources(stage: Path) -> None:
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in"):
        shutil.copy2(ROOT / name, stage / name)
    for package in ("andrea_ref", "andrea_lab"):
        shutil.copytree(ROOT / package, stage / package,
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
    if "andrea_lab/server.py" not in names:
        raise SystemExit(f"{wheel.name} lacks the Jupyter server extension (andrea_lab/)")
    return wheel, sdist


def build(out: Path = DEFAULT_OUT, html: Path = ROOT / "_build" / "html") -> Path:
    """Build the kit into ``out`` (replacing it) and zip it beside; return the zip."""
    if not (html / "index.html").is_file():
        raise SystemExit(f"{html}/index.html is missing: build the book first (make book)")
    course = load(ROOT, pages=False)
    missing = [f"exercises/{a.path}" for a in course if not a.exercise.is_file()]
    if missing:
        raise SystemExit(f"{missing[0]} is not released: run make release")
    notebooks = [a.exercise for a in course]
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    wheel, sdist = build_distributions(out / "dist")
    for nb in notebooks:
        dest = out / "notebooks" / nb.relative_to(ROOT / "exercises")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(nb, dest)
    from classroom import notebook_i18n
    for language in notebook_i18n.TRANSLATED:
        notebook_i18n.release(language, dest=out / f"notebooks-{language}")
    shutil.copytree(html, out / "book", ignore=shutil.ignore_patterns(".buildinfo", ".doctrees"))
    shutil.copytree(ROOT / "lab" / "learner", out / "jupyter-config",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (out / "requirements.txt").write_text(LEARNER_REQUIREMENTS, encoding="utf-8")
    (out / "README.md").write_text(README.format(
        wheel=wheel.name, sdist=sdist.name, cpu_index=CPU_INDEX, count=len(course),
        order=", ".join(f"`{a.name}`" for a in course), first=course[0].path), encoding="utf-8")

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
    try:
        load(ROOT, pages=False)  # a manifest that cannot be used is refused in one line, before any work
    except ManifestError as exc:
        print(exc, file=sys.stderr)
        return 2
    archive = build(a.out.resolve(), a.html.resolve())
    files = sum(1 for p in a.out.rglob("*") if p.is_file())
    print(f"learner kit: {a.out} ({files} files), {archive} ({archive.stat().st_size // 1024} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
