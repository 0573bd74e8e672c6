"""The schema revision a new gradebook is stamped with, read in-process, is the one
nbgrader's own ``alembic heads`` gives, and a gradebook made that way is one nbgrader's
command line accepts."""
from __future__ import annotations

import sqlite3

import pytest
from nbgrader import api as gradebook_api

from andrea_ref.grading.course import venv_bin_on_path
from classroom.execution.autograde import alembic_head_in_process

pytestmark = pytest.mark.fast


def _stamp(path) -> str:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT version_num FROM alembic_version").fetchone()[0]


def test_the_in_process_revision_is_nbgraders(tmp_path, monkeypatch):
    venv_bin_on_path()
    # nbgrader's own function, also where a grading run in this process has replaced it
    original = getattr(gradebook_api.get_alembic_version, "nbgrader", gradebook_api.get_alembic_version)
    monkeypatch.setattr(gradebook_api, "get_alembic_version", original)
    with gradebook_api.Gradebook(f"sqlite:///{tmp_path / 'nbgrader.db'}"):
        pass
    alembic_head_in_process()
    assert gradebook_api.get_alembic_version() == original()
    with gradebook_api.Gradebook(f"sqlite:///{tmp_path / 'ours.db'}"):
        pass
    assert _stamp(tmp_path / "ours.db") == _stamp(tmp_path / "nbgrader.db")
