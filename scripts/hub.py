"""The course on a JupyterHub on one machine (``make hub``; README, "Running the course on a
JupyterHub"). Run as root, with the hub's environment (``.venv-hub``).

    scripts/hub.py setup                 the exchange, the hub's state folder, the course book
    scripts/hub.py course INSTRUCTOR     the instructor's course folder ~INSTRUCTOR/andrea-block-lab
    scripts/hub.py run                   start JupyterHub (hub/jupyterhub_config.py)
    scripts/hub.py return INSTRUCTOR ASSIGNMENT
                                         collect, grade with the course's sandboxed grader,
                                         release the feedback to the learners

**setup.** nbgrader's exchange (``ANDREA_HUB_EXCHANGE``, default ``/srv/nbgrader/exchange``)
is made world-writable with the sticky bit, as nbgrader's documentation asks of a shared
exchange (``chmod ugo+rw``; the sticky bit keeps a learner from removing what another
put there). nbgrader itself gives each course's ``inbound`` and ``feedback`` folders
write-and-enter but no read for others, so a learner cannot list anyone's submission or
feedback, and names each with a secret. The hub's state (``ANDREA_HUB_STATE``, default
``/srv/andrea-hub``) is root's only. The built book (``_build/html``, from ``make book``) is
copied to ``ANDREA_HUB_BOOK`` (default ``/srv/andrea-book``), readable by everyone and
writable by root only; each person's server serves it at ``/user/<name>/andrea-book/``,
where the notebooks' chapter links lead. The copy is swapped in whole, so a server never
serves half of an old and half of a new book.

**course.** Copies the course (``nbgrader_config.py``, ``solutions/`` and the released
``exercises/``) into the instructor's home, owned by the instructor, and records the course's
assignments in its gradebook, so the instructor's Formgrader and ``nbgrader
release_assignment NAME`` (run in that folder) work at once.

**return.** As the instructor, ``nbgrader collect``; as root, ``python -m classroom.grade``
on the collected notebooks (each learner's code in the sandbox; the points from the
independent check) into the course's gradebook; the feedback pages it writes are put
where ``nbgrader release_feedback`` expects them (with each submission's timestamp and
secret), and released, as the instructor. Each learner then gets their own page with
**Fetch Feedback** in the Assignment List (or ``nbgrader fetch_feedback``).

nbgrader's exchange releases each page alone (``<notebook>.html``, nothing beside it), so
the grading run links the chapters to the book this hub serves every user:
``ANDREA_BOOK_URL`` (the default of ``c.CourseBook.url`` in nbgrader_config.py) is
``/hub/user-redirect/andrea-book/`` for it (:func:`grading_environment`), unless already
set; the chapter links of a fetched page opened on the hub reach the chapter, in the
page's edition. A published book's address written in ``c.CourseBook.url`` wins. Each
page goes into the course's ``feedback/`` folder with whatever it references, laid out as
the grader wrote it (:func:`copy_feedback`); where that includes chapter copies (the
grading run's ``ANDREA_BOOK_URL`` set empty, or pages kept from an earlier run), the command
says that they stay behind, since their links are dead in a fetched page.
"""
from __future__ import annotations

import argparse
import os
import pwd
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from andrea_lab import LINK_PREFIX  # noqa: E402 (once ROOT is on the path; it imports only re)

HUB = ROOT / "hub"
COURSE_ID = "andrea-block-lab"
COURSE_DIR = COURSE_ID  # in the instructor's home
# the book this hub serves every user (andrea_lab, in each person's server): where the
# notebooks' chapter links lead, and the feedback pages' of a grading run on the hub
HUB_BOOK_URL = LINK_PREFIX
VENV_BIN = Path(sys.prefix) / "bin"


def exchange_root() -> Path:
    return Path(os.environ.get("ANDREA_HUB_EXCHANGE") or "/srv/nbgrader/exchange")


def state_root() -> Path:
    return Path(os.environ.get("ANDREA_HUB_STATE") or "/srv/andrea-hub")


def book_root() -> Path:
    return Path(os.environ.get("ANDREA_HUB_BOOK") or "/srv/andrea-book")


def publish_book(built: Path, target: Path) -> None:
    """Copy the built book ``built`` to ``target``, world-readable, replacing what was there
    in one rename (the old copy is removed after)."""
    if not (built / "index.html").is_file():
        raise SystemExit(f"hub.py setup: no built book at {built} (expected its index.html): run `make book` first")
    target.parent.mkdir(parents=True, exist_ok=True)
    fresh = target.with_name(f".{target.name}.new")
    old = target.with_name(f".{target.name}.old")
    for leftover in (fresh, old):
        shutil.rmtree(leftover, ignore_errors=True)
    shutil.copytree(built, fresh, ignore=shutil.ignore_patterns(".*"))
    for folder, dirs, files in os.walk(fresh):
        os.chmod(folder, 0o755)
        for f in files:
            os.chmod(os.path.join(folder, f), 0o644)
    if target.exists():
        os.rename(target, old)
    os.rename(fresh, target)
    shutil.rmtree(old, ignore_errors=True)


