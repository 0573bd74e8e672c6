"""Grade a whole class: sandboxed, in parallel, resumable.

    python -m classroom.grade SUBMISSIONS [--workers N] [--db URL] [--out DIR] [--shard K/N]

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
   autograde`` submission by submission; every kernel starts in the sandbox. Only
   the released notebooks of a submission reach the kernel: other files handed in
   are listed as refused (:mod:`classroom.collect`).
   A submission that runs longer than ``--deadline`` seconds in total has its
   sandbox killed and is reported as timed out.
4. The points come from the **independent check** (:mod:`classroom.independent`):
   the learner's answer cells run in a fresh sandboxed answer server and the same
   checks as the notebook's run in the worker, where no learner code runs. Those
   scores replace nbgrader's in the worker's gradebook; where the notebook's own
   graded cells said otherwise, the report says so per cell.
5. Kernels, answer servers and the workers themselves are capped by cgroups (memory,
   including shared memory and memfd, and processes) where the machine allows it
   (:mod:`classroom.cgroups`; otherwise the run says what it falls back to), and a
   seccomp filter closes per-uid kernel state such as keyrings
   (:mod:`classroom.seccomp`). Output is capped in bytes as it arrives
   (:mod:`classroom.execute`).
6. Each finished submission is recorded in ``OUT/state/<student>/<assignment>.json``
   (with a hash of its files and of everything that decides a grade: the checks,
   the notebooks, ``nbgrader_config.py``, this grading code and its limits): an
   interrupted run, started again, grades only what is missing or has changed; a
   second run over the same files grades nothing; a changed check regrades all.
7. The graded submissions are merged into the course gradebook (``--db``; default:
   the course's ``gradebook.db``, or ``$NBGRADER_DB_URL``), then ``OUT/grades.csv``
   (nbgrader's export format), ``OUT/report.csv`` and ``OUT/report.txt`` are written,
   with every submission that failed, timed out, raised errors or needs manual
   grading listed, and one feedback page per notebook in
   ``OUT/feedback/<student>/<assignment>/`` showing the independent verdicts, with
   the hidden tests' code removed and learner markup sanitised.
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
import warnings
from pathlib import Path

from sqlalchemy.exc import SAWarning

from . import sandbox, textsafe
from .collect import Submission, collect

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "_grading"
UID_BASE = 61000
ANSWER_UID_OFFSET = 500  # worker K's answer servers run as UID_BASE + 500 + K
PROBE_UID_OFFSET = 999
GiB = 1 << 30
MAX_NOTEBOOK = 64 << 20  # bytes: a graded notebook larger than this is not read

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


def _code_digest(repo: Path) -> str:
    """A hash of everything that decides a grade: the instructor and released notebooks,
    nbgrader's configuration, the checks (andrea_ref) and this grading code."""
    h = hashlib.sha256()
    parts = [("solutions", "*.ipynb"), ("exercises", "*.ipynb"), ("andrea_ref", "*.py"), ("classroom", "*.py")]
    files = [repo / "nbgrader_config.py"]
    for folder, pattern in parts:
        files += sorted(p for p in (repo / folder).rglob(pattern) if ".ipynb_checkpoints" not in p.parts)
    for p in files:
        if p.is_file():
            h.update(str(p.relative_to(repo)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def make_template(out: Path, repo: Path = ROOT) -> tuple[Path, dict[str, list[str]], str]:
    """Generate every assignment into ``out/template`` (gradebook, non-notebook files
    and the independent check's plans).

    Returns (template gradebook, {assignment: [notebook names]}, digest of the inputs).
    """
    digest = _code_digest(repo)
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
            from .independent import write_plans
            write_plans(tdir, course / "solutions", course / load_course_config(repo).CourseDirectory.release_directory)
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
def sandbox_spec(wdir: Path, uid: int | None, limits: sandbox.Limits, *, seccomp_file: str | None = None,
                 cgroup_procs: list[str] | None = None) -> sandbox.SandboxSpec:
    ro, pypath = sandbox.default_ro_paths(ROOT)
    return sandbox.SandboxSpec(scratch_root=str(wdir / "scratch"), runtime_dir=str(wdir / "rt"),
                               pidfile=str(wdir / "sandbox.pid"), uid=uid, ro_paths=ro,
                               pythonpath=pypath, limits=limits, seccomp_file=seccomp_file,
                               cgroup_procs=list(cgroup_procs or []))


def answer_spec(wdir: Path, uid: int | None, limits: sandbox.Limits, *, seccomp_file: str | None = None,
                cgroup_procs: list[str] | None = None) -> sandbox.SandboxSpec:
    """The sandbox of worker ``wdir``'s answer servers: like its kernels', under its own uid."""
    base = wdir / "answer"
    for d in (base, base / "rt"):
        d.mkdir(parents=True, exist_ok=True)
        sandbox._prepare_dir(d, uid, 0o711 if d == base else 0o700)
    ro, pypath = sandbox.default_ro_paths(ROOT)
    return sandbox.SandboxSpec(scratch_root=str(base), runtime_dir=str(base / "rt"),
                               pidfile=str(base / "sandbox.pid"), uid=uid, ro_paths=ro, pythonpath=pypath,
                               limits=limits, seccomp_file=seccomp_file, cgroup_procs=list(cgroup_procs or []))


def prepare_worker_dir(wdir: Path, uid: int | None, limits: sandbox.Limits, template: Path, *,
                       seccomp_file: str | None = None, cgroup_procs: list[str] | None = None) -> sandbox.SandboxSpec:
    wdir.mkdir(parents=True, exist_ok=True)
    os.chmod(wdir, 0o711)
    for d in ("scratch", "rt"):
        shutil.rmtree(wdir / d, ignore_errors=True)
        (wdir / d).mkdir()
        sandbox._prepare_dir(wdir / d, uid if d == "rt" else None, 0o700 if d == "rt" else 0o711)
    if not (wdir / "gradebook.db").is_file():
        shutil.copy(template / "gradebook.db", wdir / "gradebook.db")
    src = wdir / "source"
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(template / "source", src)
    spec = sandbox_spec(wdir, uid, limits, seccomp_file=seccomp_file, cgroup_procs=cgroup_procs)
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
                message = str(out.get("evalue") or "").strip().splitlines()
                errors.append({"cell": f"cell {meta['grade_id']!r}"[:100] if meta.get("grade_id") else f"cell {i + 1}",
                               "graded": bool(meta.get("grade")),
                               "ename": str(out.get("ename", ""))[:100],
                               "evalue": message[0][:300] if message else ""})
    return {"errors": errors[:50]}


def _in_language(nb, assignment: str):
    """The graded notebook with its markdown in the feedback's language: nbgrader put
    the English text of the locked cells back, from the gradebook."""
    from .notebook_i18n import catalog, translate_notebook
    language = os.environ.get("ANDREA_LANG", "en")
    if language == "en":
        return nb
    import nbformat
    translated = translate_notebook(dict(nb), language, catalog(language, assignment))
    return nbformat.from_dict(translated)


def _submission_language(notebooks) -> str | None:
    """The language of a submission's notebooks, when they name one of the course's."""
    from .notebook_i18n import notebook_language
    return next(filter(None, map(notebook_language, notebooks)), None)


def _failure_reason(result: dict) -> str:
    text = (result.get("log") or "") + "\n" + (result.get("error") or "")
    hints = [("Kernel died", "the kernel died (killed, or over a memory/CPU limit)"),
             ("DeadKernelError", "the kernel died (killed, or over a memory/CPU limit)"),
             ("NotJSONError", "the notebook is not valid JSON"),
             ("JSONDecodeError", "the notebook is not valid JSON"),
             ("Notebook does not appear to be JSON", "the notebook is not valid JSON"),
             ("duplicate", "a cell id is duplicated (a copied graded cell?)"),
             ("Timeout waiting for IOPub", "the kernel's output stopped arriving (a single output "
                                            "message over the size limit?)"),
             ("Timeout waiting", "a cell timed out"),
             ("NoSuchKernel", "the grading kernel is missing")]
    for needle, reason in hints:
        if needle in text:
            return reason
    return "nbgrader reported an error (see the log)"


def _read_notebook_json(path: Path):
    """The submitted notebook as a dict, or None if it is missing, too large or not JSON."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_NOTEBOOK:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("cells"), list) else None


def _oom(group) -> int:
    try:
        return group.oom_kills() if group is not None else 0
    except OSError:
        return 0


def grade_one(api, wdir: Path, spec: sandbox.SandboxSpec, job: dict, out: Path, deadline: float,
              worker: dict | None = None) -> dict:
    """Grade one submission: nbgrader in the sandbox for the learner's outputs, the
    independent check for the points, then the feedback pages."""
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.utils import temp_attrs
    import nbformat

    from . import execute, independent
    from .feedback import feedback_notebook, write_page

    worker = worker or {}
    student, assignment = job["student"], job["assignment"]
    for sub in ("submitted", "autograded", "feedback", "feedback_src"):
        shutil.rmtree(wdir / sub / student / assignment, ignore_errors=True)
    shutil.copytree(out / "inbox" / student / assignment, wdir / "submitted" / student / assignment)
    _clean_dir(wdir / "scratch")
    _clean_dir(wdir / "rt")
    submitted = {p.stem: _read_notebook_json(p)
                 for p in sorted((wdir / "submitted" / student / assignment).glob("*.ipynb"))}
    # The checks' messages (in the feedback, and in the kernel's own outputs) are in the
    # instructor's ANDREA_LANG if set, else in the language the learner's notebook says
    # it is in (metadata andrea.lang, checked), else English. Points do not depend on it.
    os.environ["ANDREA_LANG"] = worker.get("language") or _submission_language(submitted.values()) or "en"
    groups = worker.get("groups") or {}
    oom_before = {k: _oom(g) for k, g in groups.items()}
    execute.LIMIT_HITS.clear()

    fired = threading.Event()
    kz = worker.get("kernel_zygote")

    zygote_lost = threading.Event()

    def kill_kernel():
        sandbox.kill_sandbox(spec.pidfile)
        if kz is not None and not kz.reset():
            zygote_lost.set()

    def on_deadline():
        fired.set()
        kill_kernel()

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
        kill_kernel()
    if groups.get("kernel") is not None and (kz is None or zygote_lost.is_set()):
        groups["kernel"].kill_all()  # whatever the kernel left running (with a zygote: reset did)
    if zygote_lost.is_set():
        try:  # a zygote that stopped answering is replaced; until then kernels get bwrap each
            kz.start()
        except (sandbox.SandboxUnavailable, OSError):
            pass

    record = {"student": student, "assignment": assignment, "digest": job["digest"],
              "template": job["template"], "worker": wdir.name, "errors": [], "notebooks": {},
              "kernel_notebooks": {}, "checks": {}, "limits": [], "refused": list(job.get("refused", [])),
              "notes": list(job.get("notes", []))}
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
    if execute.LIMIT_HITS:
        record["limits"].append(f"output (more than {worker.get('max_output', 0)} bytes per notebook; the rest was dropped)")
    (out / "logs" / student).mkdir(parents=True, exist_ok=True)
    kernel_logs = ""
    for log in sorted((wdir / "scratch").glob("k-*/kernel.log")):
        kernel_logs += f"\n--- kernel output ({log.parent.name}, first bytes only) ---\n"
        kernel_logs += log.read_bytes()[:16384].decode("utf-8", "replace")
    (out / "logs" / student / f"{assignment}.log").write_text(
        (result.get("log") or "") + ("\n" + result["error"] if result.get("error") else "") + kernel_logs)

    graded_dir = wdir / "autograded" / student / assignment
    dest_nb = out / "autograded" / student / assignment
    shutil.rmtree(dest_nb, ignore_errors=True)
    fb_out = out / "feedback" / student / assignment
    shutil.rmtree(fb_out, ignore_errors=True)
    fb_out.mkdir(parents=True, exist_ok=True)
    notebooks = []
    if graded_dir.is_dir():
        for path in sorted(graded_dir.glob("*.ipynb")):
            if path.stat().st_size > MAX_NOTEBOOK:
                record["limits"].append(f"output (the graded notebook {path.name} is over {MAX_NOTEBOOK} bytes)")
                continue
            notebooks.append(path)
    graded_nbs = {}
    for path in notebooks:
        nb = nbformat.read(path, as_version=4)
        graded_nbs[path.stem] = nb
        for e in analyse_notebook(nb)["errors"]:
            record["errors"].append({"notebook": path.stem, **e})
        dest_nb.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest_nb / path.name)
    interrupted = ("KeyboardInterrupt", "CellTimeoutError")
    if record["status"] == STATUS_OK and any(e["ename"] in interrupted for e in record["errors"]):
        record["status"] = STATUS_TIMEOUT
        cells = sorted({e["cell"] for e in record["errors"] if e["ename"] in interrupted})
        record["reason"] = f"{', '.join(cells)} ran past the per-cell time limit and were interrupted"

    timing: dict[str, float] = {}

    def lap(phase: str) -> None:  # seconds since the previous phase ended
        timing[phase] = round(time.monotonic() - t0 - sum(timing.values()), 2)

    lap("autograde")
    # ---- the independent check: the points
    host = worker.get("host")
    plans = (worker.get("plans") or {}).get(assignment, {})
    verdicts = {}
    left = max(5.0, deadline - (time.monotonic() - t0))
    for name, plan in plans.items():
        nbjson = submitted.get(name)
        if nbjson is None:
            if name in submitted:
                record["checks"][name] = {"problem": "not a readable notebook"}
            continue
        if host is None:
            continue
        try:
            v = independent.check_notebook(plan, nbjson, host, cell_timeout=worker.get("cell_timeout", 60),
                                           deadline=time.monotonic() + left)
        except independent.AnswerUnavailable as exc:
            record["checks"][name] = {"problem": f"the independent check could not start: {exc}"}
            record["status"] = STATUS_FAILED
            record["reason"] = "the independent check could not start"
            continue
        verdicts[name] = v
        record["checks"][name] = {"problem": v.problem, "untouched": v.untouched, "probes": v.probes,
                                  "locked_changes": v.locked_changes, "differs": [],
                                  "answer_errors": v.answer_errors, "seconds": v.seconds,
                                  "messages": {g: c.message[:2000] for g, c in v.cells.items() if not c.passed}}
    for key, g in groups.items():
        if _oom(g) > oom_before.get(key, 0):
            record["limits"].append({"kernel": "memory (the notebook's kernel was killed at its cap)",
                                     "answer": "memory (the answer server was killed at its cap)"}.get(key, f"memory ({key})"))

    lap("independent")
    url = f"sqlite:///{wdir / 'gradebook.db'}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SAWarning)
        with Gradebook(url) as gb:
            try:
                sub = gb.find_submission(assignment, student)
            except MissingEntry:
                sub = None
            if sub is not None:
                for snb in sub.notebooks:
                    record["kernel_notebooks"][snb.name] = {g.name: g.score for g in snb.grades}
                    v = verdicts.get(snb.name)
                    for g in snb.grades:
                        if v is not None and g.name in v.cells:
                            independent_score = v.cells[g.name].score
                        elif g.name in {c["grade_id"] for c in plans.get(snb.name, {}).get("graded", [])}:
                            independent_score = 0.0  # no independent verdict: no points
                        else:
                            continue
                        kernel_score = g.score
                        if v is not None and (kernel_score or 0) != independent_score:
                            record["checks"][snb.name]["differs"].append(
                                {"grade_id": g.name, "kernel": kernel_score, "independent": independent_score})
                        g.auto_score = independent_score
                        g.manual_score = None
                gb.db.commit()
                sub = gb.find_submission(assignment, student)
                record["score"] = sub.score
                record["max_score"] = sub.max_score
                record["needs_manual_grade"] = bool(sub.needs_manual_grade)
                record["max_by_notebook"] = {snb.name: snb.max_score for snb in sub.notebooks}
                for snb in sub.notebooks:
                    record["notebooks"][snb.name] = {g.name: g.score for g in snb.grades}
            else:
                record.update(score=0.0, max_score=None, needs_manual_grade=False)

    lap("gradebook")
    # ---- feedback: the independent verdicts, no hidden text, sanitised
    for name, nb in graded_nbs.items():
        v = verdicts.get(name)
        shown = {g: independent.verdict_outputs(c) for g, c in v.cells.items()} if v is not None else {}
        safe = wdir / "feedback_src" / student / assignment / f"{name}.ipynb"
        safe.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(feedback_notebook(_in_language(nb, assignment), shown), safe)
    if graded_nbs and record["status"] != STATUS_FAILED:
        with temp_attrs(api.coursedir, autograded_directory="feedback_src"):
            fb = api.generate_feedback(assignment, student, force=True)
        made = wdir / "feedback" / student / assignment
        if fb.get("success") and made.is_dir():
            for html in made.glob("*.html"):  # MathJax, links and styles for offline reading
                write_page(html, fb_out / html.name, api.config)
    if not any(fb_out.glob("*.html")):
        (fb_out / "not_graded.html").write_text(_not_graded_page(student, assignment, record))
    lap("feedback")
    record["seconds"] = round(time.monotonic() - t0, 2)
    record["timing"] = timing
    return record


def _not_graded_page(student: str, assignment: str, record: dict) -> str:
    import html
    # only the grader's own words here: no text from the learner's code
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>Feedback</title></head><body>"
            f"<h1>{html.escape(assignment)}: {html.escape(student)}</h1>"
            f"<p>This submission could not be graded automatically ({html.escape(record['status'])}).</p>"
            "<p>Your instructor has been told and will look at it.</p></body></html>")


def worker_main(idx: int, ctx: dict, jobs, results) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what an interrupt does
    # a grading run killed hard takes its workers (and sandboxes) with it
    sandbox._die_with_parent(ctx.get("parent"))
    sandbox.join_cgroup(ctx.get("grader_procs") or [])
    wdir = Path(ctx["wdir"])
    spec = sandbox.SandboxSpec.load(wdir / "sandbox.json")
    if spec.uid is not None:
        sandbox.kill_uid(spec.uid)  # leftovers of a run that was killed hard
    if ctx.get("answer_uid") is not None:
        sandbox.kill_uid(ctx["answer_uid"])
    os.environ.update({
        sandbox.PARENT_ENV: str(os.getpid()),
        "JUPYTER_PATH": str(wdir / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(wdir / "rt"),
        "JUPYTER_CONFIG_DIR": str(wdir / "jupyter_config"),
        "JUPYTER_DATA_DIR": str(wdir / "jupyter_data"),
        "JUPYTER_PLATFORM_DIRS": "1",
        "PATH": str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
    })
    os.environ.pop("NBGRADER_DB_URL", None)
    from andrea_ref.i18n import LANGUAGES
    chosen = os.environ.pop("ANDREA_LANG", "").strip()
    language = chosen if chosen in LANGUAGES else None  # else: each submission's own
    from .sawarnings import ignore_add_submission_autoflush
    ignore_add_submission_autoflush()  # autograde's harmless add_submission warning, only that one
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    from . import cgroups, execute, independent
    import torch
    torch.set_num_threads(1)  # workers run side by side; the checks' tensors are small

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
    cfg.CappedExecute.max_output_bytes = ctx["max_output"]
    from nbgrader.converters.autograde import Autograde
    cfg.Autograde.autograde_preprocessors = [execute.CappedExecute if c.__name__ == "Execute" else c
                                             for c in Autograde.class_traits()["autograde_preprocessors"].default()]
    cfg.Autograde.create_student = True
    cfg.HTMLExporter.sanitize_html = True  # learner markup in feedback pages comes out inert
    api = NbGraderAPI(coursedir=CourseDirectory(config=cfg), config=cfg)
    api.log.setLevel("ERROR")
    out = Path(ctx["out"])

    groups = {k: cgroups.Group(ctx["cgroup_version"], [Path(d) for d in dirs], k)
              for k, dirs in (ctx.get("groups") or {}).items()}
    kz = None
    if ctx.get("zygote", True):
        kz = sandbox.KernelZygote(spec, wdir / "kz", wdir / "autograded", ctx.get("nest_filter"),
                                  ctx.get("zygote_filter"))
        try:
            kz.launch()  # it imports PyTorch while the answer server's zygote starts below
        except (sandbox.SandboxUnavailable, OSError):
            kz = None
    aspec = sandbox.SandboxSpec.load(wdir / "answer.json")
    host = independent.AnswerHost(aspec, wdir / "answer" / "work", nest_filter=ctx.get("nest_filter"),
                                  zygote=ctx.get("zygote", True))
    try:
        host.start()
    except Exception as exc:  # noqa: BLE001 - reported for every job below
        host = None
        results.put({"event": "ready", "worker": idx, "answer_mode": None, "why": f"{exc}"[:300]})
    else:
        results.put({"event": "ready", "worker": idx, "answer_mode": host.mode, "why": host.why_not_zygote})
    if kz is not None:
        try:
            spec = kz.wait_ready()
            spec.save(wdir / "sandbox.json")  # the launcher asks the zygote from now on
        except (sandbox.SandboxUnavailable, OSError):
            kz = None  # one bubblewrap sandbox per kernel, as the launcher does by itself
    worker = {"language": language, "host": host, "kernel_zygote": kz, "plans": independent.load_plans(Path(ctx["template_dir"])),
              "groups": groups,
              "cell_timeout": float(ctx.get("timeout") or cfg.Execute.timeout or 60),
              "max_output": ctx["max_output"]}
    while True:
        job = jobs.get()
        if job is None:
            break
        results.put({"event": "start", "worker": idx, "student": job["student"], "assignment": job["assignment"]})
        try:
            record = grade_one(api, wdir, spec, job, out, ctx["deadline"], worker)
        except Exception as exc:  # never lose the batch over one submission
            import traceback
            record = {"student": job["student"], "assignment": job["assignment"], "digest": job["digest"],
                      "template": job["template"], "worker": wdir.name, "status": STATUS_FAILED,
                      "reason": f"grader error: {type(exc).__name__}", "errors": [], "notebooks": {},
                      "trace": traceback.format_exc(), "score": 0.0, "max_score": None,
                      "needs_manual_grade": False, "seconds": 0, "refused": list(job.get("refused", [])),
                      "notes": list(job.get("notes", []))}
            if host is not None:
                host.reset()
        write_state(out, record)
        results.put(record)
    if host is not None:
        host.close()
    if kz is not None:
        kz.close()


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
    """A tqdm bar of the submissions graded, with how many need a look."""

    def __init__(self, total: int, enabled: bool = True, stream=sys.stderr):
        from tqdm import tqdm
        self.total, self.done, self.problems = total, 0, 0
        self.bar = tqdm(total=total, disable=not enabled or total == 0, file=stream, unit="submission",
                        dynamic_ncols=True, leave=True)

    def update(self, record: dict) -> None:
        from .report import classify
        self.done += 1
        if classify(record):
            self.problems += 1
        self.bar.set_postfix_str(f"{self.problems} to look at; last {record['student']}/{record['assignment']}: "
                                 f"{record['status']}", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


# ----------------------------------------------------------------------------- main
def default_db_url() -> str:
    return os.environ.get("NBGRADER_DB_URL") or f"sqlite:///{ROOT / 'gradebook.db'}"


def _seccomp_programs(out: Path) -> dict[str, str]:
    """Write the three filters; raises SandboxUnavailable where they cannot be built."""
    from . import seccomp
    why = seccomp.available()
    if why is not None:
        raise sandbox.SandboxUnavailable(f"seccomp filters cannot be built here ({why}); install the Debian "
                                         "package libseccomp2 and the Python package pyseccomp")
    d = out / "workers" / "seccomp"
    d.mkdir(parents=True, exist_ok=True)
    return {"kernel": str(seccomp.write_program(d / "kernel.bpf", seccomp.SANDBOX_DENY + seccomp.NEST_DENY)),
            "answer": str(seccomp.write_program(d / "answer.bpf", seccomp.SANDBOX_DENY)),
            "nest": str(seccomp.write_program(d / "nest.bpf", seccomp.NEST_DENY))}


def _options_digest(limits: sandbox.Limits, timeout, deadline, max_output, grader_memory) -> str:
    values = [{k: int(v) for k, v in limits.__dict__.items()}, None if timeout is None else float(timeout),
              float(deadline), int(max_output), int(grader_memory)]
    text = json.dumps(values, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- shards
def parse_shard(text: str) -> tuple[int, int]:
    """(K, N) from ``K/N`` with 1 <= K <= N; argparse turns the ValueError into a
    message naming ``--shard``."""
    parts = str(text).strip().split("/")
    try:
        k, n = (int(x) for x in parts)
    except ValueError:
        raise ValueError(f"expected K/N such as 1/4 (shard K of N), got {text!r}") from None
    if n < 1 or not 1 <= k <= n:
        raise ValueError(f"expected K/N with 1 <= K <= N, got {text!r}")
    return k, n


def shard_of(student: str, n: int) -> int:
    """The shard (1..n) of a learner: from the SHA-256 of the cleaned student id, so
    every machine given the same submissions puts every learner in the same shard."""
    digest = hashlib.sha256(student.encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "big") % n + 1


def in_shard(student: str, shard: tuple[int, int] | None) -> bool:
    return shard is None or shard_of(student, shard[1]) == shard[0]


class _GradebookLock:
    """Shards merging into one PostgreSQL gradebook at the same time take turns: nbgrader
    creates tables, the course and the assignments where they are missing, and two
    processes doing so at once would collide. A session-level advisory lock, held
    around the merge and the reports; nothing for other databases."""

    KEY = 0x616E64726561  # any fixed number, the same for every shard

    def __init__(self, db_url: str):
        self.db_url, self.engine, self.con = db_url, None, None

    def __enter__(self):
        if self.db_url.startswith("postgresql"):
            import sqlalchemy
            self.engine = sqlalchemy.create_engine(self.db_url)
            self.con = self.engine.connect()
            self.con.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": self.KEY})
        return self

    def __exit__(self, *exc):
        if self.con is not None:
            import sqlalchemy
            try:
                self.con.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": self.KEY})
            finally:
                self.con.close()
                self.engine.dispose()
        return False


def run(submissions: Path, *, workers: int | None = None, db_url: str | None = None, out: Path = DEFAULT_OUT,
        timeout: int | None = None, deadline: float = 600.0, limits: sandbox.Limits | None = None,
        uid_base: int = UID_BASE, force: bool = False, progress: bool = True, max_jobs: int | None = None,
        max_output: int = 2 << 20, grader_memory: int = 3 * GiB, zygote: bool = True, log=print,
        shard: tuple[int, int] | None = None) -> dict:
    """Grade ``submissions``; returns a summary dict (also written to OUT/report.*).

    The workers are started with multiprocessing's *spawn* method, so a script that
    calls this function must do so under ``if __name__ == "__main__":`` (each worker
    imports the calling script's main module, as with any spawn-based pool).

    ``shard=(K, N)`` grades and reports only the learners of shard K of N
    (:func:`shard_of`): N machines given the same submissions and gradebook grade
    disjoint sets that together cover the class."""
    from . import cgroups
    from . import merge as merge_mod
    from . import report as report_mod

    out = Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    db_url = db_url or default_db_url()
    limits = limits or sandbox.Limits()
    root_mode = os.geteuid() == 0

    template_db, assignments, tdigest = make_template(out)
    tdigest = f"{tdigest}-{_options_digest(limits, timeout, deadline, max_output, grader_memory)}"
    subs, skipped = collect(Path(submissions), assignments)
    for s in skipped:
        log(f"note: {textsafe.line(s, 400)}")
    class_size = len({s.student for s in subs})
    if shard is not None:
        subs = [s for s in subs if in_shard(s.student, shard)]
    programs = _seccomp_programs(out)

    # the sandbox, tried once with exactly the settings the kernels get
    probe_dir = out / "workers" / "probe"
    shutil.rmtree(probe_dir, ignore_errors=True)
    probe = prepare_worker_dir(probe_dir, uid_base + PROBE_UID_OFFSET if root_mode else None, limits,
                               template_db.parent, seccomp_file=programs["kernel"])
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
        tree = None
        try:
            tree = cgroups.open_tree()
        except cgroups.CgroupUnavailable as exc:
            log(f"note: no cgroup can be used here ({textsafe.line(exc, 400)}); falling back to rlimits: "
                "a kernel's address space is capped, but memory it holds outside it (shared memory, "
                "memfd) is not, and the grading workers have no memory cap")
        try:
            graded, interrupted = _grade_all(out, todo, n_workers, tree, programs, template_db, tdigest, limits,
                                             uid_base if root_mode else None, timeout, deadline, max_output,
                                             grader_memory, zygote, progress, log)
        finally:
            if tree is not None:
                try:
                    tree.close()
                except OSError as exc:  # the grades are kept; only the cleaning up failed
                    log(f"warning: a cgroup of this run could not be removed ({textsafe.line(exc, 400)}); "
                        "its processes were killed")

    # merge every submission whose state is current into the course gradebook
    sources: dict[str, list[tuple[str, str]]] = {}
    records = []
    for s in subs:
        st = read_state(out, s.student, s.assignment)
        if st is None or st.get("digest") != s.digest() or st.get("template") != tdigest:
            continue
        records.append(st)
        wdb = out / "workers" / st["worker"] / "gradebook.db"
        if wdb.is_file() and st.get("notebooks"):
            sources.setdefault(f"sqlite:///{wdb}", []).append((s.student, s.assignment))
    with _GradebookLock(db_url):
        merged = merge_mod.merge(db_url, sources) if sources else 0
        roster = {s.student for s in subs}
        try:
            from nbgrader.api import Gradebook
            with Gradebook(db_url) as gb:
                roster |= {st.id for st in gb.students if in_shard(st.id, shard)}
        except Exception:  # noqa: BLE001 - a roster is a convenience
            pass
        header = None if shard is None else (
            f"Shard {shard[0]}/{shard[1]}: {len(roster)} learner(s) of this shard are reported here "
            f"({len({s.student for s in subs})} of the {class_size} who handed something in); "
            "the other shards report the rest.")
        summary = report_mod.write_reports(out, db_url, records, skipped, graded_now=len(graded),
                                           expected=len(subs), assignments=dict(assignments), roster=roster,
                                           header=header)
    summary["shard"] = shard
    summary["merged"] = merged
    summary["interrupted"] = interrupted
    summary["graded_now"] = len(graded)
    log(summary["text"])
    return summary


def _grade_all(out, todo, n_workers, tree, programs, template_db, tdigest, limits, uid_base, timeout, deadline,
               max_output, grader_memory, zygote, progress, log) -> tuple[list[dict], bool]:
    """Run the workers over ``todo``; a worker that dies (a cap hit in the grader itself)
    is replaced and its submission recorded as failed. Returns (records, interrupted)."""
    inbox = out / "inbox"
    by_key = {}
    for s in todo:
        d = inbox / s.student / s.assignment
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        s.write(d)
        by_key[(s.student, s.assignment)] = s
    contexts = []
    for i in range(n_workers):
        wdir = out / "workers" / f"w{i}"
        # a worker gradebook made from another version of the assignments is stale
        stamp = wdir / "template.digest"
        if stamp.is_file() and stamp.read_text() != tdigest:
            shutil.rmtree(wdir)
        kuid = None if uid_base is None else uid_base + i
        auid = None if uid_base is None else uid_base + ANSWER_UID_OFFSET + i
        groups = {}
        if tree is not None:
            groups = {"kernel": tree.group(f"w{i}-kernel", limits.memory, limits.processes),
                      "answer": tree.group(f"w{i}-answer", limits.memory, limits.processes),
                      "grader": tree.group(f"w{i}-grader", grader_memory, 4096)}
        prepare_worker_dir(wdir, kuid, limits, template_db.parent, seccomp_file=programs["kernel"],
                           cgroup_procs=groups["kernel"].procs_files() if groups else [])
        answer_spec(wdir, auid, limits, seccomp_file=programs["answer"],
                    cgroup_procs=groups["answer"].procs_files() if groups else []).save(wdir / "answer.json")
        stamp.write_text(tdigest)
        contexts.append({"wdir": str(wdir), "out": str(out), "parent": os.getpid(), "timeout": timeout, "deadline": deadline,
                         "template_dir": str(template_db.parent), "nest_filter": programs["nest"],
                         "zygote_filter": programs["answer"],
                         "max_output": max_output, "zygote": zygote, "answer_uid": auid,
                         "grader_procs": groups["grader"].procs_files() if groups else [],
                         "cgroup_version": tree.version if tree is not None else None,
                         "groups": {k: [str(d) for d in g.dirs] for k, g in groups.items() if k != "grader"}})
    # Workers start from a fresh interpreter: a forked copy of a process that has
    # already run PyTorch inherits its OpenMP thread pool without the threads,
    # and the first parallel operation in the child hangs or crashes.
    ctx_mp = mp.get_context("spawn")
    jobs, results = ctx_mp.Queue(), ctx_mp.Queue()
    for s in todo:
        jobs.put({"student": s.student, "assignment": s.assignment, "digest": s.digest(), "template": tdigest,
                  "refused": s.refused, "notes": s.notes})
    for _ in contexts:
        jobs.put(None)

    def start(i):
        p = ctx_mp.Process(target=worker_main, args=(i, contexts[i], jobs, results), daemon=True)
        p.start()
        try:  # capped from its first instruction on, not only once it has started up
            sandbox.join_cgroup(contexts[i].get("grader_procs") or [], p.pid)
        except OSError:
            pass  # the worker joins by itself (and says so if it cannot)
        return p

    procs = [start(i) for i in range(n_workers)]
    idle_deaths = {i: 0 for i in range(n_workers)}  # deaths with no job in hand: a broken worker
    current: dict[int, tuple[str, str] | None] = {i: None for i in range(n_workers)}
    since: dict[int, float] = {}  # when each worker took its current submission
    # a worker still on one submission this long after its deadline is stuck in the
    # grader's own code (the sandbox is killed at the deadline): it is replaced
    stuck_after = deadline + 120.0
    stuck: set[int] = set()
    finished = set()
    graded: list[dict] = []
    interrupted = False
    bar = Progress(len(todo), progress)
    noted_mode = False

    def take(item) -> None:
        nonlocal noted_mode
        if item.get("event") == "start":
            current[item["worker"]] = (item["student"], item["assignment"])
            since[item["worker"]] = time.monotonic()
        elif item.get("event") == "ready":
            if item.get("answer_mode") != "zygote" and not noted_mode:
                noted_mode = True
                log(f"note: answer servers run one sandbox per notebook ({textsafe.line(item.get('why') or '', 300)}); "
                    "grading is slower")
        else:
            for i, key in current.items():
                if key == (item["student"], item["assignment"]):
                    current[i] = None
            graded.append(item)
            bar.update(item)

    try:
        while len(graded) < len(todo):
            try:
                take(results.get(timeout=1.0))
                continue
            except queue.Empty:
                pass
            for i, p in enumerate(procs):
                if i in finished:
                    continue
                if p.is_alive():
                    if current.get(i) is not None and time.monotonic() - since.get(i, time.monotonic()) > stuck_after:
                        log(f"error: grading worker w{i} made no progress on {current[i][0]}/{current[i][1]} "
                            f"for {stuck_after:.0f} s; it is replaced")
                        p.kill()
                        p.join(timeout=10)
                        stuck.add(i)
                    else:
                        continue
                key = current.get(i)
                if key is None and p.exitcode == 0:
                    finished.add(i)  # this worker ran out of jobs
                    continue
                # the worker died: drain what it sent, record its submission, replace it
                try:
                    while True:
                        take(results.get(timeout=0.5))
                except queue.Empty:
                    pass
                key = current.get(i)
                if key is not None:
                    s = by_key[key]
                    rec = {"student": s.student, "assignment": s.assignment, "digest": s.digest(),
                           "template": tdigest, "worker": f"w{i}", "status": STATUS_FAILED,
                           "reason": (f"the grader made no progress on this submission for {stuck_after:.0f} s"
                                      if i in stuck else
                                      "the grading worker was killed while grading this submission"),
                           "errors": [], "notebooks": {}, "score": 0.0, "max_score": None,
                           "needs_manual_grade": False, "seconds": 0, "refused": s.refused, "notes": s.notes,
                           "limits": ["memory (the grading worker hit its own cap)"]
                           if p.exitcode == -9 and i not in stuck else []}
                    stuck.discard(i)
                    write_state(out, rec)
                    take(rec)
                    current[i] = None
                    procs[i] = start(i)
                elif len(graded) < len(todo):
                    idle_deaths[i] += 1
                    if idle_deaths[i] > 2:
                        finished.add(i)
                        log(f"error: grading worker w{i} keeps dying before it grades anything "
                            f"(exit code {p.exitcode}); see the messages above")
                    else:
                        procs[i] = start(i)
            if all(i in finished for i in range(len(procs))) and len(graded) < len(todo):
                log(f"error: the workers stopped with {len(todo) - len(graded)} submissions left")
                break
    except KeyboardInterrupt:
        interrupted = True
        log(f"\ninterrupted: {len(graded)} of {len(todo)} graded in this run; "
            "run the same command again to grade the rest")
    finally:
        bar.close()
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(timeout=10)
        if uid_base is not None:
            for i in range(len(procs)):
                sandbox.kill_uid(uid_base + i)  # nothing of the learners' code outlives the run
                sandbox.kill_uid(uid_base + ANSWER_UID_OFFSET + i)
        jobs.cancel_join_thread()
        results.cancel_join_thread()
    return graded, interrupted


def parse_size(text: str) -> int:
    """Bytes in a size such as ``4G``, ``512M``, ``64k`` or ``1000``; argparse turns the
    ValueError into a message naming the option."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = str(text).strip().lower().rstrip("b").rstrip("i")
    try:
        value = float(t[:-1]) * units[t[-1]] if t and t[-1] in units else float(t)
    except (ValueError, KeyError):
        raise ValueError(f"expected a size such as 4G, 512M or 65536, got {text!r}") from None
    if value <= 0 or value != value:
        raise ValueError(f"expected a positive size, got {text!r}")
    return int(value)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m classroom.grade", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("submissions", type=Path, help="folder or zip of submissions")
    p.add_argument("--workers", type=int, default=None, help="parallel workers (default: number of cores)")
    p.add_argument("--db", default=None, help="course gradebook URL (default: $NBGRADER_DB_URL or gradebook.db)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="working and report folder (default: _grading)")
    p.add_argument("--timeout", type=int, default=None, help="seconds per cell (default: nbgrader_config.py)")
    p.add_argument("--deadline", type=float, default=600, help="seconds per submission before its sandbox is killed")
    p.add_argument("--memory", default="4G", help="memory cap of a kernel and of an answer server: a cgroup "
                   "limit where the machine allows one, and the address-space limit (default 4G)")
    p.add_argument("--processes", type=int, default=256, help="processes+threads limit of a kernel")
    p.add_argument("--cpu", type=int, default=600, help="CPU-seconds limit of a kernel")
    p.add_argument("--grader-memory", default="3G", help="memory cap of each grading worker itself (default 3G)")
    p.add_argument("--max-output", default="2M", help="output kept per notebook; the rest is dropped (default 2M)")
    p.add_argument("--uid-base", type=int, default=UID_BASE,
                   help=f"as root: worker K's kernels run as uid BASE+K, its answer servers as BASE+{ANSWER_UID_OFFSET}+K")
    p.add_argument("--no-zygote", action="store_true",
                   help="start one sandbox per notebook for the independent check (slower; for machines "
                        "without nested user namespaces this happens by itself)")
    p.add_argument("--shard", default=None, metavar="K/N",
                   help="grade only shard K of N of the learners (by a hash of the student id), so that N "
                        "machines with the same submissions and --db grade the class between them")
    p.add_argument("--force", action="store_true", help="regrade everything")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    sizes = {}
    for opt in ("memory", "grader_memory", "max_output"):
        try:
            sizes[opt] = parse_size(getattr(a, opt))
        except ValueError as exc:
            p.error(f"--{opt.replace('_', '-')}: {exc}")
    for opt in ("processes", "cpu", "workers", "timeout"):
        value = getattr(a, opt)
        if value is not None and value <= 0:
            p.error(f"--{opt}: expected a positive number, got {value}")
    shard = None
    if a.shard is not None:
        try:
            shard = parse_shard(a.shard)
        except ValueError as exc:
            p.error(f"--shard: {exc}")
    if a.deadline <= 0:
        p.error(f"--deadline: expected a positive number of seconds, got {a.deadline}")
    limits = sandbox.Limits(memory=sizes["memory"], processes=a.processes, cpu_seconds=a.cpu)
    try:
        summary = run(a.submissions, workers=a.workers, db_url=a.db, out=a.out, timeout=a.timeout,
                      deadline=a.deadline, limits=limits, uid_base=a.uid_base, force=a.force,
                      progress=not a.no_progress, max_output=sizes["max_output"],
                      grader_memory=sizes["grader_memory"], zygote=not a.no_zygote, shard=shard)
    except sandbox.SandboxUnavailable as exc:
        print(f"error: cannot isolate the learners' code on this machine: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, ValueError) as exc:  # an unreadable submissions folder or zip
        print(f"error: {textsafe.line(exc, 500)}", file=sys.stderr)
        return 2
    if summary["interrupted"]:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
