"""JupyterHub for a class on one machine: ``make hub`` (README, "Running the course on a
JupyterHub").

- One OS user per person. The hub runs as root and starts each person's JupyterLab as
  that OS user (``LocalProcessSpawner``), in their home: homes are private (0700), so a
  learner sees only their own files.
- ``configurable-http-proxy`` (``hub/node_modules``, installed by ``make hub``) in front.
- Instructors (``ANDREA_HUB_INSTRUCTORS``) get every nbgrader tool, on the course
  directory ``~/andrea-block-lab``; everyone else is a learner, with the Assignment List and
  Validate only. Both get the course id and the class's exchange through the Jupyter
  configuration folder in ``hub/jupyter-config/<role>/``, passed to their server in
  ``JUPYTER_CONFIG_PATH``.
- nbgrader's exchange is shared by everyone: ``ANDREA_HUB_EXCHANGE`` (default
  ``/srv/nbgrader/exchange``, world-writable with the sticky bit, as ``scripts/hub.py
  setup`` makes it).
- The course book: ``ANDREA_HUB_BOOK`` (default ``/srv/andrea-book``, a world-readable copy
  of ``_build/html`` that ``scripts/hub.py setup`` makes), served to each person by their
  own server (the ``andrea_lab`` extension) at ``/user/<name>/andrea-book/``, where the
  notebooks' chapter links (``/hub/user-redirect/andrea-book/...``) lead.

Authentication (``ANDREA_HUB_AUTH``): ``pam`` (default: the machine's own passwords) or
``shared-password`` (learners listed log in with ``ANDREA_HUB_PASSWORD``, instructors with
``ANDREA_HUB_INSTRUCTOR_PASSWORD``; for a trial run or a test, never for a class). A real course swaps in its institution's login, e.g.
OAuthenticator (``c.JupyterHub.authenticator_class = "generic-oauth"``) or LTI 1.3 from
the learning platform (``ltiauthenticator``), and keeps the rest.
"""
import os
import sys
from pathlib import Path

c = get_config()  # noqa: F821 (provided by JupyterHub)

HUB = Path(__file__).resolve().parent
VENV_BIN = Path(os.environ.get("ANDREA_HUB_VENV") or sys.prefix) / "bin"
STATE = Path(os.environ.get("ANDREA_HUB_STATE") or "/srv/andrea-hub")
EXCHANGE = os.environ.get("ANDREA_HUB_EXCHANGE") or "/srv/nbgrader/exchange"
BOOK = os.environ.get("ANDREA_HUB_BOOK") or "/srv/andrea-book"


def _names(var: str, default: str = "") -> set[str]:
    return {n.strip() for n in (os.environ.get(var) or default).split(",") if n.strip()}


INSTRUCTORS = _names("ANDREA_HUB_INSTRUCTORS", "instructor")
LEARNERS = _names("ANDREA_HUB_LEARNERS")

# ---- where it listens. Loopback by default: put TLS in front (a reverse proxy) before
# opening it to a class, or set ANDREA_HUB_IP and the certificate options yourself.
c.JupyterHub.ip = os.environ.get("ANDREA_HUB_IP") or "127.0.0.1"
c.JupyterHub.port = int(os.environ.get("ANDREA_HUB_PORT") or 8000)
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(os.environ.get("ANDREA_HUB_API_PORT") or 8081)
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{os.environ.get('ANDREA_HUB_PROXY_API_PORT') or 8001}"
c.ConfigurableHTTPProxy.command = [str(HUB / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.should_start = True

# ---- the hub's own state (its database, cookie secret, proxy token): root's only
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = str(STATE / "jupyterhub.pid")

# ---- who may log in
auth = os.environ.get("ANDREA_HUB_AUTH") or "pam"
if auth == "shared-password":
    c.JupyterHub.authenticator_class = "shared-password"
    c.SharedPasswordAuthenticator.user_password = os.environ["ANDREA_HUB_PASSWORD"]
    if os.environ.get("ANDREA_HUB_INSTRUCTOR_PASSWORD"):  # instructors (the hub's admins) use their own
        c.SharedPasswordAuthenticator.admin_password = os.environ["ANDREA_HUB_INSTRUCTOR_PASSWORD"]
elif auth == "pam":
    c.JupyterHub.authenticator_class = "pam"
else:
    raise ValueError(f"ANDREA_HUB_AUTH={auth!r}: expected 'pam' or 'shared-password'")
c.Authenticator.admin_users = set(INSTRUCTORS)
if LEARNERS:
    c.Authenticator.allowed_users = LEARNERS | INSTRUCTORS
else:
    c.Authenticator.allow_existing_users = True
    c.Authenticator.allowed_users = set(INSTRUCTORS)  # learners: add them on the hub's admin page
# An instructor administers the hub, but may not open a learner's server (the hub's
# admin role would allow it); learners' work reaches instructors through the exchange.
c.JupyterHub.admin_access = False

# ---- each person's JupyterLab, as their own OS user, in their own home
c.Spawner.cmd = [str(VENV_BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.notebook_dir = "~"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.LocalProcessSpawner.shell_cmd = []


def _role_environment(spawner):
    name = spawner.user.name
    role = "instructor" if name in INSTRUCTORS else "learner"
    spawner.environment.update({
        "JUPYTER_CONFIG_PATH": str(HUB / "jupyter-config" / role),
        "ANDREA_EXCHANGE": EXCHANGE,
        "ANDREA_BOOK_DIR": BOOK,  # the course book at /user/<name>/andrea-book/ (andrea_lab)
        "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
    })


c.Spawner.pre_spawn_hook = _role_environment
