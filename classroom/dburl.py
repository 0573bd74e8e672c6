"""The course gradebook's URL: read, made to work with the installed driver, shown without
its password, and tried once before any grading.

- :func:`redact`: the one way a URL (or any text that may hold one, such as an exception
  message) is printed or written: every password replaced by ``***``. The grader's
  output, ``report.txt``, its logs, its state and its error messages all go through it.
- :func:`with_driver`: ``postgresql://`` (and ``postgres://``) names the installed driver,
  psycopg2 (SQLAlchemy 2 would pick psycopg 3, which is not installed: ``No module named
  'psycopg'``); a URL naming a driver, ``postgresql+psycopg2://``, keeps it. The one home of
  this rule: the grader applies it (:func:`normalise`), and so does the course's
  ``nbgrader_config.py`` for nbgrader itself (the Formgrader, ``nbgrader`` commands), which
  loads this file by its path where ``classroom`` is not importable (an instructor's server
  on the hub): this module's top level needs the standard library only.
- :func:`normalise`: :func:`with_driver`, and every
  connection gets bounds on each wait, unless the URL sets them itself (libpq's own
  parameters, e.g. ``?connect_timeout=10`` or ``?options=-c%20lock_timeout%3D5s``):

  ========================================  ==========================================
  ``connect_timeout=4``                      an unreachable server fails in seconds
  ``keepalives``, ``tcp_user_timeout``       a server that vanished is noticed by the
                                             grader within about a minute
  ``-c tcp_keepalives_*``                    ... and a grader that vanished by the server,
                                             which then ends its transaction and its locks
  ``-c lock_timeout=30s``                    no lock is waited on for longer
  ``-c idle_in_transaction_session_timeout`` a grader stopped inside a transaction holds
                                             its locks at most a minute
  ========================================  ==========================================
- :func:`check`: the URL parsed and connected to, or :class:`GradebookUnavailable` with
  one line saying why (password redacted).

Only PostgreSQL (several graders at once: :mod:`classroom.orchestration.workqueue`) and
SQLite (one grading run at a time) gradebooks are supported.
"""
from __future__ import annotations

import os
import re
from urllib.parse import quote, unquote

REDACTED = "***"

# scheme://user:PASSWORD@ -- up to the last "@" of the word, so that a password with an
# unencoded "@" is hidden whole (SQLAlchemy itself would cut it at the first one)
_CREDENTIALS = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/:@'\"]*:)(?P<secret>[^\s'\"]*)@")
# password=... in a query string or a libpq keyword/value string
_PARAM = re.compile(r"(?P<head>\b(?:password|passwd|sslpassword)\s*=\s*)(?P<secret>'[^']*'|[^\s&'\"]*)", re.I)

DEFAULT_LEASE = 60.0  # seconds a claim in the work queue outlives its grader's last renewal
PG_DRIVER = "postgresql+psycopg2"
_PG_SCHEMES = ("postgresql", "postgres")
CONNECT_TIMEOUT = 4  # seconds
LOCK_TIMEOUT = "30s"
IDLE_IN_TRANSACTION = "60s"
DEFAULT_PARAMS = {"connect_timeout": str(CONNECT_TIMEOUT), "keepalives": "1", "keepalives_idle": "30",
                  "keepalives_interval": "10", "keepalives_count": "3", "tcp_user_timeout": "60000",
                  "application_name": "andrea-grader"}
SERVER_SETTINGS = {"lock_timeout": LOCK_TIMEOUT, "idle_in_transaction_session_timeout": IDLE_IN_TRANSACTION,
                   "tcp_keepalives_idle": "30", "tcp_keepalives_interval": "10", "tcp_keepalives_count": "3"}


class GradebookUnavailable(Exception):
    """The gradebook cannot be used; the message is one line, its password redacted."""


def redact(text, url: str | None = None) -> str:
    """``text`` (a URL, or any text that may contain one) with every password replaced by
    ``***``; ``url``: the URL whose password may also appear in ``text`` on its own."""
    text = str(text)
    secrets = set()
    for source in (text, url or ""):
        for m in _CREDENTIALS.finditer(source):
            secrets.add(m.group("secret"))
        for m in _PARAM.finditer(source):
            secrets.add(m.group("secret").strip("'"))
    text = _CREDENTIALS.sub(lambda m: m.group("head") + REDACTED + "@", text)
    text = _PARAM.sub(lambda m: m.group("head") + REDACTED, text)
    for s in sorted(secrets, key=len, reverse=True):
        if len(s) >= 3 and s != REDACTED:  # the bare password, e.g. repeated by a driver
            for form in {s, unquote(s), quote(unquote(s), safe="")}:
                text = text.replace(form, REDACTED)
    return text


def default_url() -> str:
    """The course's own gradebook: ``$NBGRADER_DB_URL``, else ``gradebook.db`` in the checkout."""
    from .course.snapshot import CODE_ROOT  # here: the command line imports this module before anything
    return os.environ.get("NBGRADER_DB_URL") or f"sqlite:///{CODE_ROOT / 'gradebook.db'}"


