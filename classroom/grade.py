"""Grade a whole class: sandboxed, in parallel, resumable.

    python -m classroom.grade SUBMISSIONS [--workers N] [--db URL] [--out DIR]

SUBMISSIONS is a folder or a zip in one of the layouts of :mod:`classroom.collect`
(nbgrader's ``submitted/<student>/<assignment>/``, ``<student>/<notebook>.ipynb`` or
``<student>_<notebook>.ipynb``).

What happens:

1. The assignments are generated from ``solutions/`` into a template gradebook
   (``OUT/template``), exactly as ``nbgrader generate_assignment`` records them.
2. The sandbox is tried once; if the machine cannot run it, the command stops with
   a message saying what it must allow (:mod:`classroom.sandbox`).
3. N worker processes (default: the number of cores) each own a copy of the course
   (``OUT/workers/wK``) with its own SQLite gradebook, and run ``nbgrader
   autograde`` submission by submission; every kernel starts in the sandbox.
   A submission that runs longer than ``--deadline`` seconds in total has its
   sandbox killed and is reported as timed out.
4. Each finished submission is recorded in ``OUT/state/<student>/<assignment>.json``
   (with a hash of its files): an interrupted run, started again, grades only what
   is missing or has changed; a second run over the same files grades nothing.
5. The graded submissions are merged into the course gradebook (``--db``; default:
   the course's ``gradebook.db``, or ``$NBGRADER_DB_URL``), then ``OUT/grades.csv``
   (nbgrader's export format), ``OUT/report.csv`` and ``OUT/report.txt`` are written,
   with every submission that failed, timed out, raised errors or needs manual
   grading listed, and one feedback page per notebook in
   ``OUT/feedback/<student>/<assignment>/`` with the hidden tests' code removed.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from . import sandbox
from .collect import Submission, collect

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "_grading"
UID_BASE = 61000

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_TIMEOUT = "timed out"


# ----------------------------------------------------------------------------- template
def _tree_digest(paths) -> str:
    h = hashlib.sha256()
    for base in paths:
        base = Path(base)
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file()
                                                      and ".ipynb_checkpoints" not in p.parts)
        for p in files:
            h.update(str(p.relative_to(base.parent)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def make_template(out: Path, repo: Path = ROOT) -> tuple[Path, dict[str, list[str]], str]:
    """Generate every assignment into ``out/template`` (gradebook + non-notebook files).

    Returns (template gradebook, {assignment: [notebook names]}, digest of the inputs).
    """
    digest = _tree_digest([repo / "solutions", repo / "nbgrader_config.py"])
    tdir = out / "template"
    gb = tdir / "gradebook.db"
    meta = tdir / "assignments.json"
    if not (tdir / "digest").is_file() or (tdir / "digest").read_text() != digest or not gb.is_file():
        shutil.rmtree(tdir, ignore_errors=True)
        tdir.mkdir(parents=True)
        with tempfile.TemporaryDirectory(prefix="andrea-template-") as tmp:
            course = Path(tmp)
            shutil.copy(repo / "nbgrader_config.py", course / "nbgrader_config.py")
            shutil.copytree(repo / "solutions", course / "solutions",
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
            _generate_assignments(course, repo)
            shutil.copy(course / "gradebook.db", gb)
            # files other than notebooks are what autograde copies over a submission
            src = course / "solutions"
            for p in src.rglob("*"):
                if p.is_file() and p.suffix != ".ipynb":
                    target = tdir / "source" / p.relative_to(src)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(p, target)
        from nbgrader.api import Gradebook
        with Gradebook(f"sqlite:///{gb}") as g:
            assignments = {a.name: sorted(nb.name for nb in a.notebooks) for a in g.assignments}
        meta.write_text(json.dumps(assignments, indent=1))
        (tdir / "digest").write_text(digest)
    (tdir / "source").mkdir(exist_ok=True)
    return gb, json.loads(meta.read_text()), digest


def _generate_assignments(course: Path, repo: Path) -> None:
    """``nbgrader generate_assignment`` for every assignment of ``course``, in this process."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    cfg = load_course_config(repo)
    cfg.CourseDirectory.root = str(course)
    cfg.CourseDirectory.db_url = f"sqlite:///{course / 'gradebook.db'}"
    api = NbGraderAPI(coursedir=CourseDirectory(config=cfg), config=cfg)
    for a in sorted(p.name for p in (course / "solutions").iterdir() if p.is_dir()):
        result = api.generate_assignment(a, force=True)
        if not result.get("success"):
            raise SystemExit(f"nbgrader generate_assignment {a} failed:\n{result.get('log', '')}\n"
                             f"{result.get('error', '')}")


