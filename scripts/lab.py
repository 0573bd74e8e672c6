"""Start JupyterLab for a learner (``make lab``) or for the instructor (``make lab-instructor``).

    .venv/bin/python scripts/lab.py                 # learner: _build/lab-workspace/, released notebooks only
    .venv/bin/python scripts/lab.py --instructor    # instructor: the repository root, every nbgrader tool
    ... [-- extra jupyter lab options, e.g. --no-browser --port 8890]

**Learner.** The server's root is a workspace, ``_build/lab-workspace/``, holding copies of
the released notebooks (``exercises/``) and nothing else, so ``solutions/`` is neither in
the file browser nor reachable by URL. Each start brings the workspace up to date with the
release without losing work: a notebook is copied when it is missing, and replaced by a
newer release only if it is still exactly what the previous copy wrote (recorded in the
hidden ``.released.json``); an edited notebook is kept, and the new release is put beside
it as ``<name>.new-release.ipynb``. The notebooks' chapter links open the built book
(``_build/html``, all three editions) in a browser tab, served by the same Jupyter
server at ``/andrea-book/`` (the server extension ``andrea_lab.server``). The Jupyter
configuration is ``lab/learner/`` (``JUPYTER_CONFIG_DIR``): nbgrader's Formgrader, Course List and Create Assignment are off;
the Assignment List and Validate work, with the course id and the exchange
``_build/exchange`` (``ANDREA_EXCHANGE``), where the released notebooks are published
so that the Assignment List lists them and **Submit** hands one in. JupyterLab's settings
and workspaces are kept in ``_build/lab-state/`` (Jupyter's news pop-up off). Run as
root, it says so and starts JupyterLab with ``--allow-root``.

**Language.** ``ANDREA_LANG=de make lab`` (or ``ka``) gives the learner the notebooks in
German (or Georgian), made from the release and the catalogs (classroom/notebook_i18n.py),
in a workspace of their own (``_build/lab-workspace-de``), and the kernels show the
checks' messages in that language. English is the default.

**Instructor.** The repository root with every nbgrader tool (``lab/instructor/``: the
same exchange, so an assignment released from the Formgrader reaches the learner's lab).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from classroom import notebook_i18n  # noqa: E402
from classroom.notebook_i18n import LANGUAGES  # noqa: E402
from andrea_lab import launch  # noqa: E402
from andrea_ref.grading.manifest import load  # noqa: E402

RECORD = ".released.json"
COURSE_ID = "andrea-block-lab"  # as in nbgrader_config.py and lab/*/nbgrader_config.py
BOOK = ROOT / "_build" / "html"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def released_notebooks(exercises: Path) -> dict[str, Path]:
    """{relative path: file} of every released notebook (``NN_topic/name.ipynb``)."""
    return {p.relative_to(exercises).as_posix(): p for p in sorted(exercises.glob("*/*.ipynb"))}


def refresh_workspace(workspace: Path, exercises: Path = ROOT / "exercises") -> list[str]:
    """Bring ``workspace`` up to date with ``exercises``; return one line per notebook
    that was kept because the learner edited it."""
    workspace.mkdir(parents=True, exist_ok=True)
    record_path = workspace / RECORD
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    kept = []
    for rel, src in released_notebooks(exercises).items():
        dest = workspace / rel
        new = _digest(src)
        if dest.is_file():
            now = _digest(dest)
            if now == new:
                record[rel] = new
                continue
            if record.get(rel) != now:  # edited by the learner (or not written by us)
                side = dest.with_name(dest.stem + ".new-release.ipynb")
                if not side.is_file() or _digest(side) != new:
                    shutil.copyfile(src, side)
                kept.append(f"{rel}: kept your edited copy; the new release is beside it as {side.name}")
                continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        record[rel] = new
    record_path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return kept


def publish_release(exchange: Path, exercises: Path = ROOT / "exercises", course_id: str = COURSE_ID) -> None:
    """Put the released notebooks into the exchange's outbound folder, as ``nbgrader
    release_assignment`` does, so the Assignment List lists the course's assignments (as
    downloaded: the workspace holds them) and **Submit** hands a notebook in to
    ``<exchange>/<course>/inbound``, where ``nbgrader collect`` finds it."""
    course = exchange / course_id
    for rel, src in released_notebooks(exercises).items():
        dest = course / "outbound" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.is_file() or dest.read_bytes() != src.read_bytes():
            shutil.copyfile(src, dest)
    for name in ("inbound", "feedback"):
        (course / name).mkdir(parents=True, exist_ok=True)


def book_note(book: Path = BOOK) -> str | None:
    """A line to show when the book the chapter links open is not built yet."""
    if (book / "index.html").is_file():
        return None
    return f"note: the course book is not built yet ({book}); run `make book` for the chapter links to open"


def drop_old_book_copy(workspace: Path) -> None:
    """Earlier versions kept a copy of the book in the workspace (``_build/html``); the
    server now serves it from the repository."""
    if (workspace / "_build" / ".book-stamp").is_file():
        shutil.rmtree(workspace / "_build", ignore_errors=True)


def language_from_env() -> str:
    """ANDREA_LANG (default English); anything else is an error naming the variable."""
    value = os.environ.get("ANDREA_LANG", "").strip() or "en"
    if value not in LANGUAGES:
        raise SystemExit(f"ANDREA_LANG must be one of {', '.join(LANGUAGES)}, got {value!r}")
    return value


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instructor", action="store_true", help="the repository root, every nbgrader tool")
    ap.add_argument("--workspace", type=Path,
                    help="default: _build/lab-workspace, or _build/lab-workspace-<lang> for ANDREA_LANG=de/ka")
    ap.add_argument("--exchange", type=Path, default=ROOT / "_build" / "exchange")
    ap.add_argument("--state", type=Path, default=ROOT / "_build" / "lab-state",
                    help="JupyterLab's settings and workspaces")
    ap.add_argument("--prepare-only", action="store_true", help="refresh the workspace, start nothing")
    a, extra = ap.parse_known_args(argv)
    extra = [x for x in extra if x != "--"]
    language = language_from_env()
    suffix = "" if language == "en" else f"-{language}"
    workspace = (a.workspace or ROOT / "_build" / f"lab-workspace{suffix}").resolve()
    if not a.instructor:
        exercises = ROOT / "exercises"
        if language != "en":
            exercises = notebook_i18n.release(language)
        for line in refresh_workspace(workspace, exercises):
            print(line, file=sys.stderr)
        publish_release(a.exchange.resolve(), exercises)
        drop_old_book_copy(workspace)
        if a.prepare_only:
            return 0
    note = book_note()
    if note:
        print(note, file=sys.stderr)
    a.exchange.mkdir(parents=True, exist_ok=True)
    config = ROOT / "lab" / ("instructor" if a.instructor else "learner")
    env = launch.lab_env(config, a.state.resolve(), book=BOOK, exchange=a.exchange.resolve())
    if a.instructor:
        cmd = launch.lab_command(ROOT, "/lab/tree/exercises", extra)
    else:
        cmd = launch.lab_command(workspace, f"/lab/tree/{load(ROOT, pages=False)[0].path}", extra)
    launch.start(cmd, env, ROOT if a.instructor else workspace)


if __name__ == "__main__":
    sys.exit(main())
