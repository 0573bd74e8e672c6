"""``nbgrader autograde`` for one submission, with every kernel in the isolation stage.

A grading worker owns a copy of the course (its folder, with its own SQLite gradebook
made from the run's template, :func:`prepare_course_dir`) and one nbgrader API for it
(:func:`nbgrader_api`: kernels started by the isolation backend, output capped in bytes
(:mod:`.capped`), cells scored by the course's rule (:mod:`.scores`), markup in the
feedback pages sanitised). :func:`autograde` runs one submission under a deadline for
all of its notebooks; :func:`graded_notebooks` then reads what the kernels produced.
"""
from __future__ import annotations

import json
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbgrader import api as gradebook_api
from nbgrader.apps.api import NbGraderAPI
from nbgrader.converters.autograde import Autograde
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import SaveAutoGrades

from ..isolation.backend import WorkerIsolation
from ..record import STATUS_FAILED, STATUS_OK, STATUS_TIMEOUT, SubmissionRecord
from ..reporting.feedback import FeedbackExporter
from . import capped
from .scores import SaveScores

MAX_NOTEBOOK = 64 << 20  # bytes: a graded notebook larger than this is not read
INTERRUPTED = ("KeyboardInterrupt", "CellTimeoutError")  # what a stopped cell raises


def prepare_course_dir(wdir: Path, template_dir: Path) -> None:
    """The worker's copy of the course: the template's gradebook (kept between runs of the
    same template: it holds the graded submissions) and the files autograde copies over
    a submission."""
    wdir.mkdir(parents=True, exist_ok=True)
    if not (wdir / "gradebook.db").is_file():
        shutil.copy(template_dir / "gradebook.db", wdir / "gradebook.db")
    shutil.rmtree(wdir / "source", ignore_errors=True)
    shutil.copytree(template_dir / "source", wdir / "source")


def share_gradebook_engines() -> None:
    """One SQLAlchemy engine per gradebook for the rest of this process.

    nbgrader opens a new engine for every ``Gradebook`` (about ten for each submission:
    autograde's steps, the feedback, the independent check's points), and every new
    engine compiles its SQL statements anew, which costs more than running them. A
    grading worker only ever opens its own gradebook: with this, every ``Gradebook`` of
    one URL gets the same engine (``Gradebook.close`` still ends its session and closes
    the engine's connections; the engine opens new ones when next used)."""
    if getattr(gradebook_api.create_engine, "shared_engines", None) is not None:
        return
    made, engines = gradebook_api.create_engine, {}

    def create_engine(url, **kwargs):
        key = (str(url), tuple(sorted(kwargs.items())))
        if key not in engines:
            engines[key] = made(url, **kwargs)
        return engines[key]

    create_engine.shared_engines = engines
    gradebook_api.create_engine = create_engine


def alembic_head_in_process() -> None:
    """nbgrader stamps each gradebook it creates with the alembic revision of its schema,
    which it learns by running the ``alembic`` program (``alembic heads``: a new Python
    process, about 2 s on a small machine, paid by every run for its course gradebook and
    its template). The same revision is read here, once, from nbgrader's own migration
    scripts with alembic's Python API, and nbgrader's API in this process uses it."""
    if getattr(gradebook_api.get_alembic_version, "in_process", False):
        return
    from alembic.script import ScriptDirectory

    head = ScriptDirectory(str(Path(gradebook_api.__file__).with_name("alembic"))).get_current_head()

    def get_alembic_version() -> str:
        return head

    get_alembic_version.in_process = True
    get_alembic_version.nbgrader = gradebook_api.get_alembic_version  # nbgrader's own, for comparison
    gradebook_api.get_alembic_version = get_alembic_version


