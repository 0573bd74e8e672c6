"""The Jupyter configuration the image of deploy/image/ holds, laid out in a folder here.

The COPY instructions of the Dockerfile's ``course`` target that write ``/etc/andrea`` and
``/usr/local/bin/andrea-singleuser`` are carried out into ``root`` (the course itself, which
the image keeps in ``/opt/andrea-block-lab``, is this checkout: ``ANDREA_COURSE_SOURCE``).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import deploy_files

ROOT = deploy_files.ROOT
KEPT = ("/etc/andrea", "/usr/local/bin/andrea-singleuser")


def lay_out(root: Path, target: str = "course") -> Path:
    """Copy what the image's COPY instructions put under KEPT into ``root``; returns ``root``."""
    for ins in deploy_files.stage_instructions(target):
        if ins.cmd != "COPY" or any(f.startswith("--from") for f in ins.flags):
            continue
        *sources, dest = ins.value
        if not dest.startswith(KEPT):
            continue
        for src in sources:
            s = ROOT / src
            d = root / dest.lstrip("/")
            if s.is_dir():
                shutil.copytree(s, d, dirs_exist_ok=True)
            else:
                if dest.endswith("/"):
                    d = d / s.name
                d.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(s, d)
    for d in [root, *root.rglob("*")]:
        os.chmod(d, 0o755 if d.is_dir() or d.name == "andrea-singleuser" else 0o644)
    return root
