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
    original = gradebook_api.get_alembic_version
    if getattr(original, "in_process", False):
        pytest.skip("patched earlier in this process; nbgrader's own function is gone")
    with gradebook_api.Gradebook(f"sqlite:///{tmp_path / 'nbgrader.db'}"):
        pass
    monkeypatch.setattr(gradebook_api, "get_alembic_version", original)
    alembic_head_in_process()
    assert gradebook_api.get_alembic_version() == original()
    with gradebook_api.Gradebook(f"sqlite:///{tmp_path / 'ours.db'}"):
        pass
    assert _stamp(tmp_path / "ours.db") == _stamp(tmp_path / "nbgrader.db")
