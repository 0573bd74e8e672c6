"""exercises/ is exactly what nbgrader makes of solutions/, and gives nothing away."""
from __future__ import annotations

import importlib.util
import json

import pytest

from andrea_ref.grading.course import REPO
from andrea_ref.grading.manifest import load

spec = importlib.util.spec_from_file_location("release", REPO / "scripts" / "release.py")
release = importlib.util.module_from_spec(spec)
spec.loader.exec_module(release)


@pytest.fixture(scope="module")
def fresh():
    return release.generate_in_temp()


@pytest.mark.slow
def test_exercises_are_in_sync_with_solutions(fresh):
    have = release.committed()
    assert sorted(have) == sorted(fresh)
    for name in fresh:
        assert have[name] == fresh[name], f"exercises/{name} is out of date: run scripts/release.py"


@pytest.mark.slow
def test_release_is_byte_stable(fresh):
    assert release.generate_in_temp() == fresh


def test_no_solution_line_in_exercises():
    secret = release.solution_lines(REPO)
    assert len(secret) > 10  # the marker parsing found the solutions
    assert release.leaked_lines(release.committed(), secret) == []


def test_leak_detector_catches_a_leak():
    have = release.committed()
    name = sorted(have)[0]
    nb = json.loads(have[name])
    secret = sorted(release.solution_lines(REPO))[0]
    nb["cells"][0]["source"] = [secret + "\n"]
    assert release.leaked_lines({name: json.dumps(nb)}, {secret})


def test_notebooks_are_committed_without_outputs():
    for folder in ("solutions", "exercises"):
        for path in sorted((REPO / folder).rglob("*.ipynb")):
            nb = json.loads(path.read_text())
            for cell in nb["cells"]:
                if cell["cell_type"] == "code":
                    assert cell["outputs"] == [] and cell["execution_count"] is None, path


def test_graded_cells_follow_a_solution_or_graded_cell():
    """nbgrader 0.9 puts a deleted test cell back after the source cell that preceded it
    and fails if that one is not a graded or solution cell: keep the layout safe."""
    for path in sorted((REPO / "solutions").rglob("*.ipynb")):
        nb = json.loads(path.read_text())
        source_cells = [c["metadata"]["nbgrader"] for c in nb["cells"] if "nbgrader" in c["metadata"]]
        for prev, cell in zip(source_cells, source_cells[1:]):
            if cell.get("grade"):
                assert prev.get("grade") or prev.get("solution"), (path, cell["grade_id"])


def test_every_graded_cell_names_a_documented_check():
    from andrea_ref.grading.course import graded_cells

    notebooks = sorted((REPO / "exercises").glob("*/*.ipynb"))
    assert [p.relative_to(REPO / "exercises").as_posix() for p in notebooks] == [a.path for a in load()]
    for nb in notebooks:
        cells = graded_cells(nb)
        assert cells, nb
        assert sum(c["points"] for c in cells) == 10, nb
        assert all(c["property"] for c in cells), nb
        assert len({c["check"] for c in cells}) == len(cells), f"{nb}: a check is graded twice"
