"""exercises/ as a release leaves it, for scripts/release.py: the files there, the record
of what the last release wrote (``exercises/.release-manifest.json``: the SHA-256 of every
file), the files edited since, what a new release would change in one, and the atomic
writing of a release with its record.

scripts/ is not a package: scripts/release.py puts the course's packages and scripts/
itself on the path before it imports this module.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import tempfile
from pathlib import Path

from classroom import markers

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ".release-manifest.json"


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
    return markers.cell_source(cell).splitlines()


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


def _replace(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` atomically: into a temporary file beside it, then
    renamed over it. The learner's notebooks are theirs to edit (mode 0644)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def apply(release: Path, files: dict[str, bytes]) -> tuple[list[str], list[str]]:
    """Make the folder ``release`` hold exactly ``files`` and their manifest, touching only
    what differs: (files written, files removed)."""
    have = {p.relative_to(release).as_posix(): p for p in sorted(release.rglob("*"))
            if p.is_file() and p.name != MANIFEST and ".ipynb_checkpoints" not in p.parts} if release.exists() else {}
    written = []
    for name, data in sorted(files.items()):
        path = have.get(name)
        if path is None or path.is_symlink() or path.read_bytes() != data:
            _replace(release / name, data)
            written.append(name)
    removed = sorted(set(have) - set(files))
    for name in removed:
        have[name].unlink()
        parent = have[name].parent
        while parent != release and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    manifest = manifest_text(files).encode("utf-8")
    if not (release / MANIFEST).is_file() or (release / MANIFEST).read_bytes() != manifest:
        _replace(release / MANIFEST, manifest)
    return written, removed
