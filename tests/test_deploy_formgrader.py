"""The instructor's Formgrader finds the course, in the image's configuration.

The image's Jupyter configuration (laid out as the Dockerfile copies it), a fresh home, the
variables the hub's pre-spawn hook sets for an instructor, and the image's start script
(``andrea-singleuser``) starting a Jupyter server where the pod starts
``jupyterhub-singleuser`` (which needs a hub): the Formgrader's own API lists every assignment
of the course, from the course folder the start script put in ``~/course``, and still does
where that folder lacks the course's own ``nbgrader_config.py``; with the configuration that
came before (the course root set, nbgrader's source and release folders not) it then lists
none. A learner's server has no Formgrader at all. With the gradebook's URL in the form
deploy/README.md tells the operator to put in its Secret (``postgresql://...``, which
SQLAlchemy 2 would hand to psycopg 3, not installed), the Formgrader uses a real PostgreSQL
gradebook, and the password is in none of the server's output.

As in the image, the servers here cannot import the grader (``classroom``: the image keeps it
in ``/opt/andrea-block-lab``, which is on no Python path); this checkout's environment can, so
the tests hide it (``deploy_gradebook.hide_the_grader``).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import deploy_files  # noqa: E402
import deploy_image_config  # noqa: E402
import deploy_gradebook  # noqa: E402
import pg_server  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = deploy_files.ROOT
BIN = Path(sys.executable).parent
COURSE_ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
OLD_CONFIG = '''import os
from pathlib import Path
c = get_config()
c.CourseDirectory.course_id = "andrea-block-lab"
c.CourseDirectory.root = str(Path.home() / "course")
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server(tmp: Path, role: str, config_dir: Path | None = None, env: dict | None = None):
    image = deploy_image_config.lay_out(tmp / "image")
    home = tmp / "home"
    home.mkdir(exist_ok=True)
    port, token = _free_port(), os.urandom(16).hex()
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8", "ANDREA_ROLE": role,
           "JUPYTER_CONFIG_DIR": str(config_dir or image / "etc" / "andrea" / role),
           "ANDREA_COURSE_SOURCE": str(ROOT), "JUPYTERHUB_USER": "instructor1",
           "PYTHONPATH": str(deploy_gradebook.hide_the_grader(tmp / "no-grader")), **(env or {})}
    cmd = [str(image / "usr" / "local" / "bin" / "andrea-singleuser"), "jupyter", "server", "--no-browser",
           f"--port={port}", "--ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={home}"]
    if os.geteuid() == 0:  # the pod runs it as uid 1000; root here (this machine's Python is root's)
        cmd.append("--allow-root")
    proc = subprocess.Popen(cmd, cwd=home, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    return proc, f"http://127.0.0.1:{port}", token, home


def _get(url, token):
    req = urllib.request.Request(url, headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _ask(proc, base, token, path):
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read()[-3000:])
        try:
            status, _ = _get(base + "/api/status", token)
            if status == 200:
                return _get(base + path, token)
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError("the server did not start")


def _stop(proc) -> str:
    """Stop the server; returns all it wrote."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    return proc.stdout.read()


def _formgrader_assignments(tmp_path, with_output=False, **server_options):
    """(the assignment names an instructor's Formgrader lists, the instructor's home[, what
    the server wrote])."""
    proc, base, token, home = _server(tmp_path, "instructor", **server_options)
    output = ""
    try:
        status, body = _ask(proc, base, token, "/formgrader/api/assignments")
    finally:
        output = _stop(proc)
    assert status == 200, body[:2000] + output[-3000:]
    names = sorted(a["name"] for a in json.loads(body))
    return (names, home, output) if with_output else (names, home)


def test_the_formgrader_lists_the_course(tmp_path):
    names, home = _formgrader_assignments(tmp_path)
    assert names == COURSE_ASSIGNMENTS
    # the start script put the course in ~/course, the Formgrader's course folder
    for name in COURSE_ASSIGNMENTS:
        assert (home / "course" / "solutions" / name).is_dir()
        assert (home / "course" / "exercises" / name).is_dir()
    assert (home / "course" / "gradebook.db").is_file()  # the gradebook nbgrader opened there


def test_the_formgrader_uses_the_documented_postgresql_url(tmp_path):
    """The Secret's URL exactly as deploy/README.md gives it (``postgresql://grader:PASSWORD@HOST/
    gradebook``) reaches the instructor's server in ``$NBGRADER_DB_URL`` (the hub's pre-spawn
    hook): the Formgrader lists the course from the PostgreSQL gradebook, where nbgrader made
    its tables, and no SQLite gradebook is made beside the course. Read raw, that URL makes
    SQLAlchemy 2 load psycopg 3 (``No module named 'psycopg'``: only psycopg2 is installed)."""
    password = "pw-" + os.urandom(8).hex()
    with pg_server.server() as pg:
        url = deploy_gradebook.documented_url(password, f"127.0.0.1:{pg.port}")
        assert url.startswith("postgresql://"), url  # the form the document gives, no driver named
        names, home, output = _formgrader_assignments(tmp_path, with_output=True, env={"NBGRADER_DB_URL": url})
        tables = set(pg.psql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").split())
        course = pg.psql("SELECT id FROM course")
    assert names == COURSE_ASSIGNMENTS
    assert {"assignment", "notebook", "student", "submitted_assignment"} <= tables, tables
    assert course == "andrea-block-lab"
    assert not (home / "course" / "gradebook.db").exists()
    assert password not in output


@pytest.mark.parametrize("config", ["image", "old"])
def test_a_course_folder_without_its_own_configuration(tmp_path, config):
    """The course's notebooks in ~/course but no nbgrader_config.py there (an instructor who
    copied the notebooks in): the image's configuration still finds them (it falls back to the
    course's configuration in the image); the old one (the root, no source or release folder)
    finds none."""
    home = tmp_path / "home"
    for folder in ("solutions", "exercises"):
        shutil.copytree(ROOT / folder, home / "course" / folder)
    old = tmp_path / "old-config"
    old.mkdir()
    (old / "nbgrader_config.py").write_text(OLD_CONFIG)
    names, home = _formgrader_assignments(tmp_path, config_dir=old if config == "old" else None)
    assert names == (COURSE_ASSIGNMENTS if config == "image" else [])
    assert not (home / "course" / "nbgrader_config.py").exists()  # the start script left it alone


def test_a_learner_has_no_formgrader(tmp_path):
    proc, base, token, home = _server(tmp_path, "learner")
    try:
        status, _ = _ask(proc, base, token, "/formgrader/api/assignments")
        version, text = _get(base + "/nbgrader_version?version=0", token)
    finally:
        _stop(proc)
    assert status == 404
    assert version == 200, text  # the Assignment List's extension is on
    assert not (home / "course").exists()
    shutil.rmtree(home, ignore_errors=True)
