"""The gradebook's URL: one form in every document, and that form works wherever it is read.

The operator writes the URL once, in the Secret ``andrea-gradebook``, in the form
deploy/README.md gives (``postgresql://grader:PASSWORD@HOST/gradebook``). Two programs read it
from ``$NBGRADER_DB_URL``: the grader in the grading Job (``classroom.dburl.normalise``) and an
instructor's nbgrader (the Formgrader, ``nbgrader`` commands) through the course's
``nbgrader_config.py``. With SQLAlchemy 2 that URL, read raw, loads psycopg 3, which is not
installed (only psycopg2 is); both readers name the installed driver by the one rule,
``classroom.dburl.with_driver``. An instructor's server cannot import ``classroom`` (the image
keeps the grader in ``/opt/andrea-block-lab``, on no Python path, and the course in ``~/course``
is a copy without it): there ``nbgrader_config.py`` loads the rule from its file. The
Formgrader itself, on a real PostgreSQL: tests/test_deploy_formgrader.py.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

import deploy_files  # noqa: E402
import deploy_gradebook  # noqa: E402

from classroom import dburl  # noqa: E402

ROOT = deploy_files.ROOT
PASSWORD = "s3cret-" + "x" * 8
HOST = "gradebook.example:5432"
# Loads a configuration file as nbgrader does (traitlets' PyFileConfigLoader: get_config,
# load_subconfig, __file__), then says which driver its db_url names and whether SQLAlchemy
# can make an engine of it (create_engine imports the driver; nothing is connected to).
LOAD = """
import json, sys
from traitlets.config.loader import PyFileConfigLoader
import sqlalchemy
from sqlalchemy.engine import make_url
path = sys.argv[1]
cfg = PyFileConfigLoader(path.rsplit("/", 1)[1], path=path.rsplit("/", 1)[0]).load_config()
url = cfg.CourseDirectory.db_url
try:
    sqlalchemy.create_engine(url).dispose()
    engine = "ok"
except Exception as exc:
    engine = f"{type(exc).__name__}: {exc}"
print(json.dumps({"driver": make_url(url).drivername, "engine": engine, "same": url}))
"""


def _load(config: Path, url: str, tmp: Path, *, grader_importable: bool, course_source: Path | None) -> tuple[dict, str]:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "LANG": "C.UTF-8", "NBGRADER_DB_URL": url}
    if not grader_importable:
        env["PYTHONPATH"] = str(deploy_gradebook.hide_the_grader(tmp / "no-grader"))
    if course_source is not None:
        env["ANDREA_COURSE_SOURCE"] = str(course_source)
    proc = subprocess.run([sys.executable, "-c", LOAD, str(config)], cwd=tmp, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    out["same"] = out["same"] == dburl.with_driver(url)
    return out, proc.stderr


def test_every_document_gives_the_secret_one_form():
    """deploy/README.md, the manifests' and the values' comments: every PostgreSQL URL they
    write is in the README's form, ``postgresql://`` with no driver named."""
    found = deploy_gradebook.urls_in_documents()
    readme = deploy_gradebook.documented_url("PASSWORD", "HOST")
    assert readme == "postgresql://grader:PASSWORD@HOST/gradebook"
    assert "README.md" in found and any(f.startswith("k8s/") for f in found) and "z2jh/values.yaml" in found, found
    wrong = {f: [u for u in urls if make_url(u.rstrip(".")).drivername != "postgresql"] for f, urls in found.items()}
    assert not any(wrong.values()), wrong
    # the Secret made as the grading Job's comment says is the README's, character for character
    assert set(found["k8s/grade-job.yaml"]) == {readme}, found["k8s/grade-job.yaml"]