def load_course_config(repo: Path = ROOT):
    from traitlets.config.loader import PyFileConfigLoader
    saved = os.environ.pop("NBGRADER_DB_URL", None)
    try:
        return PyFileConfigLoader("nbgrader_config.py", path=str(repo)).load_config()
    finally:
        if saved is not None:
            os.environ["NBGRADER_DB_URL"] = saved


# ----------------------------------------------------------------------------- worker
def sandbox_spec(wdir: Path, uid: int | None, limits: sandbox.Limits) -> sandbox.SandboxSpec:
    ro, pypath = sandbox.default_ro_paths(ROOT)
    return sandbox.SandboxSpec(scratch_root=str(wdir / "scratch"), runtime_dir=str(wdir / "rt"),
                               pidfile=str(wdir / "sandbox.pid"), uid=uid, ro_paths=ro,
                               pythonpath=pypath, limits=limits)


def prepare_worker_dir(wdir: Path, uid: int | None, limits: sandbox.Limits, template: Path) -> sandbox.SandboxSpec:
    wdir.mkdir(parents=True, exist_ok=True)
    os.chmod(wdir, 0o700)
    for d in ("scratch", "rt"):
        shutil.rmtree(wdir / d, ignore_errors=True)
        (wdir / d).mkdir()
        sandbox._prepare_dir(wdir / d, uid if d == "rt" else None, 0o700 if d == "rt" else 0o711)
    if not (wdir / "gradebook.db").is_file():
        shutil.copy(template / "gradebook.db", wdir / "gradebook.db")
    src = wdir / "source"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(template / "source", src)
    spec = sandbox_spec(wdir, uid, limits)
    spec.save(wdir / "sandbox.json")
    sandbox.install_kernelspec(wdir / "jupyter", wdir / "sandbox.json")
    return spec


def _clean_dir(path: Path) -> None:
    for p in path.iterdir():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)


def analyse_notebook(nb) -> dict:
    """Errors raised in a graded notebook: [{cell, graded, ename, evalue}]."""
    errors = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {})
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                message = (out.get("evalue") or "").strip().splitlines()
                errors.append({"cell": meta.get("grade_id") or f"cell {i + 1}",
                               "graded": bool(meta.get("grade")),
                               "ename": out.get("ename", ""),
                               "evalue": message[0][:300] if message else ""})
    return {"errors": errors}


def _failure_reason(result: dict) -> str:
    text = (result.get("log") or "") + "\n" + (result.get("error") or "")
    hints = [("Kernel died", "the kernel died (killed, or over a memory/CPU limit)"),
             ("DeadKernelError", "the kernel died (killed, or over a memory/CPU limit)"),
             ("NotJSONError", "the notebook is not valid JSON"),
             ("JSONDecodeError", "the notebook is not valid JSON"),
             ("Notebook does not appear to be JSON", "the notebook is not valid JSON"),
             ("duplicate", "a cell id is duplicated (a copied graded cell?)"),
             ("Timeout waiting", "a cell timed out"),
             ("NoSuchKernel", "the grading kernel is missing")]
    for needle, reason in hints:
        if needle in text:
            return reason
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "nbgrader reported an error"


