"""The work queue: every grader of a class takes its submissions from one table in the
course gradebook itself, ``andrea_grading_queue``, beside nbgrader's tables.

One row per (student, assignment), with the fingerprints that decide whether it is graded
(the submission's files, the course and the grader's options: the resume fingerprint of
:meth:`classroom.record.SubmissionRecord.is_current`) and its state:

- ``todo``: waiting. Every grader puts the class it was given in the queue when it starts
  (an idempotent upsert, :meth:`WorkQueue.enqueue`): a row whose fingerprints are unchanged
  is left as it is, one whose files or course changed goes back to ``todo``. So N identical
  graders can be started at once, and one added later regrades nothing.
- ``claimed``: a grader is grading it. A claim is taken with ``SELECT ... FOR UPDATE SKIP
  LOCKED`` (on PostgreSQL; SQLite, which serves one grading run at a time, takes its
  write lock with ``BEGIN IMMEDIATE``), so two graders never take the same row and none
  waits for another. It holds a lease, renewed while the grader lives
  (:meth:`WorkQueue.renew`); a grader that dies stops renewing, and once its lease has run
  out any grader takes the row over. A grader told to stop gives its claims back at once
  (:meth:`WorkQueue.release`). A submission whose graders were lost ``MAX_ATTEMPTS`` times
  is not tried again (:mod:`.jobs` records it as failed).
- ``done``: graded; its record (``SubmissionRecord.to_dict()``, what the reports read) is
  in the row, its scores in nbgrader's tables, written just before.

Times are the database's clock, so the graders' clocks need not agree. Standard SQLAlchemy
Core; the queue table is created where it is missing.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import OperationalError

from .. import dburl

TODO, CLAIMED, DONE = "todo", "claimed", "done"
MAX_ATTEMPTS = 3  # claims of one submission whose grader was lost, before it is given up
SETUP_LOCK = 0x616E64726561  # the PostgreSQL advisory lock held while a grader sets the gradebook up

metadata = sa.MetaData()
table = sa.Table(
    "andrea_grading_queue", metadata,
    sa.Column("student", sa.String(128), primary_key=True),
    sa.Column("assignment", sa.String(128), primary_key=True),
    sa.Column("digest", sa.String(64), nullable=False),  # of the files handed in
    sa.Column("fingerprint", sa.String(200), nullable=False),  # the course and the grader's options
    sa.Column("state", sa.String(8), nullable=False),
    sa.Column("claimed_by", sa.String(200)),
    sa.Column("claimed_at", sa.Float),
    sa.Column("lease_until", sa.Float),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("queued_at", sa.Float, nullable=False),
    sa.Column("done_at", sa.Float),
    sa.Column("done_by", sa.String(200)),
    sa.Column("out", sa.Text),  # the folder of the grader that graded it (its feedback pages)
    sa.Column("record", sa.Text),  # SubmissionRecord.to_dict(), as JSON
    sa.Index("andrea_grading_queue_state", "fingerprint", "state"),
)
_NOW = {"postgresql": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)",
        "sqlite": "((julianday('now') - 2440587.5) * 86400.0)"}


def grader_id() -> str:
    """This grader, as the queue names it: host, pid and a random tag (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"[:200]


@dataclass(frozen=True)
class Claim:
    student: str
    assignment: str
    digest: str
    attempts: int  # this claim included
    taken_over_from: str | None  # the grader whose lease had run out, if any

    @property
    def key(self) -> tuple[str, str]:
        return self.student, self.assignment


def _is_lock_timeout(exc: OperationalError) -> bool:
    return "lock timeout" in str(getattr(exc, "orig", exc)).lower()


class WorkQueue:
    """The queue of one gradebook as one grader sees it (``url``: already
    :func:`classroom.dburl.normalise`'d). ``lease``: seconds a claim outlives its grader's
    last sign of life."""

    def __init__(self, url: str, *, fingerprint: str, lease: float, out: str = "", grader: str | None = None):
        self.url, self.fingerprint, self.lease, self.out = url, fingerprint, float(lease), str(out)
        self.grader = grader or grader_id()
        if dburl.is_sqlite(url):
            self.engine = dburl.engine(url, connect_args={"timeout": 30})
            sa.event.listen(self.engine, "connect", _sqlite_autocommit)
            sa.event.listen(self.engine, "begin", _sqlite_begin_immediate)
        else:
            self.engine = dburl.engine(url)
        self.dialect = self.engine.dialect.name
        self.now = sa.literal_column(_NOW[self.dialect])
        self.started: float | None = None

    def close(self) -> None:
        self.engine.dispose()

    # ------------------------------------------------------------------ setting up
    @contextmanager
    def setup_lock(self, log=print):
        """Held while a grader creates what the gradebook lacks and puts its class in the
        queue, so that graders starting together do not collide. On PostgreSQL a session
        advisory lock, waited on for at most the connection's ``lock_timeout``, with a
        message naming its holder; it ends with its session, however that ends."""
        if self.dialect != "postgresql":
            yield
            return
        con = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            if not con.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": SETUP_LOCK}).scalar():
                wait = con.execute(sa.text("SHOW lock_timeout")).scalar()
                log(f"note: waiting (at most {wait}) for the gradebook's setup lock, held by {self._holder(con)}")
                try:
                    con.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": SETUP_LOCK})
                except OperationalError as exc:
                    if not _is_lock_timeout(exc):
                        raise
                    raise dburl.GradebookUnavailable(
                        f"waited {wait} for the gradebook's setup lock, still held by {self._holder(con)}; "
                        "another grader is setting the gradebook up: start this one again when it is done "
                        "(a stuck session: SELECT pg_terminate_backend(pid))") from None
            try:
                yield
            finally:
                con.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": SETUP_LOCK})
        finally:
            con.close()

    @staticmethod
    def _holder(con) -> str:
        row = con.execute(sa.text(
            "SELECT a.pid, a.application_name, a.client_addr, a.state, a.backend_start FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
            "AND l.objid = :lo AND l.classid = :hi LIMIT 1"),
            {"lo": SETUP_LOCK & 0xFFFFFFFF, "hi": SETUP_LOCK >> 32}).first()
        if row is None:
            return "a session that has just ended"
        return (f"PostgreSQL session pid {row.pid} ({row.application_name or 'no name'} from "
                f"{row.client_addr or 'a local socket'}, {row.state}, since {row.backend_start:%Y-%m-%d %H:%M:%S})")

    def create(self) -> None:
        """The queue table, where it is missing (after nbgrader's: nbgrader takes a database
        with any table in it for one it has already set up)."""
        metadata.create_all(self.engine, checkfirst=True)
        with self.engine.connect() as con:
            self.started = con.execute(sa.select(self.now)).scalar()

    def enqueue(self, subs, *, force: bool = False) -> None:
        """Put ``subs`` (the intake's submissions) in the queue: new ones as ``todo``; a row
        whose files or fingerprint differ goes back to ``todo``; with ``force`` every row
        this grader finds done before it started does too."""
        if not subs:
            return
        insert = (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(table)
        ex = insert.excluded
        changed = sa.or_(table.c.digest != ex.digest, table.c.fingerprint != ex.fingerprint)
        if force:
            changed = sa.or_(changed, sa.and_(table.c.state == DONE, table.c.done_at < self.started))
        reset = {c: None for c in ("claimed_by", "claimed_at", "lease_until", "done_at", "done_by", "out", "record")}
        stmt = insert.on_conflict_do_update(
            index_elements=[table.c.student, table.c.assignment], where=changed,
            set_={"digest": ex.digest, "fingerprint": ex.fingerprint, "state": TODO, "attempts": 0,
                  "queued_at": ex.queued_at, **reset})
        rows = [{"student": s.student, "assignment": s.assignment, "digest": s.digest(),
                 "fingerprint": self.fingerprint, "state": TODO, "attempts": 0, "queued_at": self.started}
                for s in subs]
        with self.engine.begin() as con:
            con.execute(stmt, rows)

    # ------------------------------------------------------------------ claims
    def _claimable(self):
        return sa.and_(table.c.fingerprint == self.fingerprint,
                       sa.or_(table.c.state == TODO,
                              sa.and_(table.c.state == CLAIMED, table.c.lease_until < self.now)))

    def _key(self, key):
        return sa.and_(table.c.student == key[0], table.c.assignment == key[1])

    def claim(self, exclude=()) -> Claim | None:
        """The next submission for this grader (oldest first), claimed; None if there is none
        to take now. ``exclude``: (student, assignment) pairs this grader cannot grade."""
        q = (sa.select(table.c.student, table.c.assignment, table.c.digest, table.c.state, table.c.claimed_by,
                       table.c.attempts)
             .where(self._claimable())
             .order_by(table.c.queued_at, table.c.student, table.c.assignment).limit(1)
             .with_for_update(skip_locked=True))
        if exclude:
            q = q.where(sa.tuple_(table.c.student, table.c.assignment).not_in(sorted(exclude)))
        with self.engine.begin() as con:
            row = con.execute(q).first()
            if row is None:
                return None
            con.execute(sa.update(table).where(self._key(row)).values(
                state=CLAIMED, claimed_by=self.grader, claimed_at=self.now, lease_until=self.now + self.lease,
                attempts=table.c.attempts + 1))
        return Claim(row.student, row.assignment, row.digest, row.attempts + 1,
                     row.claimed_by if row.state == CLAIMED else None)

    def adopt(self, key, digest: str) -> bool:
        """Claim ``key`` itself, for a result this grader already holds (its resume state),
        if the row is unfinished and nobody holds it."""
        with self.engine.begin() as con:
            n = con.execute(sa.update(table).where(self._key(key), self._claimable(), table.c.digest == digest)
                            .values(state=CLAIMED, claimed_by=self.grader, claimed_at=self.now,
                                    lease_until=self.now + self.lease)).rowcount
        return n == 1

    def renew(self) -> int:
        """Extend the lease of every claim this grader holds; returns how many it holds."""
        with self.engine.begin() as con:
            return con.execute(sa.update(table).where(table.c.claimed_by == self.grader, table.c.state == CLAIMED)
                               .values(lease_until=self.now + self.lease)).rowcount

    def owns(self, key) -> bool:
        with self.engine.connect() as con:
            return con.execute(sa.select(sa.literal(1)).where(
                self._key(key), table.c.claimed_by == self.grader, table.c.state == CLAIMED)).first() is not None

    def done(self, record: dict) -> bool:
        """Mark a claimed submission done with its record; False if this grader no longer
        holds the claim (its lease ran out and another grader took it over)."""
        key = (record["student"], record["assignment"])
        with self.engine.begin() as con:
            n = con.execute(sa.update(table).where(
                self._key(key), table.c.claimed_by == self.grader, table.c.state == CLAIMED,
                table.c.digest == record["digest"], table.c.fingerprint == record["template"]).values(
                state=DONE, done_at=self.now, done_by=self.grader, out=self.out, lease_until=None,
                record=json.dumps(record))).rowcount
        return n == 1

    def release(self, keys=None) -> int:
        """Give claims back (``keys``; default: all of this grader's), for any grader to take
        at once; the attempt is not counted."""
        cond = [table.c.claimed_by == self.grader, table.c.state == CLAIMED]
        if keys is not None:
            keys = list(keys)
            if not keys:
                return 0
            cond.append(sa.tuple_(table.c.student, table.c.assignment).in_(keys))
        with self.engine.begin() as con:
            return con.execute(sa.update(table).where(*cond).values(
                state=TODO, claimed_by=None, claimed_at=None, lease_until=None,
                attempts=sa.case((table.c.attempts > 0, table.c.attempts - 1), else_=0))).rowcount

    # ------------------------------------------------------------------ what the queue holds
    def held_elsewhere(self) -> list[str]:
        """The graders holding claims of this fingerprint other than this one (one per claim)."""
        with self.engine.connect() as con:
            return [r[0] for r in con.execute(sa.select(table.c.claimed_by).where(
                table.c.fingerprint == self.fingerprint, table.c.state == CLAIMED,
                table.c.claimed_by != self.grader))]

    def rows(self, keys) -> dict[tuple[str, str], sa.Row]:
        """The rows of ``keys`` (all columns but the record)."""
        wanted = set(keys)
        cols = [c for c in table.c if c.name != "record"]
        with self.engine.connect() as con:
            return {(r.student, r.assignment): r for r in con.execute(sa.select(*cols))
                    if (r.student, r.assignment) in wanted}

    def records(self, subs) -> list[dict]:
        """The records of ``subs`` (the intake's) graded for these very files with this very
        fingerprint, by any grader."""
        digests = {(s.student, s.assignment): s.digest() for s in subs}
        out = []
        with self.engine.connect() as con:
            for r in con.execute(sa.select(table.c.student, table.c.assignment, table.c.digest, table.c.record)
                                 .where(table.c.state == DONE, table.c.fingerprint == self.fingerprint)):
                if digests.get((r.student, r.assignment)) == r.digest and r.record:
                    out.append(json.loads(r.record))
        return sorted(out, key=lambda rec: (rec["student"], rec["assignment"]))

    def counts(self) -> dict[str, int]:
        """Rows of this fingerprint per state."""
        with self.engine.connect() as con:
            got = dict(con.execute(sa.select(table.c.state, sa.func.count()).where(
                table.c.fingerprint == self.fingerprint).group_by(table.c.state)).all())
        return {s: int(got.get(s, 0)) for s in (TODO, CLAIMED, DONE)}


def _sqlite_autocommit(dbapi_con, _record) -> None:
    dbapi_con.isolation_level = None  # the driver starts no transaction; "begin" below does


def _sqlite_begin_immediate(con) -> None:
    con.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock first: no lost update, no deadlock
