"""Read a class's submissions from a folder or a zip, safely.

Accepted layouts (a folder, or the same inside a ``.zip``):

1. nbgrader's own: ``[submitted/]<student>/<assignment>/<notebook>.ipynb`` (plus any
   other files of the submission, and nbgrader's ``timestamp.txt``);
2. one folder per learner: ``<student>/<notebook>.ipynb``, e.g. ``alice/gelu.ipynb``;
3. one file per learner and notebook, as learning platforms export them:
   ``<student>_<notebook>.ipynb`` or ``<student>_<assignment>.ipynb``, e.g.
   ``alice_gelu.ipynb`` or ``alice_02_gelu.ipynb`` (the student id is everything
   before the last ``_<notebook>`` / ``_<assignment>``).

This is the trust boundary for files: symbolic links, device files, absolute paths
and ``..`` components are never followed or extracted; a zip entry larger than
``MAX_FILE`` bytes or a zip whose content exceeds ``MAX_TOTAL`` bytes is refused.
Student ids are reduced to ``[A-Za-z0-9._@-]``. Whatever is skipped is reported.
"""
from __future__ import annotations

import hashlib
import os
import re
import stat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

MAX_FILE = 50 * (1 << 20)
MAX_TOTAL = 2 * (1 << 30)
_SAFE = re.compile(r"[^A-Za-z0-9._@-]")


@dataclass
class Submission:
    student: str
    assignment: str
    files: dict[str, bytes] = field(default_factory=dict)  # relative path -> content
    origin: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.student}/{self.assignment}"

    def digest(self) -> str:
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + hashlib.sha256(self.files[name]).digest())
        return h.hexdigest()

    def write(self, dest: Path) -> None:
        for rel, data in self.files.items():
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)


def safe_student_id(name: str) -> str | None:
    sid = _SAFE.sub("_", name.strip()).strip("_")
    if not sid or sid.startswith(".") or sid in {"submitted", "autograded", "feedback"}:
        return None
    return sid[:100]


def _entries_from_dir(root: Path, problems: list[str]):
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for d in list(dirnames):
            if (Path(dirpath) / d).is_symlink():
                problems.append(f"skipped symbolic link {Path(dirpath, d).relative_to(root)}")
                dirnames.remove(d)
            elif d.startswith(".") :
                dirnames.remove(d)
        for f in filenames:
            p = Path(dirpath) / f
            rel = p.relative_to(root)
            st = os.lstat(p)
            if not stat.S_ISREG(st.st_mode):
                problems.append(f"skipped {rel}: not a regular file")
                continue
            if st.st_size > MAX_FILE:
                problems.append(f"skipped {rel}: larger than {MAX_FILE} bytes")
                continue
            yield PurePosixPath(*rel.parts), p.read_bytes


def _entries_from_zip(path: Path, problems: list[str]):
    zf = zipfile.ZipFile(path)
    total = 0
    for info in zf.infolist():
        if info.is_dir():
            continue
        name = PurePosixPath(info.filename.replace("\\", "/"))
        mode = (info.external_attr >> 16) & 0o170000
        if name.is_absolute() or ".." in name.parts or (mode and not stat.S_ISREG(mode)):
            problems.append(f"skipped zip entry {info.filename!r}: unsafe path or not a regular file")
            continue
        if info.file_size > MAX_FILE:
            problems.append(f"skipped zip entry {info.filename!r}: larger than {MAX_FILE} bytes")
            continue
        total += info.file_size
        if total > MAX_TOTAL:
            raise ValueError(f"{path}: more than {MAX_TOTAL} bytes once unpacked; refusing it")

        def read(info=info):
            with zf.open(info) as fh:
                data = fh.read(MAX_FILE + 1)
            if len(data) > MAX_FILE:
                raise ValueError(f"zip entry {info.filename!r} is larger than it claims")
            return data
        yield name, read


def collect(source: Path, assignments: dict[str, list[str]]) -> tuple[list[Submission], list[str]]:
    """Submissions found under ``source`` (folder or zip) for the known ``assignments``
    ({assignment: [notebook names without .ipynb]}), and a list of what was skipped."""
    source = Path(source)
    problems: list[str] = []
    if source.is_dir():
        entries = list(_entries_from_dir(source, problems))
    elif zipfile.is_zipfile(source):
        entries = list(_entries_from_zip(source, problems))
    else:
        raise FileNotFoundError(f"{source}: neither a folder nor a zip file")

    nb_to_assignment = {nb: a for a, nbs in assignments.items() for nb in nbs}
    names = sorted(set(assignments) | set(nb_to_assignment), key=len, reverse=True)
    subs: dict[tuple[str, str], Submission] = {}

    def add(student_raw: str, assignment: str, rel: str, read, origin: str):
        sid = safe_student_id(student_raw)
        if sid is None:
            problems.append(f"skipped {origin}: no usable student id in {student_raw!r}")
            return
        sub = subs.setdefault((sid, assignment), Submission(sid, assignment))
        if rel in sub.files:
            problems.append(f"skipped {origin}: {sid} already has {assignment}/{rel}")
            return
        sub.files[rel] = read()
        sub.origin.append(origin)

    # nbgrader layout first: it also carries the submissions' other files
    for name, read in entries:
        parts = list(name.parts)
        if parts and parts[0] == "submitted":
            parts = parts[1:]
        # strip one wrapping folder a platform may add (e.g. "export/alice/01_gelu/..")
        for start in range(0, min(2, max(0, len(parts) - 2))):
            if len(parts) - start >= 3 and parts[start + 1] in assignments:
                student, assignment = parts[start], parts[start + 1]
                rel = "/".join(parts[start + 2:])
                add(student, assignment, rel, read, str(name))
                break
        else:
            if name.suffix != ".ipynb":
                problems.append(f"skipped {name}: not in <student>/<assignment>/ and not a notebook")
                continue
            stem = name.stem
            if stem in nb_to_assignment and len(parts) >= 2:  # <student>/<notebook>.ipynb
                add(parts[-2], nb_to_assignment[stem], f"{stem}.ipynb", read, str(name))
                continue
            for known in names:  # <student>_<notebook|assignment>.ipynb
                if stem.endswith("_" + known) and len(stem) > len(known) + 1:
                    assignment = known if known in assignments else nb_to_assignment[known]
                    notebooks = assignments[assignment]
                    if len(notebooks) != 1 and known in assignments:
                        problems.append(f"skipped {name}: {assignment} has several notebooks; "
                                        "name the file <student>_<notebook>.ipynb")
                        break
                    nb = known if known in nb_to_assignment else notebooks[0]
                    add(stem[: -len(known) - 1], assignment, f"{nb}.ipynb", read, str(name))
                    break
            else:
                problems.append(f"skipped {name}: cannot tell which student and assignment it belongs to")
    return [subs[k] for k in sorted(subs)], problems
