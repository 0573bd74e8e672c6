"""A learner's submission of one assignment as the intake hands it to the grader."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

_SAFE = re.compile(r"[^A-Za-z0-9._@-]")


@dataclass
class Submission:
    student: str
    assignment: str
    # what the grader gives the kernel: released notebooks and timestamp.txt only
    files: dict[str, bytes] = field(default_factory=dict)  # relative path -> content
    origin: list[str] = field(default_factory=list)  # where each file came from in the source
    # every other file handed in (relative paths, sorted): kept away from the kernel
    refused: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the intake changed or noticed
    refused_sha256: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        return f"{self.student}/{self.assignment}"

    def digest(self) -> str:
        h = hashlib.sha256()
        for name in sorted(self.files):
            h.update(name.encode() + b"\0" + hashlib.sha256(self.files[name]).digest())
        if self.refused:
            h.update(b"\0refused\0")
            for name in sorted(self.refused):
                h.update(name.encode() + b"\0" + self.refused_sha256.get(name, "").encode() + b"\0")
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