def test_the_documented_form_needs_the_driver_named():
    """What goes wrong without the rule: the documented URL, raw, loads psycopg 3."""
    import sqlalchemy
    url = deploy_gradebook.documented_url(PASSWORD, HOST)
    try:
        import psycopg  # noqa: F401
    except ImportError:
        with pytest.raises(ModuleNotFoundError, match="psycopg"):
            sqlalchemy.create_engine(url)
    else:  # pragma: no cover - psycopg 3 installed here after all: the raw URL would work
        pytest.skip("psycopg (3) is installed here: the raw URL works too")
    assert dburl.with_driver(url) == url.replace("postgresql://", "postgresql+psycopg2://", 1)
    assert make_url(dburl.normalise(url)).drivername == "postgresql+psycopg2"
    sqlalchemy.create_engine(dburl.with_driver(url)).dispose()


@pytest.mark.parametrize("url", ["postgresql+psycopg2://grader:pw@db/gradebook", "sqlite:////tmp/gradebook.db",
                                 " postgres://grader:pw@db/gradebook?sslmode=require "])
def test_with_driver_keeps_everything_else(url):
    out = dburl.with_driver(url)
    assert out.split("://", 1)[1] == url.strip().split("://", 1)[1]
    assert out.split("://", 1)[0] in {"postgresql+psycopg2", "sqlite"}


@pytest.mark.parametrize("where", ["checkout", "checkout without the grader importable",
                                   "instructor's ~/course (the image)"])
def test_nbgrader_config_names_the_driver(tmp_path, where):
    """The course's nbgrader_config.py, loaded as nbgrader loads it, gives nbgrader a URL it can
    make an engine of: in this checkout; with ``classroom`` not importable (found beside the
    file); and as the copy in an instructor's ``~/course`` with no ``classroom`` beside it or on
    the path (found in the course the image carries, ``$ANDREA_COURSE_SOURCE``)."""
    url = deploy_gradebook.documented_url(PASSWORD, HOST)
    config = ROOT / "nbgrader_config.py"
    if where.startswith("instructor"):
        (tmp_path / "course").mkdir()
        config = Path(shutil.copy(config, tmp_path / "course" / "nbgrader_config.py"))
    out, err = _load(config, url, tmp_path, grader_importable=where == "checkout",
                     course_source=ROOT if where.startswith("instructor") else tmp_path / "nowhere")
    assert out == {"driver": "postgresql+psycopg2", "engine": "ok", "same": True}, out
    assert PASSWORD not in err


def test_nbgrader_config_without_the_rule_still_loads(tmp_path):
    """A copy of nbgrader_config.py with no course anywhere (not beside it, not at
    ``$ANDREA_COURSE_SOURCE``, the grader not importable) still loads: the URL is used as it
    is, and a line says so, without the URL (it holds the password)."""
    (tmp_path / "alone").mkdir()
    config = Path(shutil.copy(ROOT / "nbgrader_config.py", tmp_path / "alone" / "nbgrader_config.py"))
    url = deploy_gradebook.documented_url(PASSWORD, HOST).replace("postgresql://", "postgresql+psycopg2://")
    out, err = _load(config, url, tmp_path, grader_importable=False, course_source=tmp_path / "nowhere")
    assert out == {"driver": "postgresql+psycopg2", "engine": "ok", "same": True}, out
    assert "classroom/dburl.py not found" in err and PASSWORD not in err


def test_the_course_image_carries_the_rule_where_the_configuration_looks():
    """The course image copies the build context to the folder nbgrader_config.py falls back
    to (``/opt/andrea-block-lab``), and ``classroom/dburl.py`` is in that context."""
    from docker.utils.build import exclude_paths
    copies = [i.value for i in deploy_files.stage_instructions("course")
              if i.cmd == "COPY" and not any(f.startswith("--from") for f in i.flags)]
    assert [".", "/opt/andrea-block-lab/"] in [list(v) for v in copies], copies
    assert '"/opt/andrea-block-lab"' in (ROOT / "nbgrader_config.py").read_text()
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    context = exclude_paths(str(ROOT), patterns, dockerfile="deploy/image/Dockerfile")
    assert "classroom/dburl.py" in context and "nbgrader_config.py" in context
