"""The grading records kept in the course gradebook, beside nbgrader's own tables.

nbgrader's gradebook holds the points; what the grader found besides (failed, timed out,
tampering suspected, files refused, untouched, the checks' messages, ...) is in each
submission's record (:class:`classroom.record.SubmissionRecord`). :func:`store` keeps
the latest record of every (student, assignment) in one table of the same database
(``andrea_grading_record``: SQLite or PostgreSQL alike, created on first use, never
touched by nbgrader), so that the reports of any later run -- on this machine or another
that grades into the same gradebook -- describe the whole class: everyone keeps their
real status, not only the learners of the latest batch.
"""
from __future__ import annotations

import json
import time

from nbgrader.api import Gradebook
from sqlalchemy import Column, Float, MetaData, String, Table, Text, delete, insert, select

METADATA = MetaData()
RECORDS = Table(
    "andrea_grading_record", METADATA,
    Column("student", String(128), primary_key=True),
    Column("assignment", String(128), primary_key=True),
    Column("record", Text, nullable=False),  # SubmissionRecord.to_dict() as JSON
    Column("stored", Float, nullable=False),  # seconds since the epoch
)


def store(db_url: str, records: list[dict]) -> int:
    """Keep ``records`` (each replacing the one of its student and assignment); returns
    how many were written."""
    if not records:
        return 0
    now = time.time()
    with Gradebook(db_url) as gb:  # opened as nbgrader opens it (its own tables made if new)
        METADATA.create_all(gb.engine)
        with gb.engine.begin() as con:
            for r in records:
                key = (RECORDS.c.student == r["student"]) & (RECORDS.c.assignment == r["assignment"])
                con.execute(delete(RECORDS).where(key))
                con.execute(insert(RECORDS).values(student=r["student"], assignment=r["assignment"],
                                                   record=json.dumps(r, sort_keys=True), stored=now))
    return len(records)


def load(db_url: str) -> dict[tuple[str, str], dict]:
    """{(student, assignment): record} of every record kept in the gradebook (none yet: {})."""
    with Gradebook(db_url) as gb:
        METADATA.create_all(gb.engine)
        with gb.engine.connect() as con:
            rows = con.execute(select(RECORDS.c.student, RECORDS.c.assignment, RECORDS.c.record)).all()
    found = {}
    for student, assignment, text in rows:
        try:
            record = json.loads(text)
        except ValueError:
            continue
        if isinstance(record, dict):
            found[student, assignment] = record
    return found
