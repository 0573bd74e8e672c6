"""Make the learner notebooks in exercises/ from the instructor notebooks in solutions/.

    .venv/bin/python scripts/release.py            # regenerate exercises/ (and gradebook.db)
    .venv/bin/python scripts/release.py --force    # ... even over notebooks edited in exercises/
    .venv/bin/python scripts/release.py --check    # exit 1 if exercises/ is out of date

The work is done by ``nbgrader generate_assignment`` (configured by nbgrader_config.py),
which also records the assignments, their cells and checksums in the gradebook that
``nbgrader autograde`` needs later. Its output is then normalised -- outputs and
execution counts dropped, the notebook metadata set to exactly what the course's kernel
reports when a notebook opens (so JupyterLab finds nothing to fill in and does not mark
a fresh notebook modified), JSON written with sorted keys -- so that running this twice
gives the same bytes.

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
import difflib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = ("01_layernorm", "02_gelu", "03_mlp", "04_block")
MANIFEST = ".release-manifest.json"

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


def nbgrader_env() -> dict:
    """nbgrader runs ``alembic`` as a subprocess: put the venv's bin first on PATH."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env


def nbgrader(course: Path, *args: str) -> None:
    cmd = [str(Path(sys.executable).parent / "nbgrader"), *args]
    proc = subprocess.run(cmd, cwd=course, env=nbgrader_env(), capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"{' '.join(cmd)} failed with exit code {proc.returncode}")


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


def generate(course: Path) -> dict[str, str]:
    """Run nbgrader in ``course`` and return {relative path: normalised notebook}."""
    release = course / "exercises"
    if release.exists():
        shutil.rmtree(release)
    nbgrader(course, "generate_assignment", "*", "--force")
    out = {}
    for path in sorted(release.rglob("*.ipynb")):
        out[str(path.relative_to(release))] = normalise(path.read_text(encoding="utf-8"))
    return out