def setup() -> None:
    publish_book(ROOT / "_build" / "html", book_root())
    ex = exchange_root()
    ex.mkdir(parents=True, exist_ok=True)
    os.chmod(ex, 0o1777)
    st = state_root()
    st.mkdir(parents=True, exist_ok=True)
    os.chmod(st, 0o700)
    print(f"exchange {ex} (1777), hub state {st} (0700), course book {book_root()} (readable by all)")


def _as_user(user: str, cmd: list[str], cwd: Path, role: str = "instructor", check: bool = True,
              **kw) -> subprocess.CompletedProcess:
    """Run ``cmd`` as the OS user ``user``, with the environment the hub gives their server."""
    pw = pwd.getpwnam(user)
    env = {"HOME": pw.pw_dir, "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
           "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin",
           "JUPYTER_CONFIG_PATH": str(HUB / "jupyter-config" / role),
           "ANDREA_EXCHANGE": str(exchange_root())}
    return subprocess.run(cmd, cwd=cwd, env=env, user=pw.pw_uid, group=pw.pw_gid, extra_groups=[],
                          check=check, text=True, capture_output=True, **kw)


def _nbgrader(user: str, *args: str, cwd: Path) -> str:
    try:
        r = _as_user(user, [str(VENV_BIN / "nbgrader"), *args], cwd=cwd)
    except subprocess.CalledProcessError as e:
        raise SystemExit(f"nbgrader {' '.join(args)} failed as {user}:\n{e.stdout}{e.stderr}") from None
    return r.stdout + r.stderr


def course_dir(instructor: str) -> Path:
    return Path(pwd.getpwnam(instructor).pw_dir) / COURSE_DIR


def course(instructor: str) -> Path:
    pw = pwd.getpwnam(instructor)
    home = Path(pw.pw_dir)
    dest = home / COURSE_DIR
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    for sub in ("solutions", "exercises"):
        shutil.rmtree(dest / sub, ignore_errors=True)
        shutil.copytree(ROOT / sub, dest / sub, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
    for p in [dest, *dest.rglob("*")]:
        os.chown(p, pw.pw_uid, pw.pw_gid)
    os.chmod(home, 0o700)
    os.chmod(dest, 0o700)
    for a in sorted(p.name for p in (dest / "solutions").iterdir() if p.is_dir()):
        r = _as_user(instructor, [str(VENV_BIN / "nbgrader"), "db", "assignment", "add", a], cwd=dest, check=False)
        if r.returncode != 0 and "already exists" not in (r.stdout + r.stderr):
            raise SystemExit(f"nbgrader db assignment add {a} failed:\n{r.stdout}{r.stderr}")
    print(f"course folder {dest} (owned by {instructor})")
    return dest


class _References(HTMLParser):
    """The ``href`` and ``src`` values of one page, as the browser reads them."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.refs += [v for k, v in attrs if k in ("href", "src") and v]

    handle_startendtag = handle_starttag


_ELSEWHERE = re.compile(r"^(?:[a-zA-Z][a-zA-Z0-9+.\-]*:|/|#)")  # a scheme, a path from the root, a fragment


def page_files(folder: Path, page: str) -> tuple[list[str], list[str]]:
    """The files of ``folder`` that the page ``folder/page`` needs: the page, each file it
    references by a relative link (the chapter copies the grader ships beside it), and what
    those reference in turn, as paths relative to ``folder``. Returns (files, missing):
    ``missing`` holds the references to a file that is not there, or that lies outside
    ``folder`` or behind a symbolic link (never followed)."""
    root = folder.resolve()
    files: list[str] = []
    missing: list[str] = []
    todo = [page]
    while todo:
        rel = todo.pop(0)
        if rel in files:
            continue
        files.append(rel)
        if not rel.endswith(".html"):
            continue
        parser = _References()
        parser.feed((folder / rel).read_text(encoding="utf-8", errors="replace"))
        for ref in parser.refs:
            ref = ref.strip()
            target = unquote(ref.split("#", 1)[0].split("?", 1)[0])
            if not target or _ELSEWHERE.match(ref):
                continue
            name = os.path.normpath(os.path.join(os.path.dirname(rel), target))
            path = folder / name
            if name == ".." or name.startswith("../") or os.path.isabs(name) or not path.is_file() \
                    or path.resolve() != root / name:
                if ref not in missing:
                    missing.append(ref)
                continue
            todo.append(Path(name).as_posix())
    return files, missing


def copy_feedback(pages: Path, dest: Path) -> tuple[list[str], list[str]]:
    """Copy every feedback page of ``pages`` (one graded submission's folder of the grader's
    ``OUT/feedback/``) into ``dest``, each with the files it references, in the same layout.
    Returns (the files copied, relative to ``dest``; the references that lead nowhere)."""
    copied: list[str] = []
    missing: list[str] = []
    for page in sorted(p.name for p in pages.glob("*.html") if p.is_file() and not p.is_symlink()):
        files, dead = page_files(pages, page)
        missing += [f"{page}: {ref}" for ref in dead]
        for rel in files:
            if rel in copied:
                continue
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(pages / rel, dest / rel)
            copied.append(rel)
    return copied, missing


def grading_environment(environ=None) -> dict[str, str]:
    """The environment of the hub's grading run: ``environ`` (default: this process's) with
    ``ANDREA_BOOK_URL`` set to :data:`HUB_BOOK_URL` unless it is set already, so that the
    feedback pages link the chapters to the book the hub serves (nbgrader's exchange
    releases a page without the chapter copies beside it). A published address written in
    ``c.CourseBook.url`` (nbgrader_config.py) replaces the variable's default and wins."""
    env = dict(os.environ if environ is None else environ)
    env.setdefault("ANDREA_BOOK_URL", HUB_BOOK_URL)
    return env