def grade_one(api, wdir: Path, spec: sandbox.SandboxSpec, job: dict, out: Path, deadline: float) -> dict:
    from nbgrader.api import Gradebook
    from nbgrader.utils import temp_attrs
    import nbformat

    from .feedback import strip_hidden

    student, assignment = job["student"], job["assignment"]
    for sub in ("submitted", "autograded", "feedback", "feedback_src"):
        shutil.rmtree(wdir / sub / student / assignment, ignore_errors=True)
    shutil.copytree(out / "inbox" / student / assignment, wdir / "submitted" / student / assignment)
    _clean_dir(wdir / "scratch")
    _clean_dir(wdir / "rt")

    fired = threading.Event()

    def on_deadline():
        fired.set()
        sandbox.kill_sandbox(spec.pidfile)

    timer = threading.Timer(deadline, on_deadline)
    t0 = time.monotonic()
    timer.start()
    try:
        result = api.autograde(assignment, student, force=True, create=True)
        if fired.is_set() and result.get("success"):
            # a later notebook of the assignment ran after the kill: treat as timed out
            result["success"] = False
    finally:
        timer.cancel()
        sandbox.kill_sandbox(spec.pidfile)
    seconds = time.monotonic() - t0

    record = {"student": student, "assignment": assignment, "digest": job["digest"],
              "template": job["template"], "worker": wdir.name, "seconds": round(seconds, 2),
              "errors": [], "notebooks": {}}
    if fired.is_set():
        record["status"] = STATUS_TIMEOUT
        record["reason"] = f"still running after {deadline:.0f} s: its sandbox was killed"
    elif not result.get("success") and "Timeout waiting for execute reply" in (result.get("log") or ""):
        record["status"] = STATUS_TIMEOUT
        record["reason"] = "a cell ran past the per-cell time limit and did not stop when interrupted"
    elif not result.get("success"):
        record["status"] = STATUS_FAILED
        record["reason"] = _failure_reason(result)
    else:
        record["status"] = STATUS_OK
        record["reason"] = ""
    (out / "logs" / student).mkdir(parents=True, exist_ok=True)
    (out / "logs" / student / f"{assignment}.log").write_text(
        (result.get("log") or "") + ("\n" + result["error"] if result.get("error") else ""))

    graded_dir = wdir / "autograded" / student / assignment
    dest_nb = out / "autograded" / student / assignment
    shutil.rmtree(dest_nb, ignore_errors=True)
    fb_out = out / "feedback" / student / assignment
    shutil.rmtree(fb_out, ignore_errors=True)
    fb_out.mkdir(parents=True, exist_ok=True)
    notebooks = sorted(graded_dir.glob("*.ipynb")) if graded_dir.is_dir() else []
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        info = analyse_notebook(nb)
        for e in info["errors"]:
            record["errors"].append({"notebook": path.stem, **e})
        dest_nb.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest_nb / path.name)
        safe = wdir / "feedback_src" / student / assignment / path.name
        safe.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(strip_hidden(nb), safe)
    interrupted = ("KeyboardInterrupt", "CellTimeoutError")
    if record["status"] == STATUS_OK and any(e["ename"] in interrupted for e in record["errors"]):
        record["status"] = STATUS_TIMEOUT
        cells = sorted({e["cell"] for e in record["errors"] if e["ename"] in interrupted})
        record["reason"] = f"cell(s) {', '.join(cells)} ran past the per-cell time limit and were interrupted"

    if notebooks and record["status"] != STATUS_FAILED:
        with temp_attrs(api.coursedir, autograded_directory="feedback_src"):
            fb = api.generate_feedback(assignment, student, force=True)
        made = wdir / "feedback" / student / assignment
        if fb.get("success") and made.is_dir():
            for html in made.glob("*.html"):
                shutil.copy(html, fb_out / html.name)
    if not any(fb_out.glob("*.html")):
        (fb_out / "not_graded.html").write_text(_not_graded_page(student, assignment, record))

    with Gradebook(f"sqlite:///{wdir / 'gradebook.db'}") as gb:
        sub = gb.find_submission(assignment, student)
        record["score"] = sub.score
        record["max_score"] = sub.max_score
        record["needs_manual_grade"] = bool(sub.needs_manual_grade)
        for nb in sub.notebooks:
            record["notebooks"][nb.name] = {g.name: g.score for g in nb.grades}
    return record


