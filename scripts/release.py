"""Make the learner notebooks in exercises/ from the instructor notebooks in solutions/.

    .venv/bin/python scripts/release.py            # regenerate exercises/ (and gradebook.db)
    .venv/bin/python scripts/release.py --force    # ... even over notebooks edited in exercises/
    .venv/bin/python scripts/release.py --check    # exit 1 if exercises/ is out of date

The work is done by ``nbgrader generate_assignment`` (configured by nbgrader_config.py;
run through ``andrea_ref.grading.course.generate_assignments``), which also records the
assignments, their cells and checksums in the gradebook that ``nbgrader autograde``
needs later. Its output is then normalised -- outputs and execution counts dropped, the
notebook metadata set to exactly what the course's kernel reports when a notebook opens
(so JupyterLab finds nothing to fill in and does not mark a fresh notebook modified),
JSON written with sorted keys -- so that running this twice gives the same bytes.

The release is atomic and idempotent: nbgrader writes into a temporary copy of the
course, and only a file of exercises/ whose content changes is replaced, by renaming a
finished file over it (a reader, such as a grading run, never sees half a release);
files that are already right are left alone, modification time included, and a release
that would change nothing writes nothing at all and says "up to date". The gradebook is
written only when what it records of the assignments differs from the new release.

The assignments released are the ones ``course.toml`` names (read by
``andrea_ref.grading.manifest``; a manifest that cannot be used is refused in one line,
and so is a folder of solutions/ that it does not name). Before releasing, the points of
each solution notebook's graded cells (their nbgrader metadata, the one place points are
written) are written into its table of graded properties and into each graded cell's
first line (``andrea_ref.grading.points_table``); ``--check`` reports where they differ.

exercises/ is generated: edit solutions/, never exercises/. To keep an edit made there
by mistake from being lost, the release records the SHA-256 of every file it writes in
``exercises/.release-manifest.json`` (committed with the notebooks) and refuses to
overwrite a file that no longer matches that record, unless the new release would
write the very same bytes: it names the files, summarises what it would change and
exits with status 1 without writing anything. ``--force`` (``make release FORCE=1``)
overwrites them anyway.

``--check`` regenerates into a temporary course, never touching the repository's
gradebook, compares with the committed exercises/ and its manifest, and verifies that
no line of solution code or hidden test made it into a learner notebook.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Iterator

# the course's packages, when run with an interpreter that lacks them, and scripts/ (not a
# package), for the modules of this script beside it
sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]
from nbgrader.api import Gradebook  # noqa: E402

from andrea_ref.grading import points_table  # noqa: E402
from classroom.dburl import with_driver  # noqa: E402
from andrea_ref.grading.course import generate_assignments, venv_bin_on_path  # noqa: E402
from andrea_ref.grading.manifest import FILE as COURSE_FILE, ManifestError, load  # noqa: E402
from classroom import markers  # noqa: E402
from classroom.sawarnings import ignore_add_submission_autoflush  # noqa: E402
from release_state import (MANIFEST, ROOT, apply, change_summary, edited_since_release,  # noqa: E402
                           read_manifest, released_files)

# The notebook metadata a released notebook carries: exactly what JupyterLab writes when
# the course's kernel starts (`make venv` installs it as "python3" with this display
# name; the language_info is ipykernel's for the course's Python). A notebook that
# already holds these values opens unmodified; any other value is replaced on open.
KERNELSPEC = {"display_name": "Python 3 (ANDREA Block Lab)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
    "version": "3.11.7",
}


def normalise(text: str) -> str:
    """Canonical form of a notebook: no outputs, the course kernel's metadata, sorted keys."""
    nb = json.loads(text)
    nb["metadata"] = {"kernelspec": dict(KERNELSPEC), "language_info": json.loads(json.dumps(LANGUAGE_INFO))}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cell.get("metadata", {}).pop("collapsed", None)
        cell.get("metadata", {}).pop("scrolled", None)
        cell.get("metadata", {}).pop("execution", None)
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
        cell["source"] = cell["source"].splitlines(keepends=True)
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def generate(course: Path) -> dict[str, bytes]:
    """Release every assignment of ``course`` (a :func:`temp_course`: the manifest's
    assignments and nothing else, with its own gradebook) in one nbgrader process, and
    return {relative path: content} of its release folder, notebooks normalised."""
    generate_assignments(course)
    release = course / "exercises"
    out = {}
    for path in sorted(release.rglob("*")):
        if path.is_file() and ".ipynb_checkpoints" not in path.parts:
            data = path.read_bytes()
            if path.suffix == ".ipynb":
                data = normalise(data.decode("utf-8")).encode("utf-8")
            out[path.relative_to(release).as_posix()] = data
    return out


