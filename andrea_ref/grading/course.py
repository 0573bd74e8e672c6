"""Running nbgrader on the course, and a throw-away course made from the repository.

    course = make_course(tmp_dir)               # nbgrader_config.py + solutions/, released
    submit(course, "alice", "02_layernorm", "layernorm.ipynb", text)
    run_nbgrader(course, "autograde", "*")
    scores(course)  # {(student, assignment): {grade_id: score}}

:func:`generate_assignments` and :func:`nbgrader_env` are the one way the course runs
``nbgrader generate_assignment``: the release script (``scripts/release.py``), the
grader's template (``classroom.course``) and the tests' courses all call them. Nothing
here touches the repository's own gradebook or exercises/ unless a caller names them.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def venv_bin_first(path: str) -> str:
    """``path`` (a PATH value) with this interpreter's ``bin`` folder first: nbgrader runs
    ``alembic`` as a program of the virtual environment."""
    return str(Path(sys.executable).parent) + (os.pathsep + path if path else "")


def venv_bin_on_path() -> None:
    """:func:`venv_bin_first` for this process: nbgrader's API, used in this process, runs
    ``alembic`` too."""
    if os.environ.get("PATH", "").split(os.pathsep)[0] != str(Path(sys.executable).parent):
        os.environ["PATH"] = venv_bin_first(os.environ.get("PATH", ""))


def nbgrader_env(*, own_gradebook: bool = True) -> dict:
    """The environment nbgrader needs: the venv's bin on PATH (:func:`venv_bin_first`)
    and the repository importable from the kernels it starts. ``own_gradebook``: drop
    ``NBGRADER_DB_URL``, so that a course folder uses its own ``gradebook.db`` (a
    throw-away course); the course's own release keeps it (``nbgrader_config.py``
    reads it)."""
    env = dict(os.environ)
    env["PATH"] = venv_bin_first(env.get("PATH", ""))
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if own_gradebook:
        env.pop("NBGRADER_DB_URL", None)
    return env


def run_nbgrader(course: Path, *args: str, check: bool = False, own_gradebook: bool = True) -> subprocess.CompletedProcess:
    """``nbgrader ARGS`` in the course folder ``course``; with ``check``, a failure raises
    RuntimeError holding nbgrader's output."""
    cmd = [str(Path(sys.executable).parent / "nbgrader"), *args]
    proc = subprocess.run(cmd, cwd=course, env=nbgrader_env(own_gradebook=own_gradebook),
                          capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def generate_assignments(course: Path, assignments=("*",), *, db_url: str | None = None,
                         own_gradebook: bool = True) -> None:
    """``nbgrader generate_assignment A --force`` in ``course`` for each of ``assignments``
    (nbgrader's names or patterns: ``*`` is every assignment of the source folder), which
    writes the release folder and records the assignments in the gradebook: ``db_url``,
    else the course's own (see :func:`nbgrader_env`). The one way the course's releases
    are made (the release script, the grader's template, the tests' courses); a failure
    raises RuntimeError holding nbgrader's output."""
    for assignment in assignments:
        run_nbgrader(course, "generate_assignment", assignment, "--force", *([f"--db={db_url}"] if db_url else []),
                     check=True, own_gradebook=own_gradebook)


def make_course(path: Path, *, extra_config: str = "", assignments=("*",)) -> Path:
    """Copy the course configuration and instructor notebooks into ``path`` and release
    ``assignments`` (all of them by default; none if empty)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "nbgrader_config.py", path / "nbgrader_config.py")
    if extra_config:
        with open(path / "nbgrader_config.py", "a", encoding="utf-8") as f:
            f.write("\n" + extra_config + "\n")
    shutil.copytree(REPO / "solutions", path / "solutions",
                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    generate_assignments(path, assignments)
    return path


def submit(course: Path, student: str, assignment: str, notebook: str, text: str) -> Path:
    target = Path(course) / "submitted" / student / assignment / notebook
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    return target


def scores(course: Path) -> dict:
    """{(student, assignment): {grade_id: score}} for every notebook in the gradebook."""
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{Path(course) / 'gradebook.db'}") as gb:
        for assignment in gb.assignments:
            for sub in assignment.submissions:
                for nb in sub.notebooks:
                    out[(sub.student.id, assignment.name)] = {g.name: g.score for g in nb.grades}
    return out


def graded_cells(notebook: Path) -> list[dict]:
    """The graded test cells of a released or instructor notebook, in order.

    Each entry: ``grade_id``, ``points``, ``check`` (the ``andrea_ref.grading`` function
    the cell calls), ``function`` (the learner's function it checks) and ``property`` (the
    first line of that check's docstring, which states the property it grades). The book's
    exercises page builds its table from this.
    """
    import json
    import re

    from andrea_ref import grading

    cells = []
    for cell in json.loads(Path(notebook).read_text())["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("grade") or cell.get("cell_type") != "code":
            continue
        source = "".join(cell["source"])
        found = re.search(r"grading\.(check_\w+)\((\w+)", source)
        if found is None:
            raise ValueError(f"{notebook}: graded cell {meta['grade_id']!r} calls no grading.check_* function")
        check = getattr(grading, found.group(1))
        cells.append({
            "grade_id": meta["grade_id"],
            "points": meta.get("points", 0),
            "check": found.group(1),
            "function": found.group(2),
            "property": (check.__doc__ or "").strip().splitlines()[0],
        })
    return cells