def _not_graded_page(student: str, assignment: str, record: dict) -> str:
    import html
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Feedback</title></head><body>"
            f"<h1>{html.escape(assignment)}: {html.escape(student)}</h1>"
            f"<p>This submission could not be graded automatically ({html.escape(record['status'])}): "
            f"{html.escape(record.get('reason') or '')}.</p>"
            "<p>Your instructor has been told and will look at it.</p></body></html>")


def worker_main(idx: int, ctx: dict, jobs, results) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt does
    sandbox._die_with_parent()  # a grading run killed hard takes its workers (and sandboxes) with it
    wdir = Path(ctx["wdir"])
    spec = sandbox.SandboxSpec.load(wdir / "sandbox.json")
    if spec.uid is not None:
        sandbox.kill_uid(spec.uid)  # leftovers of a run that was killed hard
    os.environ.update({
        "JUPYTER_PATH": str(wdir / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(wdir / "rt"),
        "JUPYTER_CONFIG_DIR": str(wdir / "jupyter_config"),
        "JUPYTER_DATA_DIR": str(wdir / "jupyter_data"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    })
    os.environ.pop("NBGRADER_DB_URL", None)
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    cfg = load_course_config()
    cfg.CourseDirectory.root = str(wdir)
    cfg.CourseDirectory.source_directory = "source"
    cfg.CourseDirectory.db_url = f"sqlite:///{wdir / 'gradebook.db'}"
    cfg.Execute.kernel_name = sandbox.KERNEL_NAME
    cfg.KernelManager.transport = "ipc"
    # once the last cell has run, the sandbox is killed: no need to wait for a polite exit
    cfg.Execute.shutdown_kernel = "immediate"
    # one kernel at a time per worker: its connection file and sockets live in rt/
    cfg.KernelManager.connection_file = str(wdir / "rt" / "kernel.json")
    if ctx.get("timeout"):
        cfg.Execute.timeout = ctx["timeout"]
    cfg.Autograde.create_student = True
    api = NbGraderAPI(coursedir=CourseDirectory(config=cfg), config=cfg)
    api.log.setLevel("WARNING")
    out = Path(ctx["out"])
    while True:
        job = jobs.get()
        if job is None:
            break
        try:
            record = grade_one(api, wdir, spec, job, out, ctx["deadline"])
        except Exception as exc:  # never lose the batch over one submission
            import traceback
            record = {"student": job["student"], "assignment": job["assignment"], "digest": job["digest"],
                      "template": job["template"], "worker": wdir.name, "status": STATUS_FAILED,
                      "reason": f"grader error: {exc!r}", "errors": [], "notebooks": {},
                      "trace": traceback.format_exc(), "score": 0.0, "max_score": None,
                      "needs_manual_grade": False, "seconds": 0}
        write_state(out, record)
        results.put(record)


# ----------------------------------------------------------------------------- state
def state_path(out: Path, student: str, assignment: str) -> Path:
    return out / "state" / student / f"{assignment}.json"


def write_state(out: Path, record: dict) -> None:
    path = state_path(out, record["student"], record["assignment"])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=1))
    os.replace(tmp, path)


def read_state(out: Path, student: str, assignment: str) -> dict | None:
    try:
        return json.loads(state_path(out, student, assignment).read_text())
    except (OSError, ValueError):
        return None