def is_postgresql(url: str) -> bool:
    return url.split("://", 1)[0].lower().split("+")[0] in _PG_SCHEMES


def is_sqlite(url: str) -> bool:
    return url.split("://", 1)[0].lower().startswith("sqlite")


def sqlite_path(url: str) -> str | None:
    """The file of a SQLite URL (None for an in-memory database)."""
    from sqlalchemy.engine import make_url
    return make_url(url).database or None


def with_driver(url: str) -> str:
    """``url`` with the installed PostgreSQL driver named: ``postgresql://`` and
    ``postgres://`` become ``postgresql+psycopg2://``; the rest of the URL, and any other URL
    (one naming its driver, SQLite), is left exactly as it is."""
    url = str(url).strip()
    scheme, sep, rest = url.partition("://")
    if sep and scheme.lower() in _PG_SCHEMES:
        return f"{PG_DRIVER}://{rest}"
    return url


def normalise(url: str) -> str:
    """The URL the grader connects with: see the module docstring. Raises
    GradebookUnavailable for a URL that is not one."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError
    url = with_driver(url)
    try:
        u = make_url(url)
    except ArgumentError:
        # not echoed: whatever it is, it may hold a password where no pattern finds it
        raise GradebookUnavailable("not a database URL (expected e.g. postgresql://user@host/db or "
                                   "sqlite:////path/to/gradebook.db)") from None
    scheme = u.drivername.lower()
    if scheme.startswith("sqlite"):
        return url
    if scheme.split("+")[0] not in _PG_SCHEMES:
        raise GradebookUnavailable(f"{redact(url)}: the grader works with PostgreSQL (postgresql://...) or "
                                   f"SQLite (sqlite:///...) gradebooks, not {u.drivername!r}")
    query = dict(u.query)
    for k, v in DEFAULT_PARAMS.items():
        query.setdefault(k, v)
    options = str(query.get("options", ""))
    extra = [f"-c {k}={v}" for k, v in SERVER_SETTINGS.items() if k not in options]
    if extra:
        query["options"] = " ".join([options, *extra]).strip()
    return u.set(query=query).render_as_string(hide_password=False)  # its driver: with_driver's


def shown(url: str) -> str:
    """``url`` as the grader shows it: redacted, without the settings :func:`normalise` added."""
    from sqlalchemy.engine import make_url
    try:
        u = make_url(str(url))
    except Exception:  # noqa: BLE001 - not a URL: shown redacted as it is
        return redact(url)
    if not is_postgresql(str(url)):
        return redact(url)
    query = {k: v for k, v in u.query.items() if DEFAULT_PARAMS.get(k) != v}
    options = " ".join(f"-c {k}={v}" for k, v in SERVER_SETTINGS.items())
    if "options" in query and str(query["options"]).strip().endswith(options):
        query["options"] = str(query["options"]).strip()[:-len(options)].strip()
        if not query["options"]:
            del query["options"]
    return redact(u.set(query=query).render_as_string(hide_password=False), url)


def reason(exc: BaseException, url: str | None = None, limit: int = 400) -> str:
    """Why a database call failed: the driver's own message, on one line, redacted."""
    orig = getattr(exc, "orig", None) or exc
    text = " ".join(str(orig).split())[:limit]
    if isinstance(exc, ModuleNotFoundError):
        text = f"its database driver is not installed ({text})"
    return redact(text or type(exc).__name__, url)


def engine(url: str, **kwargs):
    """A SQLAlchemy engine for a URL already :func:`normalise`'d."""
    import sqlalchemy
    return sqlalchemy.create_engine(url, pool_pre_ping=True, **kwargs)


def check(url: str) -> str:
    """Parse ``url``, connect to it and run one query; returns the :func:`normalise`'d URL.
    Raises GradebookUnavailable with one line (password redacted) if any step fails, in
    at most about ``CONNECT_TIMEOUT`` seconds for an unreachable server."""
    import sqlalchemy
    normal = normalise(url)
    path = sqlite_path(normal) if is_sqlite(normal) else None
    if path and not os.path.exists(path):
        # a gradebook still to be made: its folder must take it; nothing is created yet
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise GradebookUnavailable(f"cannot use the gradebook {redact(url)}: its folder {folder} does not exist")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise GradebookUnavailable(f"cannot use the gradebook {redact(url)}: this user may not write in {folder}")
        return normal
    try:
        eng = engine(normal)
    except Exception as exc:  # noqa: BLE001 - an unknown driver, a missing module: one line
        raise GradebookUnavailable(f"cannot use the gradebook {redact(url)}: {reason(exc, url)}") from None
    try:
        with eng.connect() as con:
            con.execute(sqlalchemy.text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - refused, unknown host, bad password, unwritable file
        hint = ""
        if is_sqlite(normal):
            hint = " (does its folder exist, and may this user write there?)"
        raise GradebookUnavailable(f"cannot connect to the gradebook {redact(url)}: "
                                   f"{reason(exc, url)}{hint}") from None
    finally:
        eng.dispose()
    return normal
