"""A throwaway PostgreSQL server for the tests: ``initdb`` into a fresh folder, ``pg_ctl
start`` on a Unix socket and on loopback TCP (a free port), trust authentication, one
database ``gradebook`` owned by the user ``grader``; stopped and removed at the end.

The one home of this for every test that needs a real PostgreSQL (the Debian package
``postgresql``); :func:`server` skips the test with a clear line where it is missing.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest


def _as_unprivileged(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] + cmd


def pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (d / name).is_file():
            return str(d / name)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class Server:
    sock: Path
    port: int
    base: Path

    @property
    def socket_url(self) -> str:
        """The server over its Unix socket, with the driver named."""
        return f"postgresql+psycopg2://grader@/gradebook?host={self.sock}&port={self.port}"

    def tcp_url(self, password: str | None = None, scheme: str = "postgresql") -> str:
        """``scheme://grader[:password]@127.0.0.1:PORT/gradebook``; trust authentication
        accepts any password (the server never asks for it)."""
        auth = "grader" if password is None else f"grader:{password}"
        return f"{scheme}://{auth}@127.0.0.1:{self.port}/gradebook"

    def psql(self, sql: str) -> str:
        out = subprocess.run([pg_bin("psql") or "psql", "-h", str(self.sock), "-p", str(self.port), "-U", "grader",
                              "-d", "gradebook", "-At", "-c", sql], check=True, capture_output=True, text=True)
        return out.stdout.strip()


@contextmanager
def server():
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL server binaries not installed (Debian package `postgresql`)")
    # pytest's temporary folders are private to root: the server's user could not reach them
    base = Path(tempfile.mkdtemp(prefix="andrea-pg-"))
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    os.chmod(base, 0o777)
    os.chmod(sock, 0o777)
    env = {"PATH": os.environ["PATH"], "HOME": str(base), "LANG": "C.UTF-8"}
    port = _free_port()
    subprocess.run(_as_unprivileged([initdb, "-D", str(data), "-U", "grader", "--auth=trust", "-E", "UTF8"]),
                   check=True, capture_output=True, env=env)
    subprocess.run(_as_unprivileged([pg_ctl, "-D", str(data), "-l", str(base / "log"), "-w", "-o",
                                     f"-k {sock} -p {port} -c listen_addresses=127.0.0.1", "start"]),
                   check=True, capture_output=True, env=env)
    try:
        subprocess.run([pg_bin("createdb") or "createdb", "-h", str(sock), "-p", str(port), "-U", "grader",
                        "gradebook"], check=True, capture_output=True)
        yield Server(sock, port, base)
    finally:
        subprocess.run(_as_unprivileged([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]),
                       capture_output=True, env=env)
        shutil.rmtree(base, ignore_errors=True)


def queue_rows(url: str) -> dict:
    """Every row of the work queue in the gradebook at ``url`` (PostgreSQL or SQLite),
    record included, by (student, assignment): what the queue tests read back."""
    import sqlalchemy as sa

    from classroom.orchestration import workqueue

    eng = sa.create_engine(url)
    try:
        with eng.connect() as con:
            return {(r.student, r.assignment): r for r in con.execute(sa.select(workqueue.table))}
    finally:
        eng.dispose()