# ----------------------------------------------------------------------------- progress
class Progress:
    def __init__(self, total: int, enabled: bool = True, stream=sys.stderr):
        self.total, self.done, self.problems = total, 0, 0
        self.start = time.monotonic()
        self.enabled = enabled and total > 0
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()

    def update(self, record: dict) -> None:
        self.done += 1
        from .report import classify
        if classify(record):
            self.problems += 1
        if not self.enabled:
            return
        el = time.monotonic() - self.start
        eta = el / self.done * (self.total - self.done)
        width = 30
        fill = int(width * self.done / self.total)
        bar = "#" * fill + "-" * (width - fill)
        line = (f"[{bar}] {self.done}/{self.total} graded, {self.problems} to look at, "
                f"{el:5.0f} s elapsed, ~{eta:4.0f} s left  ({record['student']}/{record['assignment']}: "
                f"{record['status']})")
        if self.tty:
            self.stream.write("\r" + line[:150].ljust(150))
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


# ----------------------------------------------------------------------------- main
def default_db_url() -> str:
    return os.environ.get("NBGRADER_DB_URL") or f"sqlite:///{ROOT / 'gradebook.db'}"


def run(submissions: Path, *, workers: int | None = None, db_url: str | None = None, out: Path = DEFAULT_OUT,
        timeout: int | None = None, deadline: float = 600.0, limits: sandbox.Limits | None = None,
        uid_base: int = UID_BASE, force: bool = False, progress: bool = True, max_jobs: int | None = None,
        log=print) -> dict:
    """Grade ``submissions``; returns a summary dict (also written to OUT/report.*)."""
    from . import merge as merge_mod
    from . import report as report_mod

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    db_url = db_url or default_db_url()
    limits = limits or sandbox.Limits()
    root_mode = os.geteuid() == 0

    template_db, assignments, tdigest = make_template(out)
    subs, skipped = collect(Path(submissions), assignments)
    for s in skipped:
        log(f"note: {s}")

    # the sandbox, tried once with exactly the settings the kernels get
    probe_dir = out / "workers" / "probe"
    shutil.rmtree(probe_dir, ignore_errors=True)
    probe = prepare_worker_dir(probe_dir, uid_base + 999 if root_mode else None, limits, template_db.parent)
    try:
        sandbox.check(probe)
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)

    todo: list[Submission] = []
    for s in subs:
        st = read_state(out, s.student, s.assignment)
        if force or st is None or st.get("digest") != s.digest() or st.get("template") != tdigest:
            todo.append(s)
    if max_jobs is not None:
        todo = todo[:max_jobs]
    n_workers = max(1, min(workers or os.cpu_count() or 1, len(todo) or 1))
    log(f"{len(subs)} submissions found, {len(subs) - len(todo)} already graded, "
        f"{len(todo)} to grade on {n_workers} worker(s)")

    graded: list[dict] = []
    interrupted = False
    if todo:
        inbox = out / "inbox"
        for s in todo:
            d = inbox / s.student / s.assignment
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(parents=True)
            s.write(d)
        wdirs = []
        for i in range(n_workers):
            wdir = out / "workers" / f"w{i}"
            # a worker gradebook made from another version of the assignments is stale
            stamp = wdir / "template.digest"
            if stamp.is_file() and stamp.read_text() != tdigest:
                shutil.rmtree(wdir)
            prepare_worker_dir(wdir, uid_base + i if root_mode else None, limits, template_db.parent)
            stamp.write_text(tdigest)
            wdirs.append(wdir)
        ctx_mp = mp.get_context("fork")
        jobs, results = ctx_mp.Queue(), ctx_mp.Queue()
        for s in todo:
            jobs.put({"student": s.student, "assignment": s.assignment, "digest": s.digest(), "template": tdigest})
        for _ in wdirs:
            jobs.put(None)
        procs = [ctx_mp.Process(target=worker_main, args=(i, {"wdir": str(w), "out": str(out), "timeout": timeout,
                                                              "deadline": deadline}, jobs, results), daemon=True)
                 for i, w in enumerate(wdirs)]
        for p in procs:
            p.start()
        bar = Progress(len(todo), progress)
        try:
            while len(graded) < len(todo):
                try:
                    rec = results.get(timeout=1.0)
                except queue.Empty:
                    if not any(p.is_alive() for p in procs):
                        # drain what the workers put last, then give up on the rest
                        try:
                            while True:
                                rec = results.get(timeout=0.5)
                                graded.append(rec)
                                bar.update(rec)
                        except queue.Empty:
                            pass
                        if len(graded) < len(todo):
                            log(f"error: the workers stopped with {len(todo) - len(graded)} submissions left")
                        break
                    continue
                graded.append(rec)
                bar.update(rec)
        except KeyboardInterrupt:
            interrupted = True
            log(f"\ninterrupted: {len(graded)} of {len(todo)} graded in this run; "
                "run the same command again to grade the rest")
        finally:
            for p in procs:
                if p.is_alive():
                    p.terminate()
            for p in procs:
                p.join(timeout=10)
            if root_mode:
                for i in range(len(wdirs)):
                    sandbox.kill_uid(uid_base + i)  # nothing of the learners' code outlives the run
            jobs.cancel_join_thread()
            results.cancel_join_thread()

    # merge every submission whose state is current into the course gradebook
    sources: dict[str, list[tuple[str, str]]] = {}
    records = []
    for s in subs:
        st = read_state(out, s.student, s.assignment)
        if st is None or st.get("digest") != s.digest() or st.get("template") != tdigest:
            continue
        records.append(st)
        url = f"sqlite:///{out / 'workers' / st['worker'] / 'gradebook.db'}"
        sources.setdefault(url, []).append((s.student, s.assignment))
    merged = merge_mod.merge(db_url, sources) if sources else 0
    summary = report_mod.write_reports(out, db_url, records, skipped, graded_now=len(graded),
                                       expected=len(subs))
    summary["merged"] = merged
    summary["interrupted"] = interrupted
    summary["graded_now"] = len(graded)
    log(summary["text"])
    return summary


