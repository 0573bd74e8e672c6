"""The sandbox on its own (no nbgrader): what a process inside can see and do, the
clear refusal where the machine cannot sandbox, and the submission reader's safety."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from classroom import grade
from classroom.intake import collect, safe_student_id
from classroom.isolation import uids
from classroom.isolation import bwrap as sandbox

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = {"02_layernorm": ["layernorm"], "03_gelu": ["gelu"]}

PROBE = r"""
import json, os, socket
res = {"uid": os.getuid(), "cwd": os.getcwd()}
def attempt(name, fn):
    try:
        fn()
        res[name] = "ok"
    except Exception as exc:
        res[name] = type(exc).__name__
attempt("read_solutions", lambda: open(os.environ["REPO"] + "/solutions/03_gelu/gelu.ipynb").read())
attempt("list_repo", lambda: res.setdefault("repo", sorted(os.listdir(os.environ["REPO"]))))
attempt("read_gradebook", lambda: open(os.environ["SECRET"]).read())
attempt("write_outside", lambda: open(os.environ["OUTSIDE"] + "/x", "w").write("x"))
attempt("write_own", lambda: open("mine.txt", "w").write("x"))
attempt("network", lambda: socket.create_connection(("127.0.0.1", int(os.environ["PORT"])), timeout=2))
attempt("memory", lambda: bytearray(8 << 30))
attempt("import_ref", lambda: __import__("andrea_ref.config"))
print(json.dumps(res))
"""


@pytest.fixture()
def box(tmp_path):
    work, scratch = tmp_path / "autograded" / "alice" / "03_gelu", tmp_path / "scratch"
    work.mkdir(parents=True)
    scratch.mkdir()
    (tmp_path / "rt").mkdir()
    uid = uids.UID_BASE + 990 if os.geteuid() == 0 else None
    if uid is not None:
        os.chown(scratch, uid, uid)
        os.chown(tmp_path / "rt", uid, uid)
        os.chmod(tmp_path, 0o755)
    ro, pypath = sandbox.default_ro_paths(ROOT)
    spec = sandbox.SandboxSpec(scratch_root=str(scratch), runtime_dir=str(tmp_path / "rt"),
                               pidfile=str(tmp_path / "pid"), uid=uid, ro_paths=ro, pythonpath=pypath,
                               limits=sandbox.Limits(memory=2 << 30, processes=64, cpu_seconds=30))
    return spec, work, scratch, tmp_path


def test_inside_the_sandbox(box):
    spec, work, scratch, tmp = box
    secret = tmp / "gradebook.db"
    secret.write_text("grades")
    import socket
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    spec.env = {"REPO": str(ROOT), "SECRET": str(secret), "OUTSIDE": str(tmp),
                "PORT": str(server.getsockname()[1])}
    argv = sandbox.bwrap_argv(spec, work, scratch, [spec.python, "-c", PROBE])
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": ""})
    server.close()
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["uid"] == (spec.uid if spec.uid is not None else os.getuid())
    assert res["cwd"] == str(work)
    assert res["read_solutions"] == "FileNotFoundError"
    assert res["repo"] == sorted({".venv", "andrea_ref", "classroom"} & set(os.listdir(ROOT)))  # code only
    assert res["read_gradebook"] == "FileNotFoundError"
    assert res["write_outside"] in ("PermissionError", "FileNotFoundError")
    assert res["write_own"] == "ok" and (scratch / "mine.txt").read_text() == "x"
    assert not (work / "mine.txt").exists()  # the real working dir is never written by the kernel
    assert res["network"] == "ConnectionRefusedError"
    assert res["memory"] == "MemoryError"
    assert res["import_ref"] == "ok"
    assert not (tmp / "x").exists()


def test_clear_message_when_bubblewrap_is_missing(box, monkeypatch):
    spec = box[0]
    real = sandbox.which
    monkeypatch.setattr(sandbox, "which", lambda name: None if name == "bwrap" else real(name))
    with pytest.raises(sandbox.SandboxUnavailable) as err:
        sandbox.check(spec)
    msg = str(err.value)
    assert "`bwrap` is not installed" in msg and "bubblewrap" in msg and "user namespaces" in msg


def test_grade_command_refuses_without_sandbox(tmp_path, monkeypatch, capsys):
    def no_sandbox(spec):
        raise sandbox.SandboxUnavailable("bubblewrap could not create the sandbox: Operation not permitted")
    monkeypatch.setattr(sandbox, "check", no_sandbox)
    handed_in = tmp_path / "subs" / "alice" / "03_gelu" / "gelu.ipynb"
    handed_in.parent.mkdir(parents=True)
    shutil.copyfile(ROOT / "exercises" / "03_gelu" / "gelu.ipynb", handed_in)
    rc = grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--db",
                     f"sqlite:///{tmp_path / 'db.db'}", "--no-progress"])
    assert rc == 2
    assert "cannot isolate the learners' code" in capsys.readouterr().err
    assert not (tmp_path / "db.db").exists()


def test_sandbox_check_passes_here(box):
    sandbox.check(box[0])


# --------------------------------------------------------------------------- collect
def _nb(text: str = "") -> bytes:
    return json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5, "x": text}).encode()


def test_collect_nbgrader_folder(tmp_path):
    base = tmp_path / "submitted"
    (base / "alice" / "03_gelu").mkdir(parents=True)
    (base / "alice" / "03_gelu" / "gelu.ipynb").write_bytes(_nb("a"))
    (base / "alice" / "03_gelu" / "notes.txt").write_text("mine")
    (base / "alice" / "03_gelu" / "peek.ipynb").symlink_to(ROOT / "solutions" / "03_gelu" / "gelu.ipynb")
    (base / "bob" / "02_layernorm").mkdir(parents=True)
    (base / "bob" / "02_layernorm" / "layernorm.ipynb").write_bytes(_nb("b"))
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    # files beside the released notebooks are no longer given to the kernel: they are
    # listed in `refused` instead of `files`
    got = {(s.student, s.assignment): (sorted(s.files), s.refused) for s in subs}
    assert got == {("alice", "03_gelu"): (["gelu.ipynb"], ["notes.txt"]),
                   ("bob", "02_layernorm"): (["layernorm.ipynb"], [])}
    assert any("peek.ipynb" in p for p in problems)


def test_collect_platform_zip(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("carol_gelu.ipynb", _nb("c"))  # <student>_<notebook>
        zf.writestr("dave_02_layernorm.ipynb", _nb("d"))  # <student>_<assignment>
        zf.writestr("erin/gelu.ipynb", _nb("e"))  # <student>/<notebook>
        # a folder beside other learners is a learner's folder, never a wrapping one:
        # "export" is read as a learner, and frank's notebook inside it is refused
        zf.writestr("export/frank/03_gelu/gelu.ipynb", _nb("f"))
        zf.writestr("../evil_gelu.ipynb", _nb("x"))
        zf.writestr("/abs_gelu.ipynb", _nb("x"))
        link = zipfile.ZipInfo("gina_gelu.ipynb")
        link.external_attr = (0o120777 << 16)
        zf.writestr(link, "/etc/passwd")
        zf.writestr("readme.txt", "hello")
    path = tmp_path / "class.zip"
    path.write_bytes(buf.getvalue())
    subs, problems = collect(path, ASSIGNMENTS, students={"carol", "dave", "erin"})  # dave, not dave_02
    got = {(s.student, s.assignment): s.files for s in subs}
    assert got == {("carol", "03_gelu"): {"gelu.ipynb": _nb("c")},
                   ("dave", "02_layernorm"): {"layernorm.ipynb": _nb("d")},
                   ("erin", "03_gelu"): {"gelu.ipynb": _nb("e")}}
    text = "\n".join(problems)
    for bad in ("../evil_gelu.ipynb", "/abs_gelu.ipynb", "gina_gelu.ipynb", "readme.txt",
                "export/frank/03_gelu/gelu.ipynb"):
        assert bad in text
    # the wrapped nbgrader layout is read when one folder wraps the whole class
    wrapped = tmp_path / "wrapped.zip"
    with zipfile.ZipFile(wrapped, "w") as zf:
        zf.writestr("export/frank/03_gelu/gelu.ipynb", _nb("f"))
        zf.writestr("export/carol_gelu.ipynb", _nb("c"))
    subs, problems = collect(wrapped, ASSIGNMENTS)
    assert {(s.student, s.assignment): s.files for s in subs} == {
        ("carol", "03_gelu"): {"gelu.ipynb": _nb("c")}, ("frank", "03_gelu"): {"gelu.ipynb": _nb("f")}}
    assert problems == []


def test_student_ids_are_made_safe():
    assert safe_student_id("Ana María O'Neil") == "Ana_Mar_a_O_Neil"
    assert safe_student_id("..") is None
    assert safe_student_id("../../x") == "x" or safe_student_id("../../x") is None
    assert safe_student_id("submitted") is None


def test_unprivileged_grader_mode(tmp_path):
    """Graded by an ordinary user: the kernel keeps that uid in a user namespace, with
    the process limit counted on top of what the user already runs."""
    if os.geteuid() != 0 or not Path("/usr/bin/python3").is_file():
        pytest.skip("needs root to become an ordinary user, and the system python")
    base = Path(__import__("tempfile").mkdtemp(prefix="andrea-nonroot-"))  # reachable by that user
    try:
        os.chmod(base, 0o777)
        script = base / "probe.py"
        script.write_text(
            "import sys, os, subprocess, pathlib\n"
            f"sys.path.insert(0, {str(ROOT)!r})\n"
            "from classroom.isolation import bwrap as sandbox\n"
            "b = pathlib.Path(sys.argv[1])\n"
            "for d in ('s', 'rt'): (b / d).mkdir(parents=True)\n"
            "spec = sandbox.SandboxSpec(scratch_root=str(b / 's'), runtime_dir=str(b / 'rt'), pidfile=str(b / 'p'),"
            " uid=None, python='/usr/bin/python3', ro_paths=[], pythonpath=[],"
            " limits=sandbox.Limits(memory=1 << 30, processes=50))\n"
            "sandbox.check(spec)\n"
            "argv = sandbox.bwrap_argv(spec, b / 's', b / 's', ['/usr/bin/python3', '-c',"
            " 'import os, resource; print(os.getuid(), resource.getrlimit(resource.RLIMIT_AS)[0],"
            " os.path.exists(\"/root\"))'])\n"
            "print(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)\n")
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                               "/usr/bin/python3", str(script), str(base / "run")],
                              capture_output=True, text=True, timeout=60, env={"PATH": os.environ["PATH"],
                                                                                "HOME": str(base)})
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["65534", str(1 << 30), "False"]
    finally:
        import shutil
        shutil.rmtree(base, ignore_errors=True)


def test_working_copy_leaves_out_the_graded_notebook(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "data").mkdir(parents=True)
    dst.mkdir()
    (src / "gelu.ipynb").write_text("hidden tests in here")
    (src / "weights.txt").write_text("1 2 3")
    (src / "data" / "extra.ipynb").write_text("a learner's own notebook")
    (src / "link").symlink_to("/etc/passwd")
    sandbox.copy_regular_tree(src, dst, None, skip_top=(".ipynb",))
    assert sorted(str(p.relative_to(dst)) for p in dst.rglob("*")) == ["data", "data/extra.ipynb", "weights.txt"]