def solution_lines(root: Path) -> set[str]:
    """Every non-blank line between BEGIN/END SOLUTION or HIDDEN TESTS markers."""
    return {line for path in sorted((root / "solutions").rglob("*.ipynb"))
            for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]
            for line, _ in markers.inside_lines(markers.cell_source(cell))}


def leaked_lines(files: dict[str, str], secret: set[str]) -> list[str]:
    leaks = []
    for name, text in files.items():
        for cell in json.loads(text)["cells"]:
            for line in "".join(cell["source"]).splitlines():
                if line.strip() in secret or "BEGIN SOLUTION" in line or "HIDDEN TESTS" in line:
                    leaks.append(f"{name}: {line.strip()}")
    return leaks


@contextlib.contextmanager
def temp_course(root: Path = ROOT) -> Iterator[Path]:
    """A temporary course folder holding ``root``'s configuration and the solutions/
    folders of the assignments its manifest names."""
    names = load(root, pages=False).names
    with tempfile.TemporaryDirectory(prefix="andrea-release-") as tmp:
        course = Path(tmp)
        shutil.copy(root / "nbgrader_config.py", course)
        for name in names:
            shutil.copytree(root / "solutions" / name, course / "solutions" / name,
                            ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        yield course


def notebooks_of(files: dict[str, bytes]) -> dict[str, str]:
    return {name: data.decode("utf-8") for name, data in files.items() if name.endswith(".ipynb")}


def generate_in_temp(root: Path = ROOT) -> dict[str, str]:
    """{relative path: normalised notebook} of a fresh release, made in a temporary course."""
    with temp_course(root) as course:
        return notebooks_of(generate(course))


def committed(root: Path = ROOT) -> dict[str, str]:
    release = root / "exercises"
    return {str(p.relative_to(release)): p.read_text(encoding="utf-8")
            for p in sorted(release.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts}


def points_problems(root: Path = ROOT) -> list[str]:
    """Where a solution notebook's table or graded cells do not show nbgrader's points."""
    return [line for a in load(root, pages=False)
            for line in points_table.disagreements(json.loads(a.solution.read_text(encoding="utf-8"))["cells"],
                                                   f"solutions/{a.path}")]


def sync_points(root: Path = ROOT) -> list[str]:
    """Write every solution notebook's points into its table and graded cells' first
    lines (:mod:`andrea_ref.grading.points_table`); the notebooks rewritten."""
    return [f"solutions/{a.path}" for a in load(root, pages=False) if points_table.sync(a.solution)]


def check(root: Path = ROOT) -> int:
    problems = points_problems(root)
    fresh = generate_in_temp(root)
    have = committed(root)
    for name in sorted(set(fresh) | set(have)):
        if name not in have:
            problems.append(f"missing from exercises/: {name}")
        elif name not in fresh:
            problems.append(f"in exercises/ but not made from solutions/: {name}")
        elif fresh[name] != have[name]:
            problems.append(f"out of date: exercises/{name}")
    if read_manifest(root) is None:
        problems.append(f"missing or unreadable: exercises/{MANIFEST}")
    else:
        problems += [f"not what the last release wrote (exercises/{MANIFEST}): exercises/{name}"
                     for name in edited_since_release(root)]
    problems += [f"solution line in a learner notebook: {leak}"
                 for leak in leaked_lines(have, solution_lines(root))]
    for p in problems:
        print(p)
    if problems:
        print("Run `.venv/bin/python scripts/release.py` to regenerate exercises/.")
        return 1
    print(f"exercises/ is in sync with solutions/ ({len(fresh)} notebooks).")
    return 0


def gradebook_url(root: Path = ROOT) -> str:
    """The course's gradebook, as nbgrader_config.py names it (``postgresql://`` with the
    installed driver named, as everywhere the URL is read: classroom.dburl.with_driver)."""
    return with_driver(os.environ.get("NBGRADER_DB_URL") or f"sqlite:///{root / 'gradebook.db'}")


def recorded(url: str, assignments) -> dict | None:
    """What the gradebook at ``url`` records of ``assignments``: every notebook with its
    cells (points, sources, checksums); None where it does not exist or cannot be read."""
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        return None  # never create a gradebook just to read it
    venv_bin_on_path()
    kinds = {"grade": ("max_score", "cell_type"), "solution": (), "task": ("max_score", "cell_type"),
             "source": ("source", "checksum", "locked", "cell_type")}
    try:
        with warnings.catch_warnings(), Gradebook(url) as gb:
            ignore_add_submission_autoflush()
            out = {}
            for a in gb.assignments:
                if a.name in assignments:
                    out[a.name] = {nb.name: {kind: sorted((c.name, *(getattr(c, f) for f in fields))
                                                          for c in getattr(nb, f"{kind}_cells"))
                                             for kind, fields in kinds.items()} for nb in a.notebooks}
            return out
    except Exception:  # noqa: BLE001 - unreadable: it is written afresh
        return None


def release(root: Path = ROOT, force: bool = False) -> int:
    """Regenerate ``root``/exercises/ (and the gradebook); see the module docstring."""
    try:
        synced = sync_points(root)
    except points_table.TableError as exc:
        print(exc)
        return 2
    for name in synced:
        print(f"Wrote nbgrader's points into the table and graded cells of {name}.")
    with temp_course(root) as course:
        fresh = generate(course)
        have = released_files(root)
        edited = edited_since_release(root)
        if edited and not force:
            # an edit that the new release would write anyway loses nothing
            edited = [n for n in edited if fresh.get(n) != have[n]]
            if edited:
                record = read_manifest(root)
                why = ("they differ from what the last release wrote" if record is not None else
                       f"there is no record of the last release (exercises/{MANIFEST})")
                print(f"Not releasing: {len(edited)} file(s) in exercises/ would be overwritten and "
                      f"{why}:")
                for name in edited:
                    print(f"  exercises/{name}")
                    new = fresh.get(name)
                    for line in change_summary(have[name], None if new is None else new.decode("utf-8")):
                        print(f"      {line}")
                print("Nothing was written. exercises/ is generated from solutions/: move the edits "
                      "there, or run `make release FORCE=1` (scripts/release.py --force) to "
                      "overwrite them.")
                return 1
        notebooks = notebooks_of(fresh)
        leaks = leaked_lines(notebooks, solution_lines(root))
        if leaks:
            print("\n".join(leaks))
            print("Nothing was written: a solution or hidden-test line would reach the learners.")
            return 1
        written, removed = apply(root / "exercises", fresh)
        url = gradebook_url(root)
        made = set(load(root, pages=False).names)
        gradebook_behind = recorded(url, made) != recorded(f"sqlite:///{course / 'gradebook.db'}", made)
        if gradebook_behind:
            generate_assignments(course, db_url=url, own_gradebook=False)
    if not written and not removed:
        print(f"exercises/ is up to date ({len(notebooks)} notebooks): nothing was written"
              + ("; the assignments were recorded in the gradebook." if gradebook_behind else "."))
        return 0
    print(f"Wrote {len(written)} of {len(fresh)} file(s) in exercises/"
          + (f" ({', '.join(written)})" if written else "")
          + (f"; removed {', '.join(removed)}" if removed else "")
          + ("; recorded the assignments in the gradebook." if gradebook_behind else "."))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with exercises/ instead of writing")
    parser.add_argument("--force", action="store_true",
                        help="overwrite notebooks in exercises/ even if they were edited since the last release")
    args = parser.parse_args(argv)
    try:
        load(ROOT, pages=False)  # a manifest that cannot be used is refused in one line, before any work
        if args.check:
            return check()
        return release(force=args.force)
    except ManifestError as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
