"""Nothing a learner's code can write outlives its notebook.

A hostile learner's answer cell -- run in the kernel nbgrader grades with *and* in the
answer server of the independent check -- walks the whole file system it can see
(everything but /proc and /sys), writes a marker file into every folder it can write
to (/tmp, /dev/shm, /var/tmp, the home and working folders, the runtime folder with the
kernel's sockets, every bind mount) and leaves SysV IPC objects and a POSIX message
queue behind. Learners graded after it on the same worker, in the same run and in the
next run over the same output folder, walk the same way: they must find none of it.

The learners tell the test what they saw through their points (a reader that finds
anything returns a wrong GELU; a writer that could not write where any notebook must
be able to -- /tmp, $HOME, its working folder -- does too) and through their kernel's
printed output. The output folder lies outside /tmp on purpose: a folder below /tmp is
hidden by a fork's fresh /tmp anyway, which would hide the leak this test is about.
Both ways of starting sandboxes are tried: forked from the worker's zygotes, and one
bubblewrap sandbox per kernel and per answer server.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest

from hostile.submissions import ASSIGNMENT, GELU, NOTEBOOK, notebook_with  # noqa: E402

from classroom import orchestration  # noqa: E402
from classroom.course import template  # noqa: E402
from classroom.isolation import bwrap as sandbox  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
PREFIX = "andrea-leak-"

# Runs in the kernel and in the answer server alike (standard library, plus ctypes).
WALK = textwrap.dedent(r'''
    import json, os, socket, time
    PREFIX = "@PREFIX@"
    try:  # (the answer server refuses ctypes: there only the files are tried)
        import ctypes, ctypes.util
        _libc = ctypes.CDLL(None, use_errno=True)
        try:
            _rt = ctypes.CDLL(ctypes.util.find_library("rt") or "librt.so.1", use_errno=True)
        except OSError:
            _rt = _libc
        _rt.mq_open.restype = ctypes.c_int
    except Exception:
        _libc = _rt = None
    IPC_KEY, MQ_NAME, ABSTRACT = 0x5A17DEA, b"/andrea-leak", b"\0andrea-leak"

    def _where():
        try:
            return "kernel" if type(get_ipython()).__name__ == "ZMQInteractiveShell" else "answer"
        except NameError:
            return "unknown"

    def walk(visit, seconds=60):
        """Every folder visible here (not /proc, not /sys), each once."""
        end, seen, todo = time.monotonic() + seconds, set(), ["/"]
        while todo and time.monotonic() < end:
            d = todo.pop()
            try:
                st = os.stat(d, follow_symlinks=False)
                if (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                with os.scandir(d) as it:
                    entries = list(it)
            except OSError:
                continue
            visit(d, entries)
            for e in entries:
                try:
                    if e.is_dir(follow_symlinks=False) and e.path not in ("/proc", "/sys"):
                        todo.append(e.path)
                except OSError:
                    pass
        return len(seen)
''').replace("@PREFIX@", PREFIX)

WRITER = WALK + textwrap.dedent(r'''
    written = []
    def _write(d, entries):
        try:
            if os.statvfs(d).f_flag & os.ST_RDONLY:
                return
            name = os.path.join(d, f"{PREFIX}{_where()}-{os.getpid()}")
            fd = os.open(name, os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o666)
            os.write(fd, b"left for the next learner")
            os.close(fd)
            written.append(d)
        except OSError:
            pass
    folders = walk(_write)
    ipc = {} if _libc is None else {
        "shm": _libc.shmget(IPC_KEY, 4096, 0o1666), "msg": _libc.msgget(IPC_KEY, 0o1666),
        "sem": _libc.semget(IPC_KEY, 1, 0o1666), "mq": _rt.mq_open(MQ_NAME, os.O_CREAT | os.O_RDWR, 0o666, None)}
    try:
        if os.fork() == 0:  # holds an abstract unix socket for a while (bounded)
            try:
                s = socket.socket(socket.AF_UNIX); s.bind(ABSTRACT); s.listen(1); time.sleep(30)
            finally:
                os._exit(0)
    except Exception:  # (refused in the answer server)
        pass
    print("LEAK-WRITTEN", _where(), folders, json.dumps(sorted(written)), json.dumps(ipc), sep="\t")
    must = {"/tmp", os.path.realpath(os.path.expanduser("~")), os.path.realpath(os.getcwd())}
    missing = must - {os.path.realpath(w) for w in written}
''') + GELU + textwrap.dedent('''
    if missing:  # the walk is broken: this writer proves nothing, so it scores nothing
        print("LEAK-MISSING", sorted(missing))
        gelu = lambda x: x * 0
''')

READER = WALK + textwrap.dedent(r'''
    found = []
    def _look(d, entries):
        found.extend(e.path for e in entries if e.name.startswith(PREFIX))
    folders = walk(_look)
    if _libc is not None:
        for kind, fn, args in (("shm", _libc.shmget, (IPC_KEY, 0, 0)), ("msg", _libc.msgget, (IPC_KEY, 0)),
                               ("sem", _libc.semget, (IPC_KEY, 0, 0))):
            if fn(*args) != -1:
                found.append(f"SysV {kind} {IPC_KEY:#x}")
        if _rt.mq_open(MQ_NAME, os.O_RDONLY, 0, None) != -1:
            found.append("POSIX mqueue /andrea-leak")
    try:
        s = socket.socket(socket.AF_UNIX)
    except Exception:  # (refused in the answer server)
        s = None
    if s is not None:
        try:
            s.connect(ABSTRACT)
            found.append("abstract unix socket @andrea-leak")
        except OSError:
            pass
        finally:
            s.close()
    print("LEAK-FOUND", _where(), folders, json.dumps(found), sep="\t")
''') + GELU + textwrap.dedent('''
    if found:  # a channel from an earlier learner: this answer is marked wrong
        gelu = lambda x: x * 0
''')


def _kernel_lines(out: Path, student: str, tag: str) -> list[list]:
    nb = json.loads((out / "autograded" / student / ASSIGNMENT / NOTEBOOK).read_text())
    lines = []
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            text = o.get("text", "")
            for line in ("".join(text) if isinstance(text, list) else text).splitlines():
                if line.startswith(tag + "\t"):
                    lines.append(line.split("\t")[1:])
    return lines


def _record(out: Path, student: str) -> dict:
    return json.loads((out / "state" / student / f"{ASSIGNMENT}.json").read_text())


def _markers_below(folder: Path) -> list[str]:
    return sorted(str(p) for p in folder.rglob(f"{PREFIX}*"))


@pytest.fixture(scope="module", params=["zygote", "sandbox per job"])
def runs(request):
    # outside /tmp (see the module docstring); removed at the end
    base = Path(tempfile.mkdtemp(prefix="andrea-writable-", dir="/var/tmp"))
    try:
        out, db = base / "out", base / "course.db"
        released = json.loads((ROOT / "exercises" / ASSIGNMENT / NOTEBOOK).read_text())
        template_db, _, _ = template.make_template(out)
        db.write_bytes(template_db.read_bytes())
        limits = sandbox.Limits(memory=3 << 30, processes=128, cpu_seconds=120)
        summaries = []
        for n, learners in enumerate([{"a_writer": WRITER, "b_reader": READER}, {"c_reader": READER}]):
            subs = base / f"subs{n}"
            for student, source in learners.items():
                path = subs / student / ASSIGNMENT / NOTEBOOK
                path.parent.mkdir(parents=True)
                path.write_text(notebook_with(released, source))
            summaries.append(orchestration.run(subs, workers=1, db_url=f"sqlite:///{db}", out=out, timeout=90,
                                               deadline=240, limits=limits, progress=False, log=lambda *a: None,
                                               zygote=request.param == "zygote"))
        yield {"out": out, "summaries": summaries}
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _worked_in_both(rec: dict) -> bool:
    """The answer's walk ended well in the kernel (full marks there) and in the answer
    server (the independent check agrees cell by cell). Its points themselves are withheld:
    an answer that walks the file system and makes IPC objects is held for review."""
    kernel = sum(v for nb in rec["kernel_notebooks"].values() for v in nb.values())
    return (rec["status"] == "ok" and kernel == rec["max_score"]
            and not any(c.get("differs") for c in rec["checks"].values()))


def _shown(rec: dict) -> dict:
    return {"status": rec["status"], "reason": rec.get("reason"), "kernel": rec["kernel_notebooks"],
            "checks": {nb: {k: c.get(k) for k in ("problem", "differs", "held", "messages")}
                       for nb, c in rec["checks"].items()}}


def test_the_writer_wrote_everywhere_it_could(runs):
    out = runs["out"]
    rec = _record(out, "a_writer")
    assert _worked_in_both(rec), json.dumps(_shown(rec))[:3000]  # its walk worked in both processes
    (where, folders, written, ipc), = _kernel_lines(out, "a_writer", "LEAK-WRITTEN")
    written = json.loads(written)
    assert where == "kernel" and int(folders) > 1000  # it saw the whole file system
    assert "/tmp" in written and len(written) >= 3, written
    ipc = json.loads(ipc)
    assert set(ipc) == {"shm", "msg", "sem", "mq"} and all(v >= 0 for v in ipc.values()), ipc  # made in the kernel


@pytest.mark.parametrize("student", ["b_reader", "c_reader"])
def test_later_learners_find_nothing(runs, student):
    """b_reader: the next learner on the same worker; c_reader: the next grading run."""
    out = runs["out"]
    (where, folders, found), = _kernel_lines(out, student, "LEAK-FOUND")
    assert where == "kernel" and int(folders) > 1000
    assert json.loads(found) == []
    rec = _record(out, student)
    assert _worked_in_both(rec), json.dumps(_shown(rec))[:3000]  # its answer server found nothing either


def test_no_marker_is_left_on_the_grading_machine(runs):
    """Every folder a sandbox could write to was the job's own and is gone with it."""
    assert _markers_below(runs["out"]) == []