def return_feedback(instructor: str, assignment: str, workers: int | None = None) -> Path:
    """Collect, grade, release feedback; returns the grading output folder."""
    pw = pwd.getpwnam(instructor)
    cdir = course_dir(instructor)
    print(_nbgrader(instructor, "collect", "--update", assignment, cwd=cdir), end="")
    submitted = cdir / "submitted"
    # the grader's input: the released notebooks and timestamp of each submission
    # (nbgrader's submission secret stays with the instructor)
    work = state_root() / "grading" / assignment
    intake = work / "submitted"
    shutil.rmtree(intake, ignore_errors=True)
    students = sorted(p.name for p in submitted.iterdir() if (p / assignment).is_dir())
    for s in students:
        src = submitted / s / assignment
        dst = intake / s / assignment
        dst.mkdir(parents=True)
        for f in [*src.glob("*.ipynb"), src / "timestamp.txt"]:
            if f.is_file() and not f.is_symlink():
                shutil.copyfile(f, dst / f.name)
    db = f"sqlite:///{cdir / 'gradebook.db'}"
    cmd = [sys.executable, "-m", "classroom.grade", str(intake), "--out", str(work / "out"), "--db", db,
           "--no-progress"]
    if workers:
        cmd += ["--workers", str(workers)]
    r = subprocess.run(cmd, cwd=ROOT, env=grading_environment(), text=True, capture_output=True)
    print(r.stdout + r.stderr, end="")
    if r.returncode != 0:
        raise SystemExit(f"grading failed ({r.returncode})")
    os.chown(cdir / "gradebook.db", pw.pw_uid, pw.pw_gid)
    left_behind = 0
    for s in students:
        dst = cdir / "feedback" / s / assignment
        shutil.rmtree(dst, ignore_errors=True)
        dst.mkdir(parents=True)
        copied, dead = copy_feedback(work / "out" / "feedback" / s / assignment, dst)
        for line in dead:
            print(f"warning: feedback of {s}/{assignment}: {line} leads to no file the grader wrote")
        left_behind += sum(1 for rel in copied if "/" in rel)
        for name in ("timestamp.txt", "submission_secret.txt"):
            shutil.copyfile(submitted / s / assignment / name, dst / name)
    for p in [cdir / "feedback", *(cdir / "feedback").rglob("*")]:
        os.chown(p, pw.pw_uid, pw.pw_gid)
    print(_nbgrader(instructor, "release_feedback", assignment, cwd=cdir), end="")
    if left_behind:
        print(f"note: nbgrader's exchange releases each feedback page alone: the {left_behind} chapter "
              f"copies the pages link to stay in {cdir / 'feedback'}, so the chapter links of a page a "
              "learner fetches lead nowhere; leave ANDREA_BOOK_URL unset (the pages then link to the book "
              "this hub serves) or set c.CourseBook.url in nbgrader_config.py to the published book's address")
    return work / "out"


def run(extra: list[str]) -> None:
    setup()
    os.environ.setdefault("ANDREA_HUB_VENV", sys.prefix)
    cmd = [str(VENV_BIN / "jupyterhub"), "-f", str(HUB / "jupyterhub_config.py"), *extra]
    os.chdir(state_root())
    os.execv(cmd[0], cmd)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    sub.add_parser("setup")
    sub.add_parser("course").add_argument("instructor")
    sub.add_parser("run")
    r = sub.add_parser("return")
    r.add_argument("instructor")
    r.add_argument("assignment")
    r.add_argument("--workers", type=int, default=None)
    a, extra = ap.parse_known_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("scripts/hub.py runs as root: the hub starts each person's server as their OS user")
    if a.what == "setup":
        setup()
    elif a.what == "course":
        course(a.instructor)
    elif a.what == "run":
        run([x for x in extra if x != "--"])
    else:
        return_feedback(a.instructor, a.assignment, a.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
