"""nbgrader's exchange on the class's hub: ngshare, safe by construction.

A real JupyterHub 5 runs here with ngshare as its service (the entry of
``deploy/z2jh/values.yaml``'s ``hub.services.ngshare``, started by the hub instead of in a
pod of its own), and every step runs nbgrader's own command line with the image's Jupyter
configuration (``deploy/image/nbgrader_config.py``, laid out as the Dockerfile copies it) and
the person's own hub token, as their server in a pod would:

- the instructor creates the course on ngshare and enrols two learners
  (``ngshare-course-management``), releases an assignment;
- each learner lists and fetches it and submits an answer; the instructor collects both, each
  exactly as handed in;
- ngshare's own store holds each release and submission (under SQLAlchemy 2, ngshare 0.6
  acknowledges them and stores nothing: hence its own environment);
- one learner cannot read, list or even see the other's submission, nor the class's list of
  submissions, through any of ngshare's routes; someone not enrolled sees nothing of the
  course; a request without a token gets nothing. Nothing here depends on file ownership or
  permissions: ngshare's files are in its own folder, which no learner's server mounts.

Not run here: ngshare in its own pod behind the chart's proxy and NetworkPolicies, the hub's
KubeSpawner, and tokens of spawned servers (the learners' tokens here are made through the
hub's API with almost no scope; a server's token has more, and ngshare only asks the hub whose
it is).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

import deploy_files  # noqa: E402
import deploy_image_config  # noqa: E402
from grading_submissions import ASSIGNMENTS, CASES, make_submission  # noqa: E402

import importlib.util  # noqa: E402

ROOT = deploy_files.ROOT
# ngshare runs in an environment of its own (deploy/image/requirements-ngshare.txt), as in its pod
NGSHARE_PYTHON = ROOT / ".venv-ngshare" / "bin" / "python"
# (ngshare_exchange reads the user's name from the environment as it is imported: not here)
if importlib.util.find_spec("ngshare_exchange") is None:
    _SKIP = "ngshare-exchange is not installed (requirements-nodeps.txt; make venv)"
elif not NGSHARE_PYTHON.exists():
    _SKIP = "ngshare's environment .venv-ngshare is missing (make test builds it)"
else:
    _SKIP = None
pytestmark = [pytest.mark.slow, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]

COURSE = "andrea-block-lab"
ASSIGNMENT = "03_gelu"
NOTEBOOK = ASSIGNMENTS[ASSIGNMENT][0]
INSTRUCTOR, LEARNERS, OUTSIDER = "instructor1", ("ada", "bob"), "eve"
ANSWERS = {"ada": "gelu_solution", "bob": "gelu_erf"}
BIN = Path(sys.executable).parent

HUB_CONFIG = '''
import os, sys, json
from jupyterhub.proxy import Proxy

class RoutesInMemory(Proxy):
    """JupyterHub's routing table with no HTTP front: the test reaches ngshare directly, as a
    pod reaches it through its Service."""
    should_start = False
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._routes = {}
    async def add_route(self, routespec, target, data):
        self._routes[routespec] = {"routespec": routespec, "target": target, "data": data}
    async def delete_route(self, routespec):
        self._routes.pop(routespec, None)
    async def get_all_routes(self):
        return dict(self._routes)

settings = json.loads(os.environ["ANDREA_TEST_HUB"])
c.JupyterHub.proxy_class = RoutesInMemory
c.JupyterHub.bind_url = f"http://127.0.0.1:{settings['port']}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{settings['hub_port']}"
c.JupyterHub.db_url = settings["db"]
c.JupyterHub.cookie_secret = bytes.fromhex(settings["cookie"])
c.JupyterHub.authenticator_class = "null"
c.JupyterHub.services = [settings["ngshare"], {"name": "andrea-test", "api_token": settings["admin_token"]}]
c.JupyterHub.load_roles = [{"name": "andrea-test", "scopes": ["admin:users", "tokens"], "services": ["andrea-test"]}]
c.JupyterHub.load_groups = settings["groups"]
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(url, token=None, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"token {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def _wait(url, deadline, proc):
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the hub stopped: {proc.stdout.read()[-3000:]}")
        try:
            status, _ = _request(url)
            if status < 500:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{url} did not answer in time")


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hub")
    values = yaml.safe_load((ROOT / "deploy" / "z2jh" / "values.yaml").read_text())
    ng_port, port, hub_port = _free_port(), _free_port(), _free_port()
    ngshare = dict(values["hub"]["services"]["ngshare"], name="ngshare", url=f"http://127.0.0.1:{ng_port}",
                   command=[str(NGSHARE_PYTHON), "-m", "ngshare", f"--admins={INSTRUCTOR}",
                            f"--database=sqlite:///{tmp / 'ngshare.db'}", f"--storage={tmp / 'ngshare-files'}"])
    admin_token = os.urandom(16).hex()
    settings = {"port": port, "hub_port": hub_port, "db": f"sqlite:///{tmp / 'hub.sqlite'}",
                "cookie": os.urandom(32).hex(), "ngshare": ngshare, "admin_token": admin_token,
                "groups": values["hub"]["config"]["JupyterHub"]["load_groups"]}
    (tmp / "jupyterhub_config.py").write_text(HUB_CONFIG)
    env = {**os.environ, "ANDREA_TEST_HUB": json.dumps(settings), "PATH": f"{BIN}:{os.environ['PATH']}"}
    proc = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(tmp / "jupyterhub_config.py")], cwd=tmp, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        api = f"http://127.0.0.1:{hub_port}/hub/api"
        _wait(api + "/", deadline, proc)
        ng = f"http://127.0.0.1:{ng_port}/services/ngshare"
        _wait(ng + "/healthz", deadline, proc)
        everyone = [INSTRUCTOR, *LEARNERS, OUTSIDER]
        status, text = _request(api + "/users", admin_token, "POST", {"usernames": everyone})
        assert status in (201, 409), text
        tokens = {}
        for name in everyone:
            status, text = _request(f"{api}/users/{name}/tokens", admin_token, "POST",
                                    {"note": "andrea test", "scopes": ["read:users:name!user"]})
            assert status == 201, text
            tokens[name] = json.loads(text)["token"]
        yield {"tmp": tmp, "ngshare": ng, "tokens": tokens, "api": api}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _person(hub, name: str, role: str) -> dict:
    """The environment of ``name``'s server: the image's Jupyter configuration for the role, the
    hub's variables a spawned server gets, a home of its own."""
    tmp = hub["tmp"]
    image = tmp / "image"
    if not image.exists():
        deploy_image_config.lay_out(image)
    home = tmp / "home" / name
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
            "JUPYTER_CONFIG_DIR": str(image / "etc" / "andrea" / role), "ANDREA_ROLE": role,
            "ANDREA_COURSE_SOURCE": str(ROOT), "ANDREA_NGSHARE_URL": hub["ngshare"],
            "JUPYTERHUB_USER": name, "JUPYTERHUB_API_TOKEN": hub["tokens"][name],
            "JUPYTERHUB_API_URL": hub["api"], "_image": str(image)}


