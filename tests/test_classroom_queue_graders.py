"""Several grading commands share one class through the work queue of one real PostgreSQL
gradebook, as the pods of the grading Job do (each its own process group, sandbox uids
and output folder; ``--workers 1`` each, this machine being small):

1. three graders start together; a fourth is added once the first claims are taken; the
   one that holds the slow submission is killed with SIGKILL to its process group a few
   seconds into it; then one of the others of the first three is stopped with SIGTERM (to
   its process group, as tini -g hands it on) while it holds a claim (two slower
   submissions at the end of the queue keep the graders busy until the added one is up);
2. while they run, the gradebook already holds every submission marked done in the queue
   (an instructor sees progress as it happens); a grader started with the uid range of a
   running one is refused at once;
3. in the end: every submission graded exactly once (one record, in one grader's state,
   none by the killed or the stopped one for what they held); the killed one's claim
   taken over only after its lease ran out, the stopped one's given back at once; the
   stopped grader gone within seconds with exit code 143; the gradebook equal, cell by
   cell, to one grader's run alone (no queue; two workers) with no duplicate row; the added
   grader joined mid-run: it took work, or found the class partly graded and graded none
   of that again (on a loaded machine its start-up can outlast the work); no grader did more than twice its fair share of what was completed
   while it ran (plus one submission: work comes whole); the gradebook password nowhere in
   any output, file or queue record; no sandbox process left.

The figures (wall times, the takeover delay, the stop time, each grader's share) are
printed (``pytest -s``).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import sqlalchemy as sa

import pg_server  # noqa: E402
from grading_submissions import write_class  # noqa: E402
from hostile.submissions import GELU, notebook_with  # noqa: E402

from classroom import dburl  # noqa: E402
from classroom.isolation import uids  # noqa: E402
from classroom.orchestration import workqueue  # noqa: E402
from classroom.reporting import merge  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

NORMAL = ["block_post_norm", "block_solution", "gelu_erf", "gelu_solution", "gelu_untouched",
          "ln_solution", "ln_unbiased", "mlp_solution", "mlp_transposed"]
SLOW = "aaa_slow"  # first in the queue's order: one of the first three graders takes it first
SLOW_SECONDS = 12  # in its answer cell: once in its kernel, once in the independent check
LATE = {"zzz_late1": 5, "zzz_late2": 5}  # last in the queue's order: seconds of sleep each
LEASE = 10.0
SECRET = "gr@der/s3cret:pw"
TABLES = ("student", "submitted_assignment", "submitted_notebook", "grade", "comment")


def _write_class(dest: Path) -> list[tuple[str, str]]:
    keys = write_class(dest, list(NORMAL))
    released = json.loads((ROOT / "exercises" / "03_gelu" / "gelu.ipynb").read_text())
    for name, seconds in {SLOW: SLOW_SECONDS, **LATE}.items():
        path = dest / name / "03_gelu" / "gelu.ipynb"
        path.parent.mkdir(parents=True)
        path.write_text(notebook_with(released, GELU + f"import time\ntime.sleep({seconds})\n"))
        keys.append((name, "03_gelu"))
    return sorted(keys)


def _counts(url: str) -> dict[str, int]:
    eng = sa.create_engine(url)
    with eng.connect() as con:
        got = {t: con.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar() for t in TABLES}
    eng.dispose()
    return got


class Grader:
    def __init__(self, name: str, index: int, subs: Path, url: str, tmp: Path):
        self.name, self.index = name, index
        self.out = tmp / name
        self.log = tmp / f"{name}.log"
        self.uid_base = uids.UID_BASE + 1000 * index
        self.started = time.time()
        with open(self.log, "w") as f:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "classroom.grade", str(subs), "--workers", "1", "--db", url,
                 "--out", str(self.out), "--lease", str(LEASE), "--uid-base", str(self.uid_base), "--no-progress"],
                cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)  # a pod: its own group
        self.ended: float | None = None
        self.how = "ran to the end"

    def owns(self, claimed_by: str | None) -> bool:
        return bool(claimed_by) and claimed_by.split(":")[1] == str(self.proc.pid)

    def signal(self, sig: int, how: str) -> None:
        os.killpg(self.proc.pid, sig)
        self.ended, self.how = time.time(), how

    def text(self) -> str:
        return self.log.read_text(errors="replace")


_rows = pg_server.queue_rows


def _comm(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _left_in_ranges(graders) -> list[str]:
    ranges = [set(range(g.uid_base, g.uid_base + uids.PROBE_UID_OFFSET + 1)) for g in graders]
    left = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                uid = os.stat(f"/proc/{d}").st_uid
            except OSError:
                continue
            if any(uid in r for r in ranges) and _comm(d) != "postgres":
                left.append(d)  # (the test's PostgreSQL runs as nobody, 65534: in a range here)
    return left


@pytest.fixture(scope="module")
def pg():
    with pg_server.server() as server:
        yield server


@pytest.fixture(scope="module")
def shared(pg, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("queue")
    subs = tmp / "submitted"
    keys = _write_class(subs)
    url = pg.tcp_url(password=quote(SECRET, safe=""))
    plain = dburl.normalise(url)

    # the reference: one grader alone, with a SQLite gradebook (no queue)
    t0 = time.monotonic()
    ref = subprocess.run([sys.executable, "-m", "classroom.grade", str(subs), "--workers", "2", "--out",
                          str(tmp / "reference"), "--db", f"sqlite:///{tmp / 'reference.db'}", "--no-progress"],
                         cwd=ROOT, capture_output=True, text=True, timeout=1800)
    alone_s = time.monotonic() - t0
    assert ref.returncode == 0, ref.stdout[-3000:] + ref.stderr[-3000:]

    t0 = time.monotonic()
    graders = [Grader(f"g{k}", k, subs, url, tmp) for k in (1, 2, 3)]
    events: dict = {"progress_seen": None}
    killed = stopped = added = refused = None
    deadline = time.monotonic() + 1500
    try:
        while time.monotonic() < deadline:
            time.sleep(0.25)
            try:
                rows = _rows(plain)
            except sa.exc.SQLAlchemyError:
                continue  # the table is not there yet
            alive = [g for g in graders if g.proc.poll() is None and g.ended is None]
            done = [k for k, r in rows.items() if r.state == workqueue.DONE]
            if refused is None and rows:  # g1 is past its locks: a grader with g1's uids is refused
                t1 = time.monotonic()
                refused = subprocess.run(
                    [sys.executable, "-m", "classroom.grade", str(subs), "--workers", "1", "--db", url, "--out",
                     str(tmp / "refused"), "--uid-base", str(graders[0].uid_base), "--no-progress"],
                    cwd=ROOT, capture_output=True, text=True, timeout=120)
                events["refused_s"] = time.monotonic() - t1
            if events["progress_seen"] is None and len(done) >= 2 and len(alive) >= 2:
                # progress as it happens: what the queue says is done is in the gradebook already
                events["progress_seen"] = (len(done), _counts(plain)["submitted_assignment"], len(alive))
            if added is None and any(r.state == workqueue.CLAIMED for r in rows.values()):
                graders.append(Grader("g4", 4, subs, url, tmp))  # added mid-run
                added = graders[-1]
            if added is not None and "added_claimed" not in events:
                took = [k for k, r in rows.items() if added.owns(r.claimed_by) or added.owns(r.done_by)]
                if took:
                    events["added_claimed"] = took[0]
            slow = rows.get((SLOW, "03_gelu"))
            if killed is None and slow is not None and slow.state == workqueue.CLAIMED:
                holder = next((g for g in graders[:3] if g.owns(slow.claimed_by)), None)
                if holder is not None and time.time() - slow.claimed_at > 3:
                    events["killed_claimed_at"] = slow.claimed_at
                    holder.signal(signal.SIGKILL, "killed (SIGKILL)")
                    killed = holder
                    events["killed_claim"] = slow.claimed_by
                    holder.proc.wait(timeout=60)  # dead: the lease it last renewed is the one it leaves
                    events["killed_lease_until"] = _rows(plain)[(SLOW, "03_gelu")].lease_until
            if killed is not None and stopped is None:
                # stop one of the others while it grades
                for g in graders[:3]:
                    mine = [(k, r) for k, r in rows.items() if r.state == workqueue.CLAIMED and g.owns(r.claimed_by)]
                    if g is not killed and mine and time.time() - mine[0][1].claimed_at > 1:
                        events["stopped_key"] = mine[0][0]
                        g.signal(signal.SIGTERM, "stopped (SIGTERM)")
                        stopped = g
                        stopped.proc.wait(timeout=60)
                        events["stop_s"] = time.time() - stopped.ended
                        events["after_stop"] = _rows(plain)[mine[0][0]]
                        break
            if all(g.proc.poll() is not None for g in graders) and added is not None:
                break
    finally:
        for g in graders:
            if g.proc.poll() is None:
                g.proc.kill()
            g.proc.wait()
    wall_s = time.monotonic() - t0
    for g in graders:
        if g.ended is None:
            g.ended = time.time()  # it ran to the end (roughly: when it was seen to have exited)
    return {"tmp": tmp, "keys": keys, "url": url, "plain": plain, "graders": graders, "killed": killed,
            "stopped": stopped, "added": added, "refused": refused, "events": events,
            "alone_s": alone_s, "wall_s": wall_s, "reference": f"sqlite:///{tmp / 'reference.db'}",
            "rows": _rows(plain)}


def _share(shared) -> dict[str, tuple[int, float]]:
    """(done, fair share) per grader: each completion credited 1/n to each of the n graders
    running when it completed (from a grader's first claim to its end)."""
    graders, rows = shared["graders"], shared["rows"]
    first = {g.name: min([r.claimed_at for r in rows.values() if g.owns(r.done_by)] or [g.ended]) for g in graders}
    k = shared["killed"]
    first[k.name] = min(first[k.name], shared["events"]["killed_claimed_at"])
    fair = {g.name: 0.0 for g in graders}
    done = {g.name: 0 for g in graders}
    for r in rows.values():
        running = [g for g in graders if first[g.name] <= r.done_at <= g.ended]
        for g in running:
            fair[g.name] += 1 / len(running)
        for g in graders:
            if g.owns(r.done_by):
                done[g.name] += 1
    return {n: (done[n], fair[n]) for n in fair}


def test_the_graders_share_the_class_and_survive_a_kill(shared):
    graders, events = shared["graders"], shared["events"]
    killed, stopped, added = shared["killed"], shared["stopped"], shared["added"]
    assert killed is not None and stopped is not None and added is not None, {g.name: g.text()[-2000:] for g in graders}
    for g in graders:
        if g not in (killed, stopped):
            assert g.proc.returncode == 0, g.text()[-4000:]
    rows = shared["rows"]
    assert sorted(rows) == shared["keys"] and {r.state for r in rows.values()} == {workqueue.DONE}

    # the killed grader's claim: taken over only once its lease had run out, graded by another
    slow = rows[(SLOW, "03_gelu")]
    takeover_s = slow.claimed_at - killed.ended
    assert slow.attempts == 2 and not killed.owns(slow.done_by), slow
    assert slow.claimed_at >= events["killed_lease_until"], (slow, events["killed_lease_until"])
    # a live grader renews every quarter lease, so the lease it leaves has at least 3/4 of one to run
    assert takeover_s >= LEASE * 3 / 4 - 1, takeover_s
    # the stopped grader: gone within seconds, its claim given back at once, not counted
    assert stopped.proc.returncode == 143, stopped.text()[-3000:]
    assert events["stop_s"] < 20, events["stop_s"]
    assert "stopped (SIGTERM)" in stopped.text()
    key = events["stopped_key"]
    assert not stopped.owns(events["after_stop"].claimed_by), events["after_stop"]
    assert rows[key].attempts == 1 and not stopped.owns(rows[key].done_by), rows[key]
    # the added grader joined mid-run: it took work, or found part of the class graded
    took = events.get("added_claimed") or [k for k, r in rows.items() if added.owns(r.done_by)]
    found = re.search(r"(\d+) submissions found, (\d+) already graded", added.text())
    assert found and int(found[1]) == len(shared["keys"]), added.text()[-2000:]
    assert took or int(found[2]) > 0, (events, added.text()[-2000:])

    # exactly once: one record per submission, in the folder of the grader the queue names
    recorded: dict[tuple[str, str], list[str]] = {}
    for g in graders:
        for f in (g.out / "state").glob("*/*.json"):
            rec = json.loads(f.read_text())
            recorded.setdefault((rec["student"], rec["assignment"]), []).append(g.name)
    assert {k: len(v) for k, v in recorded.items()} == {k: 1 for k in shared["keys"]}, recorded
    by_out = {str(g.out): g.name for g in graders}
    assert all(recorded[k] == [by_out[r.out]] for k, r in rows.items()), (recorded, {k: r.out for k, r in rows.items()})
    assert (SLOW, "03_gelu") not in [k for k, v in recorded.items() if v == [killed.name]]
    assert recorded[key] != [stopped.name]

    # the sandboxes of the killed and the stopped grader went with them
    assert _left_in_ranges(graders) == []


def test_progress_is_in_the_gradebook_as_it_happens(shared):
    done, in_gradebook, running = shared["events"]["progress_seen"]
    assert running >= 2 and done >= 2 and in_gradebook >= done, shared["events"]


def test_a_grader_with_a_running_graders_uids_is_refused(shared):
    r = shared["refused"]
    assert r.returncode == 2, r.stdout[-2000:] + r.stderr[-2000:]
    assert "is in use by another grading run on this machine" in r.stderr and "--uid-base" in r.stderr
    assert "Traceback" not in r.stderr and not (shared["tmp"] / "refused" / "state").exists()


def test_the_gradebook_equals_one_grader_alone(shared):
    got, want = merge.scores(shared["plain"]), merge.scores(shared["reference"])
    differ = {k for k in got.keys() | want.keys() if got.get(k) != want.get(k)}
    assert not differ, {k: (got.get(k), want.get(k)) for k in differ}
    assert len(got) == len(shared["keys"])
    # no row twice: every table as large as the lone grader's
    assert _counts(shared["plain"]) == _counts(shared["reference"])


def test_no_grader_did_more_than_twice_its_share(shared):
    share = _share(shared)
    figures = {n: {"done": d, "fair": round(f, 2), "ratio": round(d / f, 2) if f else None} for n, (d, f) in share.items()}
    print(f"\none grader alone (2 workers): {shared['alone_s']:.0f} s; "
          f"4 graders (1 worker each, one killed, one added, one stopped): {shared['wall_s']:.0f} s")
    slow = shared["rows"][(SLOW, "03_gelu")]
    print(f"killed grader's claim taken over after {slow.claimed_at - shared['killed'].ended:.1f} s (lease {LEASE:g} s); "
          f"stopped grader exited {shared['events']['stop_s']:.1f} s after SIGTERM; a grader with a running one's "
          f"uids refused in {shared['events']['refused_s']:.1f} s")
    for g in shared["graders"]:
        print(f"  {g.name}: {g.how}; {figures[g.name]}")
    for name, (done, fair) in share.items():
        assert done <= 2 * fair + 1, figures  # work comes in whole submissions: one of slack


def test_no_password_anywhere(shared):
    secret_forms = [SECRET, quote(SECRET, safe=""), "s3cret"]
    texts = {g.name: g.text() for g in shared["graders"]}
    texts["refused"] = shared["refused"].stdout + shared["refused"].stderr
    for g in shared["graders"]:
        for f in g.out.rglob("*"):
            if f.is_file() and f.suffix in (".txt", ".csv", ".json", ".log", ".html"):
                texts[str(f)] = f.read_text(errors="replace")
    texts["queue"] = "\n".join(r.record or "" for r in shared["rows"].values())
    finisher = next(g for g in shared["graders"] if g.proc.returncode == 0)
    assert "***@127.0.0.1" in (finisher.out / "report.txt").read_text().splitlines()[0]
    leaks = {name: form for name, text in texts.items() for form in secret_forms if form in text}
    assert not leaks, leaks


def test_the_last_report_covers_the_whole_class(shared):
    finishers = [g for g in shared["graders"] if g.proc.returncode == 0]
    last = max(finishers, key=lambda g: (g.out / "report.txt").stat().st_mtime)
    first_line = (last.out / "report.txt").read_text().splitlines()[0]
    students = {student for student, _ in shared["keys"]}
    assert first_line.startswith(f"Grading report: the class as the gradebook holds it, {len(students)} learner(s)"), \
        first_line  # (no "Work queue: ... still at work" line before it)