def parse_size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().rstrip("b")
    if t and t[-1] in units:
        return int(float(t[:-1]) * units[t[-1]])
    return int(t)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m classroom.grade", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("submissions", type=Path, help="folder or zip of submissions")
    p.add_argument("--workers", type=int, default=None, help="parallel workers (default: number of cores)")
    p.add_argument("--db", default=None, help="course gradebook URL (default: $NBGRADER_DB_URL or gradebook.db)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="working and report folder (default: _grading)")
    p.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: nbgrader_config.py)")
    p.add_argument("--deadline", type=float, default=600, help="seconds per submission before its sandbox is killed")
    p.add_argument("--memory", default="4G", help="address-space limit of a kernel (default 4G)")
    p.add_argument("--processes", type=int, default=256, help="processes+threads limit of a kernel")
    p.add_argument("--cpu", type=int, default=600, help="CPU-seconds limit of a kernel")
    p.add_argument("--uid-base", type=int, default=UID_BASE, help="as root: worker K's kernels run as uid BASE+K")
    p.add_argument("--force", action="store_true", help="regrade everything")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    limits = sandbox.Limits(memory=parse_size(a.memory), processes=a.processes, cpu_seconds=a.cpu)
    try:
        summary = run(a.submissions, workers=a.workers, db_url=a.db, out=a.out, timeout=a.timeout,
                      deadline=a.deadline, limits=limits, uid_base=a.uid_base, force=a.force,
                      progress=not a.no_progress)
    except sandbox.SandboxUnavailable as exc:
        print(f"error: cannot isolate the learners' code on this machine: {exc}", file=sys.stderr)
        return 2
    if summary["interrupted"]:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