def nbgrader_api(config, wdir: Path, isolation: WorkerIsolation, *, timeout: float | None,
                 max_output: int) -> NbGraderAPI:
    """nbgrader for the course folder ``wdir`` (``config``: the course's nbgrader_config)."""
    cfg = config
    cfg.CourseDirectory.root = str(wdir)
    cfg.CourseDirectory.source_directory = "source"
    cfg.CourseDirectory.db_url = f"sqlite:///{wdir / 'gradebook.db'}"
    for key, value in isolation.kernel_settings().items():
        section, trait = key.split(".")
        setattr(cfg[section], trait, value)
    # once the last cell has run, the sandbox is killed: no need to wait for a polite exit
    cfg.Execute.shutdown_kernel = "immediate"
    if timeout:
        cfg.Execute.timeout = timeout
    cfg.CappedExecute.max_output_bytes = max_output
    replaced = {"Execute": capped.CappedExecute, SaveAutoGrades.__name__: SaveScores}
    cfg.Autograde.autograde_preprocessors = [replaced.get(c.__name__, c)
                                             for c in Autograde.class_traits()["autograde_preprocessors"].default()]
    cfg.Autograde.create_student = True
    # feedback pages are sanitised whole, with one policy, by classroom.reporting.sanitiser
    # (nbconvert's own sanitiser would show a learner's HTML tables and images as escaped text)
    cfg.HTMLExporter.sanitize_html = False
    cfg.GenerateFeedback.exporter_class = FeedbackExporter  # HTMLExporter, its templates compiled once
    api = NbGraderAPI(coursedir=CourseDirectory(config=cfg), config=cfg)
    api.log.setLevel("ERROR")
    return api


def read_notebook_json(path: Path):
    """The submitted notebook as a dict, or None if it is missing, too large or not JSON."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_NOTEBOOK:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("cells"), list) else None


def failure_reason(result: dict) -> str:
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


@dataclass
class Autograded:
    """What nbgrader's run of one submission gave."""
    result: dict  # nbgrader's API result: success, log, error
    timed_out: bool  # the deadline killed it
    seconds: float


def autograde(api: NbGraderAPI, isolation: WorkerIsolation, student: str, assignment: str,
              deadline: float) -> Autograded:
    """nbgrader autograde of one submission; past ``deadline`` seconds its kernel is
    killed (and so every notebook of it still to run fails)."""
    capped.LIMIT_HITS.clear()
    fired = threading.Event()

    def on_deadline():
        fired.set()
        isolation.stop_kernel()

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
        isolation.stop_kernel()
    isolation.end_job()
    return Autograded(result, fired.is_set(), time.monotonic() - t0)


def judge(run: Autograded, record: SubmissionRecord, deadline: float, max_output: int) -> None:
    """The record's status and reason after nbgrader's run, and the output cap if hit."""
    result = run.result
    if run.timed_out:
        record.status, record.reason = STATUS_TIMEOUT, f"still running after {deadline:.0f} s: its sandbox was killed"
    elif not result.get("success") and "Timeout waiting for execute reply" in (result.get("log") or ""):
        record.status = STATUS_TIMEOUT
        record.reason = "a cell ran past the per-cell time limit and did not stop when interrupted"
    elif not result.get("success"):
        record.status, record.reason = STATUS_FAILED, failure_reason(result)
    else:
        record.status, record.reason = STATUS_OK, ""
    if capped.LIMIT_HITS:
        record.limits.append(f"output (more than {max_output} bytes per notebook; the rest was dropped)")


def write_log(run: Autograded, scratch: Path, log_file: Path) -> None:
    """nbgrader's log of the run and the first bytes of each kernel's own output."""
    kernel_logs = ""
    for log in sorted(scratch.glob("k-*/kernel.log")):
        kernel_logs += f"\n--- kernel output ({log.parent.name}, first bytes only) ---\n"
        kernel_logs += log.read_bytes()[:16384].decode("utf-8", "replace")
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.write_text((run.result.get("log") or "") + ("\n" + run.result["error"] if run.result.get("error") else "")
                        + kernel_logs)


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


def graded_notebooks(graded_dir: Path, keep: Path, record: SubmissionRecord) -> dict:
    """{notebook name: notebook} that nbgrader graded in ``graded_dir``, each copied into
    ``keep``; their errors go into the record, and cells stopped at the per-cell limit
    make it timed out."""
    shutil.rmtree(keep, ignore_errors=True)
    graded = {}
    for path in sorted(graded_dir.glob("*.ipynb")) if graded_dir.is_dir() else []:
        if path.stat().st_size > MAX_NOTEBOOK:
            record.limits.append(f"output (the graded notebook {path.name} is over {MAX_NOTEBOOK} bytes)")
            continue
        nb = nbformat.read(path, as_version=4)
        graded[path.stem] = nb
        for e in analyse_notebook(nb)["errors"]:
            record.errors.append({"notebook": path.stem, **e})
        keep.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, keep / path.name)
    if record.status == STATUS_OK and any(e["ename"] in INTERRUPTED for e in record.errors):
        record.status = STATUS_TIMEOUT
        cells = sorted({e["cell"] for e in record.errors if e["ename"] in INTERRUPTED})
        record.reason = f"{', '.join(cells)} ran past the per-cell time limit and were interrupted"
    return graded
