"""Make the learner notebooks in exercises/ from the instructor notebooks in solutions/.

    .venv/bin/python scripts/release.py            # regenerate exercises/ (and gradebook.db)
    .venv/bin/python scripts/release.py --check    # exit 1 if exercises/ is out of date

The work is done by ``nbgrader generate_assignment`` (configured by nbgrader_config.py),
which also records the assignments, their cells and checksums in the gradebook that
``nbgrader autograde`` needs later. Its output is then normalised -- outputs, execution
counts and notebook metadata other than the kernel and language dropped, JSON written
with sorted keys -- so that running this twice gives the same bytes.

``--check`` regenerates into a temporary course, never touching the repository's
gradebook, compares with the committed exercises/ and verifies that no line of
solution code or hidden test made it into a learner notebook.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = ("01_layernorm", "02_gelu", "03_mlp", "04_block")
KEEP_METADATA = ("kernelspec", "language_info")


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
    """Canonical form of a notebook: no outputs, no volatile metadata, sorted keys."""
    nb = json.loads(text)
    nb["metadata"] = {k: nb["metadata"][k] for k in KEEP_METADATA if k in nb["metadata"]}
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with exercises/ instead of writing")
    args = parser.parse_args(argv)

    if args.check:
        fresh = generate_in_temp()
        have = committed()
        problems = []
        for name in sorted(set(fresh) | set(have)):
            if name not in have:
                problems.append(f"missing from exercises/: {name}")
            elif name not in fresh:
                problems.append(f"in exercises/ but not made from solutions/: {name}")
            elif fresh[name] != have[name]:
                problems.append(f"out of date: exercises/{name}")
        problems += [f"solution line in a learner notebook: {leak}"
                     for leak in leaked_lines(have, solution_lines(ROOT))]
        for p in problems:
            print(p)
        if problems:
            print("Run `.venv/bin/python scripts/release.py` to regenerate exercises/.")
            return 1
        print(f"exercises/ is in sync with solutions/ ({len(fresh)} notebooks).")
        return 0

    files = generate(ROOT)  # in the repository: also records the assignments in gradebook.db
    for name, text in files.items():
        (ROOT / "exercises" / name).write_text(text, encoding="utf-8")
        # the learner's notebooks are theirs to edit
        os.chmod(ROOT / "exercises" / name, 0o644)
    leaks = leaked_lines(files, solution_lines(ROOT))
    if leaks:
        print("\n".join(leaks))
        return 1
    print(f"Wrote {len(files)} notebooks to exercises/.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
