"""The assignments of a grading run, generated once from its copy of the course.

``OUT/template`` holds what every grading worker starts from: a gradebook with the
assignments exactly as ``nbgrader generate_assignment`` records them (made with
:func:`andrea_ref.grading.course.generate_assignments`, the course's one way of doing
so), the files other than notebooks that autograde copies over a submission, and the
independent check's plans (:mod:`classroom.scoring.plan`). It is made again only when
the fingerprint of the course changes.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import NamedTuple

from nbgrader.api import Gradebook

from andrea_ref.grading.course import generate_assignments, venv_bin_on_path
from andrea_ref.grading.manifest import ManifestError, load

from ..execution.autograde import alembic_head_in_process
from ..scoring.plan import write_plans
from .snapshot import CODE_ROOT, Snapshot, take


class Template(NamedTuple):
    gradebook: Path  # OUT/template/gradebook.db
    assignments: dict[str, list[str]]  # {assignment: [notebook names]}
    digest: str  # the course's fingerprint

    @property
    def dir(self) -> Path:
        return self.gradebook.parent


def make_template(out: Path, course: Snapshot | None = None) -> Template:
    """Generate every assignment that the ``course.toml`` of ``course`` names (default: a
    copy of this checkout's course, taken now) into ``out/template``."""
    course = course or take(CODE_ROOT, out)
    tdir = out / "template"
    gb = tdir / "gradebook.db"
    meta = tdir / "assignments.json"
    if not (tdir / "digest").is_file() or (tdir / "digest").read_text() != course.digest or not gb.is_file():
        shutil.rmtree(tdir, ignore_errors=True)
        tdir.mkdir(parents=True)
        with tempfile.TemporaryDirectory(prefix="andrea-template-") as tmp:
            work = Path(tmp)
            shutil.copy(course.root / "nbgrader_config.py", work / "nbgrader_config.py")
            try:
                names = load(course.root, pages=False).names  # the assignments course.toml names
                for name in names:
                    shutil.copytree(course.root / "solutions" / name, work / "solutions" / name,
                                    ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
                # the gradebook made here, so that nbgrader finds it made; then one nbgrader
                # process for every assignment (``*``: every folder copied above), not one each
                alembic_head_in_process()
                Gradebook(f"sqlite:///{work / 'gradebook.db'}").close()
                generate_assignments(work, ("*",))
            except (ManifestError, RuntimeError) as exc:
                raise SystemExit(str(exc)) from None
            shutil.copy(work / "gradebook.db", gb)
            write_plans(tdir, work / "solutions", work / course.config().CourseDirectory.release_directory)
            # files other than notebooks are what autograde copies over a submission
            src = work / "solutions"
            for p in src.rglob("*"):
                if p.is_file() and p.suffix != ".ipynb":
                    target = tdir / "source" / p.relative_to(src)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(p, target)
        venv_bin_on_path()
        with Gradebook(f"sqlite:///{gb}") as g:
            assignments = {a.name: sorted(nb.name for nb in a.notebooks) for a in g.assignments}
        meta.write_text(json.dumps(assignments, indent=1))
        (tdir / "digest").write_text(course.digest)
    (tdir / "source").mkdir(exist_ok=True)
    return Template(gb, json.loads(meta.read_text()), course.digest)