def _run(env: dict, *args: str, check=True) -> subprocess.CompletedProcess:
    env = dict(env)
    image = env.pop("_image")
    cmd = [str(Path(image) / "usr" / "local" / "bin" / "andrea-singleuser"), *args]
    proc = subprocess.run(cmd, cwd=env["HOME"], env=env, capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, f"{args}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return proc


def _ngshare(hub, who, path):
    status, text = _request(hub["ngshare"] + path, hub["tokens"].get(who) if who else None)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, {"success": False, "body": text[:200]}


def test_release_fetch_submit_collect_and_privacy(hub):
    inst = _person(hub, INSTRUCTOR, "instructor")
    # the course on ngshare, by the instructor (an ngshare admin), and its learners
    _run(inst, "ngshare-course-management", "create_course", COURSE, INSTRUCTOR)
    for name in LEARNERS:
        _run(inst, "ngshare-course-management", "add_student", COURSE, name)
    # release the assignment from the instructor's course folder (seeded on the first start)
    _run(inst, "nbgrader", "release_assignment", ASSIGNMENT)
    assert (Path(inst["HOME"]) / "course" / "exercises" / ASSIGNMENT / NOTEBOOK).is_file()

    by_name = {c.student: c for c in CASES}
    solution = json.loads((ROOT / "solutions" / ASSIGNMENT / NOTEBOOK).read_text())
    handed_in = {}
    for name in LEARNERS:
        env = _person(hub, name, "learner")
        listed = _run(env, "nbgrader", "list")
        assert ASSIGNMENT in listed.stdout + listed.stderr, listed.stdout + listed.stderr
        _run(env, "nbgrader", "fetch_assignment", ASSIGNMENT)
        nb = Path(env["HOME"]) / ASSIGNMENT / NOTEBOOK
        released = json.loads(nb.read_text())
        text = make_submission(by_name[ANSWERS[name]], released, solution)
        nb.write_text(text)
        handed_in[name] = json.loads(text)
        _run(env, "nbgrader", "submit", ASSIGNMENT)

    # privacy: bob against ada's work, through every route that holds submissions
    for path in (f"/submission/{COURSE}/{ASSIGNMENT}/ada", f"/submissions/{COURSE}/{ASSIGNMENT}",
                 f"/submissions/{COURSE}/{ASSIGNMENT}/ada",
                 f"/feedback/{COURSE}/{ASSIGNMENT}/ada?timestamp=2000-01-01%2000:00:00.000000%20UTC",
                 f"/students/{COURSE}"):
        status, body = _ngshare(hub, "bob", path)
        assert status == 403 and body["success"] is False, (path, status, body)
    status, body = _ngshare(hub, "bob", f"/submissions/{COURSE}/{ASSIGNMENT}/bob")
    assert status == 200 and [s["student_id"] for s in body["submissions"]] == ["bob"], body
    # someone not enrolled: nothing of the course; no token: nothing at all
    for path in (f"/assignments/{COURSE}", f"/assignment/{COURSE}/{ASSIGNMENT}",
                 f"/submissions/{COURSE}/{ASSIGNMENT}/ada"):
        status, body = _ngshare(hub, OUTSIDER, path)
        assert status == 403, (path, status, body)
    status, body = _ngshare(hub, OUTSIDER, "/courses")
    assert status == 200 and body["courses"] == [], body
    for path in (f"/submission/{COURSE}/{ASSIGNMENT}/ada", "/courses"):
        status, body = _ngshare(hub, None, path)
        assert status in (302, 403, 405) or not body.get("success"), (path, status, body)
        assert "ada" not in json.dumps(body.get("files", "")), body
    # learners' servers never hold the exchange's files: they are in ngshare's own folder
    files = hub["tmp"] / "ngshare-files"
    assert files.is_dir() and not any(str(files) in str(p) for p in Path(hub["tmp"] / "home").rglob("*"))

    # the instructor collects both submissions, each exactly as handed in
    _run(inst, "nbgrader", "collect", ASSIGNMENT)
    for name in LEARNERS:
        got = Path(inst["HOME"]) / "course" / "submitted" / name / ASSIGNMENT / NOTEBOOK
        assert got.is_file(), f"{name}'s submission was not collected"
        assert json.loads(got.read_text())["cells"] == handed_in[name]["cells"]


def test_the_image_configuration_names_ngshare_as_the_exchange(hub):
    env = _person(hub, "ada", "learner")
    code = ("from nbgrader.apps import NbGraderAPI\n"
            "from nbgrader.coursedir import CourseDirectory\n"
            "from nbgrader.exchange import ExchangeFactory\n"
            "from nbgrader.apps.baseapp import NbGrader\n"
            "app = NbGrader(); app.initialize([])\n"
            "f = ExchangeFactory(config=app.config)\n"
            "print(f.exchange.__module__, f.fetch_assignment.__module__, f.exchange().ngshare_url)\n")
    proc = _run(env, sys.executable, "-c", code)
    mod, fetch, url = proc.stdout.split()
    assert mod.startswith("ngshare_exchange") and fetch.startswith("ngshare_exchange"), proc.stdout
    assert url == hub["ngshare"]
