"""The work queue in the gradebook, and what sharing one gradebook needs, against a real
PostgreSQL (``tests/pg_server.py``) and SQLite:

- claims: concurrent claimers take every row exactly once; a row locked by a grader lost
  mid-transaction is skipped, not waited for; a lease that runs out is taken over (the
  attempt counted), a released claim is taken at once (not counted); a claim is marked
  done only by its holder; a changed submission or course goes back to the queue; a
  submission whose graders were lost ``MAX_ATTEMPTS`` times is given up;
- waits are bounded: the setup lock held by a stuck session fails a second grader after
  ``lock_timeout`` with a message naming the holder; a session stopped inside a
  transaction loses its locks after ``idle_in_transaction_session_timeout``;
- the gradebook URL: the README's ``postgresql://user@host/db`` works with the installed
  driver; a bad URL, an unknown driver, a refused port and a server that never answers
  each fail the command in one line, in seconds, before any work, password redacted;
- passwords redacted in every form a URL or an error can carry one;
- two runs on one machine may not share sandbox uids or a SQLite gradebook.

Three grading commands sharing one class, one killed, one added, one stopped:
tests/test_classroom_queue_graders.py.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import quote

import pytest
import sqlalchemy as sa

import pg_server  # noqa: E402

from classroom import dburl  # noqa: E402
from classroom.intake.submission import Submission  # noqa: E402
from classroom.orchestration import locks, workqueue  # noqa: E402
from classroom.orchestration.workqueue import DONE, TODO, WorkQueue  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SECRET = "pa:ss@w/rd%40-7Q"  # every character that tends to slip through a redaction
SECRET_IN_URL = quote(SECRET, safe="")  # as a URL must carry it


@pytest.fixture(scope="module")
def pg():
    with pg_server.server() as server:
        yield server


@pytest.fixture()
def pg_url(pg):
    """A clean queue table for each test, the README's form of URL, normalised."""
    pg.psql("DROP TABLE IF EXISTS andrea_grading_queue")
    return dburl.normalise(pg.tcp_url())


def _subs(n: int, tag: str = "") -> list[Submission]:
    return [Submission(f"learner{i:03d}", "03_gelu", files={"gelu.ipynb": f"{i}{tag}".encode()}) for i in range(n)]


def _queue(url: str, lease: float = 30.0, fingerprint: str = "fp") -> WorkQueue:
    q = WorkQueue(url, fingerprint=fingerprint, lease=lease)
    q.create()
    return q


_state = pg_server.queue_rows