def solution_lines(root: Path) -> set[str]:
    """Every non-blank line between BEGIN/END SOLUTION or HIDDEN TESTS markers."""
    lines = set()
    for path in sorted((root / "solutions").rglob("*.ipynb")):
        nb = json.loads(path.read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            inside = False
            for line in "".join(cell["source"]).splitlines():
                s = line.strip()
                if s.startswith("### BEGIN SOLUTION") or s.startswith("### BEGIN HIDDEN TESTS"):
                    inside = True
                elif s.startswith("### END SOLUTION") or s.startswith("### END HIDDEN TESTS"):
                    inside = False
                elif inside and s:
                    lines.add(s)
    return lines


def leaked_lines(files: dict[str, str], secret: set[str]) -> list[str]:
    leaks = []
    for name, text in files.items():
        for cell in json.loads(text)["cells"]:
            for line in "".join(cell["source"]).splitlines():
                if line.strip() in secret or "BEGIN SOLUTION" in line or "HIDDEN TESTS" in line:
                    leaks.append(f"{name}: {line.strip()}")
    return leaks


def generate_in_temp(root: Path = ROOT) -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="andrea-release-") as tmp:
        course = Path(tmp)
        shutil.copy(root / "nbgrader_config.py", course)
        shutil.copytree(root / "solutions", course / "solutions",
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        return generate(course)


def committed(root: Path = ROOT) -> dict[str, str]:
    release = root / "exercises"
    return {str(p.relative_to(release)): p.read_text(encoding="utf-8")
            for p in sorted(release.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts}


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def released_files(root: Path = ROOT) -> dict[str, bytes]:
    """Every file in exercises/ but the manifest and Jupyter's checkpoints."""
    release = root / "exercises"
    if not release.exists():
        return {}
    return {p.relative_to(release).as_posix(): p.read_bytes()
            for p in sorted(release.rglob("*"))
            if p.is_file() and p.name != MANIFEST and ".ipynb_checkpoints" not in p.parts}


def manifest_text(files: dict[str, bytes]) -> str:
    return json.dumps({
        "about": "SHA-256 of every file scripts/release.py last wrote into exercises/. "
                 "`make release` refuses to overwrite a file that no longer matches "
                 "(edit solutions/, not exercises/) unless run with FORCE=1.",
        "files": {name: digest(data) for name, data in sorted(files.items())},
    }, indent=1, sort_keys=True) + "\n"


def read_manifest(root: Path = ROOT) -> dict[str, str] | None:
    """{file: sha256} of the last release, or None if there is no readable record."""
    try:
        return dict(json.loads((root / "exercises" / MANIFEST).read_text(encoding="utf-8"))["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def edited_since_release(root: Path = ROOT) -> list[str]:
    """Files in exercises/ that the last release did not write as they are now."""
    have = released_files(root)
    record = read_manifest(root)
    if record is None:
        return sorted(have)  # no record: nothing here can be shown to be the release's
    return sorted(name for name, data in have.items() if record.get(name) != digest(data))


def _cells(text: str) -> list[dict] | None:
    try:
        cells = json.loads(text)["cells"]
        return [c for c in cells if isinstance(c, dict)]
    except (ValueError, KeyError, TypeError):
        return None


def _source(cell: dict) -> list[str]:
    src = cell.get("source", "")
    return ("".join(src) if isinstance(src, list) else str(src)).splitlines()


def change_summary(now: bytes, new: str | None, max_cells: int = 8, per_cell: int = 2) -> list[str]:
    """A few lines on what writing ``new`` over the file holding ``now`` would change:
    the cells whose source differs, with their first changed lines (``-`` what is in
    exercises/ now and would be lost, ``+`` what the release writes), cells that would
    be removed or added, outputs that would be cleared."""
    if new is None:
        return ["not a notebook made from solutions/: the release would delete it"]
    have, want = _cells(now.decode("utf-8", errors="replace")), _cells(new)
    if have is None or want is None:
        return ["not a readable notebook: the release would replace it whole"]

    def key(i, cell):
        return cell.get("id") or i

    def label(i, cell):
        return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or cell.get("id") or f"#{i + 1}"

    wanted = {key(i, c): c for i, c in enumerate(want)}
    present = {key(i, c) for i, c in enumerate(have)}
    cells = []
    for i, cell in enumerate(have):
        other = wanted.get(key(i, cell))
        if other is None:
            cells.append([f"cell {label(i, cell)}: not in the release; it would be removed"])
            continue
        a, b = _source(cell), _source(other)
        if a != b:
            diff = [ln for ln in difflib.unified_diff(a, b, lineterm="", n=0)
                    if ln[:1] in "+-" and not ln.startswith(("---", "+++"))]
            lost = sum(ln.startswith("-") for ln in diff)
            shown = diff[:per_cell] + (["    ..."] if len(diff) > per_cell else [])
            cells.append([f"cell {label(i, cell)}: -{lost} +{len(diff) - lost} lines",
                          *(f"    {ln}"[:100] for ln in shown)])
    cells += [[f"cell {label(j, c)}: new in the release; it would be added"]
              for j, c in enumerate(want) if key(j, c) not in present]
    out = [ln for block in cells[:max_cells] for ln in block]
    if len(cells) > max_cells:
        out.append(f"... and {len(cells) - max_cells} more cell(s)")
    outputs = sum(1 for c in have if c.get("outputs"))
    if outputs:
        out.append(f"outputs of {outputs} cell(s) would be cleared")
    if not out:
        out.append("formatting or metadata only")
    return out


def check(root: Path = ROOT) -> int:
    fresh = generate_in_temp(root)
    have = committed(root)
    problems = []
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


def release(root: Path = ROOT, force: bool = False) -> int:
    """Regenerate ``root``/exercises/ in place (and the gradebook); see the module docstring."""
    edited = edited_since_release(root)
    if edited and not force:
        fresh = generate_in_temp(root)
        have = released_files(root)
        # an edit that the new release would write anyway loses nothing
        edited = [n for n in edited if fresh.get(n, "").encode("utf-8") != have[n]]
        if edited:
            record = read_manifest(root)
            why = ("they differ from what the last release wrote" if record is not None else
                   f"there is no record of the last release (exercises/{MANIFEST})")
            print(f"Not releasing: {len(edited)} file(s) in exercises/ would be overwritten and "
                  f"{why}:")
            for name in edited:
                print(f"  exercises/{name}")
                for line in change_summary(have[name], fresh.get(name)):
                    print(f"      {line}")
            print("Nothing was written. exercises/ is generated from solutions/: move the edits "
                  "there, or run `make release FORCE=1` (scripts/release.py --force) to "
                  "overwrite them.")
            return 1
    files = generate(root)  # in the course: also records the assignments in its gradebook
    for name, text in files.items():
        (root / "exercises" / name).write_text(text, encoding="utf-8")
        # the learner's notebooks are theirs to edit
        os.chmod(root / "exercises" / name, 0o644)
    (root / "exercises" / MANIFEST).write_text(manifest_text(released_files(root)), encoding="utf-8")
    leaks = leaked_lines(files, solution_lines(root))
    if leaks:
        print("\n".join(leaks))
        return 1
    print(f"Wrote {len(files)} notebooks to exercises/.")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with exercises/ instead of writing")
    parser.add_argument("--force", action="store_true",
                        help="overwrite notebooks in exercises/ even if they were edited since the last release")
    args = parser.parse_args(argv)
    if args.check:
        return check()
    return release(force=args.force)


if __name__ == "__main__":
    sys.exit(main())
