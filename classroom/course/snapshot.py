"""The course a grading run reads: a copy taken once, when the run starts.

A run that read the checkout as it went would grade with whatever the checkout holds at
each moment: a check edited, or exercises/ re-released, in the middle of a run would
grade some learners with one course and some with another, under one fingerprint. So
:func:`take` reads every file of the course that grading uses -- ``nbgrader_config.py``,
``course.toml`` (which names the assignments), ``solutions/``, ``exercises/``,
``andrea_ref/`` (the checks and the reference they compare with) and the notebooks'
catalogs in ``book/locales`` -- once, and writes those very bytes into
``OUT/course/<fingerprint>/``. Everything of the run reads that copy: the template (:mod:`.template`), the workers' nbgrader configuration, the workers' own
``andrea_ref`` (they start with the copy first on ``sys.path``, :meth:`Snapshot.importable`)
and the ``andrea_ref`` the kernels and answer servers import (the sandbox shows the
copy's, :func:`classroom.isolation.bwrap.default_ro_paths`).

The fingerprint (:func:`fingerprint`) is computed from the same bytes: the instructor and
released notebooks, nbgrader's configuration, the manifest, the checks and the grader's own code
(``classroom/``, which runs from the checkout). It decides what a resumed run regrades.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from traitlets.config.loader import PyFileConfigLoader

from andrea_ref.grading.manifest import FILE as MANIFEST_FILE

CODE_ROOT = Path(__file__).resolve().parents[2]  # the checkout the grader's code runs from
DEFAULT_OUT = CODE_ROOT / "_grading"  # a grading run's working and report folder (--out)
CONFIG = "nbgrader_config.py"
TOP_FILES = (CONFIG, MANIFEST_FILE)  # the course's files at its top: both decide a grade
# what a run copies: (folder, glob); files below __pycache__ or .ipynb_checkpoints never
# (andrea_ref: its code and the package data pyproject.toml ships with it: the catalogs, and
# the corpus the capstone's training check reads)
COPIED = (("solutions", "**/*"), ("exercises", "**/*"), ("andrea_ref", "**/*.py"), ("andrea_ref", "**/*.po"),
          ("andrea_ref", "data/*"), ("book/locales", "*/LC_MESSAGES/notebooks/*.po"))
# what decides a grade, besides the configuration: {folder: file suffixes}; the rest of
# the copy only changes words
FINGERPRINTED = {"solutions": (".ipynb",), "exercises": (".ipynb",), "andrea_ref": (".py", ".txt"),
                 "classroom": (".py",)}
SKIPPED = ("__pycache__", ".ipynb_checkpoints")


def _read(root: Path, parts) -> dict[str, bytes]:
    files = {}
    for name in TOP_FILES:
        if (root / name).is_file():
            files[name] = (root / name).read_bytes()
    for folder, pattern in parts:
        for p in sorted((root / folder).glob(pattern)):
            if p.is_file() and not any(s in p.parts for s in SKIPPED):
                files[p.relative_to(root).as_posix()] = p.read_bytes()
    return files


def course_files(repo: Path) -> dict[str, bytes]:
    """{relative path: content} of every file of ``repo`` a grading run reads."""
    return _read(Path(repo), COPIED)


def grader_files(code_root: Path = CODE_ROOT) -> dict[str, bytes]:
    """{relative path: content} of the grader's own code."""
    return _read(Path(code_root), (("classroom", "**/*.py"),))


def fingerprint(files: dict[str, bytes]) -> str:
    """A hash of everything in ``files`` that decides a grade (see the module docstring)."""
    h = hashlib.sha256()
    for name in sorted(files):
        suffixes = FINGERPRINTED.get(name.split("/", 1)[0], ())
        if name in TOP_FILES or name.endswith(suffixes):
            h.update(name.encode() + b"\0" + files[name] + b"\0")
    return h.hexdigest()


def code_digest(repo: Path, code_root: Path | None = None) -> str:
    """The fingerprint of the course in ``repo`` and the grader's code in ``code_root``
    (default: ``repo`` too) as they are now: what a run started now would grade with."""
    return fingerprint({**course_files(repo), **grader_files(code_root or repo)})


def load_course_config(root: Path):
    """The course's nbgrader configuration (``root/nbgrader_config.py``), read without the
    instructor's ``NBGRADER_DB_URL``: a grading run names its gradebooks itself."""
    saved = os.environ.pop("NBGRADER_DB_URL", None)
    try:
        return PyFileConfigLoader(CONFIG, path=str(root)).load_config()
    finally:
        if saved is not None:
            os.environ["NBGRADER_DB_URL"] = saved


@dataclass(frozen=True)
class Snapshot:
    """The copy of the course a run grades with (``root``), and its ``digest``."""
    root: Path
    digest: str

    def config(self):
        return load_course_config(self.root)

    @contextlib.contextmanager
    def importable(self) -> Iterator[None]:
        """The copy first on ``sys.path`` for as long as this lasts: a worker process
        started meanwhile (multiprocessing's *spawn* hands it this ``sys.path``) imports
        ``andrea_ref`` from the copy."""
        sys.path.insert(0, str(self.root))
        try:
            yield
        finally:
            sys.path.remove(str(self.root))


def take(repo: Path, out: Path, code_root: Path = CODE_ROOT) -> Snapshot:
    """Copy the course of ``repo`` into ``out/course/`` (once per fingerprint; copies of
    other fingerprints are removed) and return it."""
    files = course_files(repo)
    digest = fingerprint({**files, **grader_files(code_root)})
    base = Path(out) / "course"
    root = base / digest[:16]
    if not (root / ".complete").is_file():
        tmp = base / f".{digest[:16]}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        for name, data in files.items():
            target = tmp / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        for d in [tmp, *(p for p in tmp.rglob("*") if p.is_dir())]:
            os.chmod(d, 0o755)  # the sandboxes' uids read the checks from here
        for p in tmp.rglob("*"):
            if p.is_file():
                os.chmod(p, 0o644)
        (tmp / ".complete").write_text(digest + "\n")
        shutil.rmtree(root, ignore_errors=True)
        os.replace(tmp, root)
    for other in base.iterdir():
        if other != root and other.is_dir() and not other.name.startswith("."):
            shutil.rmtree(other, ignore_errors=True)
    return Snapshot(root, digest)