# --------------------------------------------------------------------------- claims
@pytest.mark.parametrize("kind", ["postgresql", "sqlite"])
def test_concurrent_claimers_take_every_row_exactly_once(kind, pg_url, tmp_path):
    url = pg_url if kind == "postgresql" else f"sqlite:///{tmp_path / 'g.db'}"
    subs = _subs(120)
    first = _queue(url)
    first.enqueue(subs)
    first.enqueue(subs)  # idempotent: every grader enqueues the class it was given
    taken: dict[str, list] = {}
    start = threading.Barrier(4)

    def claimer(name):
        q = _queue(url)
        got = taken.setdefault(name, [])
        start.wait()
        while (c := q.claim()) is not None:
            got.append(c.key)
            q.done({"student": c.student, "assignment": c.assignment, "digest": c.digest, "template": "fp"})
        q.close()

    threads = [threading.Thread(target=claimer, args=(f"g{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    every = [k for got in taken.values() for k in got]
    assert sorted(every) == sorted((s.student, s.assignment) for s in subs)  # each once, none lost
    # with PostgreSQL they really run side by side (SKIP LOCKED); SQLite lets one writer in at a
    # time and its busy wait may let one claimer drain the queue: a run holds a SQLite gradebook
    # alone anyway (classroom.orchestration.locks), so there only exactly-once counts
    if kind == "postgresql":
        assert sum(len(got) > 0 for got in taken.values()) >= 2, {k: len(v) for k, v in taken.items()}
    rows = _state(url)
    assert {r.state for r in rows.values()} == {DONE} and {r.attempts for r in rows.values()} == {1}


def test_a_row_locked_by_a_lost_grader_is_skipped_not_waited_for(pg_url):
    q = _queue(pg_url)
    q.enqueue(_subs(3))
    stuck = sa.create_engine(pg_url).connect()
    tx = stuck.begin()  # a grader stopped in the middle of taking learner000
    stuck.execute(sa.text("SELECT 1 FROM andrea_grading_queue WHERE student = 'learner000' FOR UPDATE"))
    t0 = time.monotonic()
    got = [q.claim().student, q.claim().student]
    assert got == ["learner001", "learner002"] and time.monotonic() - t0 < 2
    assert q.claim() is None  # the locked row is skipped, never waited on
    tx.rollback()
    stuck.close()
    assert q.claim().student == "learner000"


def test_a_lease_that_runs_out_is_taken_over(pg_url):
    lost, other = _queue(pg_url, lease=1.0), _queue(pg_url, lease=30.0)
    lost.enqueue(_subs(1))
    c = lost.claim()
    assert other.claim() is None and other.held_elsewhere() == [lost.grader]
    time.sleep(1.5)  # the lost grader renews nothing
    again = other.claim()
    assert again.key == c.key and again.attempts == 2 and again.taken_over_from == lost.grader
    # the lost grader, back, may not mark it done: the claim is no longer its own
    assert not lost.owns(c.key)
    assert not lost.done({"student": c.student, "assignment": c.assignment, "digest": c.digest, "template": "fp"})
    assert other.done({"student": c.student, "assignment": c.assignment, "digest": c.digest, "template": "fp"})
    assert _state(pg_url)[c.key].done_by == other.grader


def test_renewed_claims_are_kept_and_released_ones_taken_at_once(pg_url):
    a, b = _queue(pg_url, lease=1.0), _queue(pg_url, lease=1.0)
    a.enqueue(_subs(2))
    c1, c2 = a.claim(), a.claim()
    for _ in range(4):
        time.sleep(0.4)
        assert a.renew() == 2
    assert b.claim() is None  # 1.6 s after claiming, the 1 s leases still hold
    assert a.release([c1.key]) == 1
    got = b.claim()
    assert got.key == c1.key and got.attempts == 1 and got.taken_over_from is None  # a release is not a loss
    assert a.release() == 1 and b.claim().key == c2.key


def test_changed_files_or_course_go_back_to_the_queue(pg_url):
    q = _queue(pg_url)
    subs = _subs(3)
    q.enqueue(subs)
    while (c := q.claim()) is not None:
        q.done({"student": c.student, "assignment": c.assignment, "digest": c.digest, "template": "fp"})
    changed = [subs[0], Submission(subs[1].student, subs[1].assignment, files={"gelu.ipynb": b"new"}), subs[2]]
    q.enqueue(changed)
    rows = _state(pg_url)
    assert [rows[(s.student, s.assignment)].state for s in subs] == [DONE, TODO, DONE]
    assert q.claim().student == subs[1].student
    other_course = _queue(pg_url, fingerprint="fp2")
    other_course.enqueue(changed)
    assert {r.state for r in _state(pg_url).values()} == {TODO}
    assert q.claim() is None  # a grader of the old course takes nothing of the new
    # --force: every row done before this grader started is graded again
    forced = _queue(pg_url, fingerprint="fp2")
    while (c := forced.claim()) is not None:
        forced.done({"student": c.student, "assignment": c.assignment, "digest": c.digest, "template": "fp2"})
    time.sleep(0.05)
    again = _queue(pg_url, fingerprint="fp2")
    again.enqueue(changed, force=True)
    assert {r.state for r in _state(pg_url).values()} == {TODO}


def test_a_submission_whose_graders_keep_dying_is_given_up(pg_url, tmp_path):
    from classroom.orchestration.jobs import Jobs
    from classroom.reporting.merge import Writer

    subs = _subs(1)
    for _ in range(workqueue.MAX_ATTEMPTS):  # graders lost with it, one after the other
        q = _queue(pg_url, lease=0.2)
        q.enqueue(subs)
        assert q.claim() is not None
        time.sleep(0.3)
    q = _queue(pg_url)
    jobs = Jobs(q, subs, Writer(pg_url), tmp_path, "fp", log=lambda *a: None)
    assert jobs.next() is None  # not tried again ...
    (rec,) = q.records(subs)
    assert rec["status"] == "failed" and "lost 3 times" in rec["reason"]  # ... but reported


# --------------------------------------------------------------------------- bounded waits
def _with_options(url: str, **settings) -> str:
    u = sa.engine.make_url(url)
    options = " ".join(f"-c {k}={v}" for k, v in settings.items())
    return u.update_query_dict({"options": f"{options} {u.query.get('options', '')}".strip()}) \
        .render_as_string(hide_password=False)


def test_the_setup_lock_is_waited_on_for_a_bounded_time_with_a_message(pg):
    url = dburl.normalise(_with_options(pg.tcp_url(), lock_timeout="2s"))
    holder, waiter = _queue(url), _queue(url)
    lines = []
    with holder.setup_lock():
        t0 = time.monotonic()
        with pytest.raises(dburl.GradebookUnavailable) as err:
            with waiter.setup_lock(log=lines.append):
                pass
        waited = time.monotonic() - t0
    assert 1.5 < waited < 6, waited
    assert "waiting (at most 2s)" in lines[0] and "andrea-grader" in lines[0], lines
    assert "waited 2s for the gradebook's setup lock" in str(err.value) and "pg_terminate_backend" in str(err.value)
    with waiter.setup_lock():  # free again once its holder let go
        pass


def test_a_grader_stopped_inside_a_transaction_loses_its_locks(pg):
    url = dburl.normalise(_with_options(pg.tcp_url(), idle_in_transaction_session_timeout="1s"))
    pg.psql("DROP TABLE IF EXISTS andrea_grading_queue")
    q = _queue(url)
    q.enqueue(_subs(1))
    stuck = sa.create_engine(url).connect()
    stuck.begin()
    stuck.execute(sa.text("SELECT 1 FROM andrea_grading_queue FOR UPDATE"))  # ... and then nothing
    assert q.claim() is None
    time.sleep(2.5)
    assert q.claim() is not None  # the server ended the stopped session, and its lock
    with pytest.raises(sa.exc.OperationalError):
        stuck.execute(sa.text("SELECT 1"))
    stuck.close()


def test_lock_waits_are_bounded_by_default(pg):
    url = dburl.normalise(pg.tcp_url())
    eng = sa.create_engine(url)
    with eng.connect() as con:
        settings = {k: con.execute(sa.text(f"SHOW {k}")).scalar()
                    for k in ("lock_timeout", "idle_in_transaction_session_timeout", "tcp_keepalives_idle")}
        app = con.execute(sa.text("SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()")).scalar()
    eng.dispose()
    assert settings == {"lock_timeout": "30s", "idle_in_transaction_session_timeout": "1min",
                        "tcp_keepalives_idle": "30"}, settings
    assert app == "andrea-grader"


# --------------------------------------------------------------------------- the URL
def test_the_readme_url_form_works_with_the_installed_driver(pg):
    for url in (pg.tcp_url(), pg.tcp_url(scheme="postgres"), pg.tcp_url(password=SECRET.replace("@", "%40")),
                f"postgresql://grader@/gradebook?host={pg.sock}&port={pg.port}"):
        normal = dburl.check(url)
        assert normal.startswith("postgresql+psycopg2://"), normal
    # the grader's own reading of it, as nbgrader makes it
    from nbgrader.api import Gradebook
    with Gradebook(dburl.normalise(pg.tcp_url())) as gb:
        assert gb.db.execute(sa.text("SELECT 1")).scalar() == 1


def _silent_server():
    """A TCP port that accepts connections and never says a word."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    return s


@pytest.mark.parametrize("case", ["not a URL", "unknown driver", "other database", "refused", "silent server",
                                  "no such database", "sqlite folder missing"])
def test_a_bad_gradebook_fails_the_command_at_once_in_one_line(case, pg, tmp_path):
    silent = _silent_server()
    free = pg_server._free_port()
    url = {"not a URL": f"gradebook:{SECRET_IN_URL}",
           "unknown driver": f"postgresql+psycopg://grader:{SECRET_IN_URL}@127.0.0.1:{pg.port}/gradebook",
           "other database": f"mysql://grader:{SECRET_IN_URL}@127.0.0.1/gradebook",
           "refused": f"postgresql://grader:{SECRET_IN_URL}@127.0.0.1:{free}/gradebook",
           "silent server": f"postgresql://grader:{SECRET_IN_URL}@127.0.0.1:{silent.getsockname()[1]}/gradebook",
           "no such database": f"postgresql://grader:{SECRET_IN_URL}@127.0.0.1:{pg.port}/nosuchdb",
           "sqlite folder missing": f"sqlite:///{tmp_path}/missing/{SECRET_IN_URL}/g.db"}[case]
    (tmp_path / "subs").mkdir()
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "classroom.grade", str(tmp_path / "subs"), "--db", url,
                        "--out", str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    silent.close()
    assert r.returncode == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --db: ") and not r.stdout, r.stderr
    assert "Traceback" not in r.stderr
    secret_parts = [SECRET, SECRET_IN_URL, "w/rd", "w%2Frd"]
    if case != "sqlite folder missing":  # a SQLite path is a path, not a secret
        assert not any(p in r.stderr for p in secret_parts), r.stderr
    assert not (tmp_path / "out").exists()  # before any work
    assert took < dburl.CONNECT_TIMEOUT + 6, took  # the import of the command line included
    why = {"not a URL": "not a database URL", "unknown driver": "No module named 'psycopg'",
           "other database": "PostgreSQL (postgresql://...) or SQLite", "refused": "Connection refused",
           "silent server": "timeout expired", "no such database": 'database "nosuchdb" does not exist',
           "sqlite folder missing": "does not exist"}[case]
    assert why in lines[0], lines[0]


@pytest.mark.parametrize("text", [
    f"postgresql://grader:{SECRET}@db.example:5432/gradebook",
    f"postgresql+psycopg2://grader:{SECRET.replace('@', '%40').replace('/', '%2F')}@db/gradebook?sslmode=require",
    f"postgresql://grader@db/gradebook?password={SECRET.replace('@', '%40').replace('/', '%2F')}&sslmode=require",
    f"host=db user=grader password='{SECRET}' dbname=gradebook",
    f"could not connect with 'postgres://grader:{SECRET}@db/gradebook': refused",
])
def test_passwords_are_redacted_in_every_form(text):
    shown = dburl.redact(text)
    for part in (SECRET, SECRET.replace("@", "%40"), "w/rd", "w%2Frd", "7Q"):
        assert part not in shown, shown
    assert "***" in shown and ("grader" in shown)


def test_the_password_is_redacted_where_a_driver_repeats_it():
    url = "postgresql://grader:hunter2hunter2@db/gradebook"
    assert dburl.redact('FATAL: password "hunter2hunter2" rejected', url) == 'FATAL: password "***" rejected'


def test_urls_are_shown_without_the_graders_own_settings():
    normal = dburl.normalise(f"postgresql://grader:{SECRET.replace('@', '%40')}@db/gradebook?sslmode=require")
    assert "connect_timeout=4" in normal and "lock_timeout" in normal
    assert dburl.shown(normal) == "postgresql+psycopg2://grader:***@db/gradebook?sslmode=require"
    assert dburl.shown("sqlite:////srv/course/gradebook.db") == "sqlite:////srv/course/gradebook.db"


# --------------------------------------------------------------------------- one machine
def test_two_runs_may_not_share_sandbox_uids():
    base = 47000
    with ExitStack() as first:
        locks.hold_uids(first, base, 2)
        # the kernels' uid 47001; the answer servers' 47001 (46501 + 500); a kernel at 47500
        for other, workers in ((base + 1, 1), (base - 499, 1), (base + 500, 1)):
            with ExitStack() as second, pytest.raises(locks.InUse) as err:
                locks.hold_uids(second, other, workers)
            assert "in use by another grading run on this machine" in str(err.value)
            assert f"pid {os.getpid()}" in str(err.value) and "--uid-base" in str(err.value)
        with ExitStack() as apart:
            locks.hold_uids(apart, base + 1000, 2)  # a range of its own
    with ExitStack() as again:
        locks.hold_uids(again, base, 2)  # free once the first run ended


def test_a_sqlite_gradebook_serves_one_run_at_a_time(tmp_path):
    db = tmp_path / "g.db"
    with ExitStack() as first:
        locks.hold_sqlite(first, str(db), "sqlite:///g.db")
        with ExitStack() as second, pytest.raises(locks.InUse) as err:
            locks.hold_sqlite(second, str(tmp_path / "." / "g.db"), "sqlite:///g.db")
        assert "SQLite serves one grading run at a time" in str(err.value)
    with ExitStack() as again:
        locks.hold_sqlite(again, str(db), "sqlite:///g.db")


def test_a_lock_ends_with_the_process_that_holds_it(tmp_path):
    code = ("import time; from contextlib import ExitStack; from classroom.orchestration import locks\n"
            "s = ExitStack(); locks.hold_uids(s, 48000, 1); print('held', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        with ExitStack() as s, pytest.raises(locks.InUse):
            locks.hold_uids(s, 48000, 1)
    finally:
        proc.kill()
        proc.wait()
    with ExitStack() as s:
        locks.hold_uids(s, 48000, 1)
