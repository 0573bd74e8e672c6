"""Read a class's submissions from a folder or a zip, safely.

Accepted layouts (a folder, or the same inside a ``.zip``), below the *class root*:

1. nbgrader's own: ``[submitted/]<student>/<assignment>/<notebook>.ipynb`` (plus
   nbgrader's ``timestamp.txt``);
2. one folder per learner: ``<student>/<notebook>.ipynb``, e.g. ``alice/gelu.ipynb``
   (``<student>/<assignment>.ipynb`` of a one-notebook assignment and
   ``<student>/<student>_<notebook>.ipynb`` are read the same way);
3. one file per learner and notebook, as learning platforms export them:
   ``<student>_<notebook>.ipynb`` or ``<student>_<assignment>.ipynb``, e.g.
   ``alice_gelu.ipynb`` or ``alice_03_gelu.ipynb``.

Whose file is it
----------------
The class root is the source itself, or its one wrapping folder: when everything in
the source (hidden names such as ``.DS_Store`` or ``__MACOSX/`` aside) lies inside a
single folder, and that folder is not a student folder, it wraps the class (a zip of
an export folder: ``export/alice/gelu.ipynb``, ``export/bob_gelu.ipynb``). A folder is
a student folder when it directly holds an ``<assignment>/`` folder, a released
``<notebook>.ipynb``, or a notebook named for the folder's learner. A folder beside
anything else is never a wrapping folder. A ``submitted/`` folder, above or below the
wrapping folder, is nbgrader's and is looked through.

Below the class root every folder is one learner's folder, and every file in it
belongs to that learner: a file there named for another learner
(``bob/alice_gelu.ipynb``) is refused. The flat form (3) is read only for files lying
directly at the class root. A flat name is split before a known assignment or notebook
name; when the splits read differently (``dave_03_gelu.ipynb``: dave's ``03_gelu``, or
``dave_03``'s ``gelu``) the gradebook's student list decides where exactly one reading
names a listed learner, and otherwise the file is refused with every reading named:
a guess would let one learner's file take another's place. Two different files that hand in the same
notebook of the same learner (``alice_gelu.ipynb`` and ``alice/gelu.ipynb``) are both
refused: which one counts cannot be told.

What reaches the grader
-----------------------
``Submission.files`` holds only what the grader gives the kernel: the assignment's
released notebooks and nbgrader's ``timestamp.txt`` (when it is one short line of
text). Every other file handed in (modules, ``.pth`` files, packages such as
``torch/``, ``sitecustomize.py``, extra notebooks) is listed in ``Submission.refused``
and never written for the kernel; ``digest()`` covers those names and contents too.
Loose files in a learner's own folder (layout 2) belong to the learner's assignment
when all of the learner's notebooks there are of one assignment, and are reported
otherwise. A learner and assignment left without any released notebook has no
submission.

Student ids
-----------
Ids are reduced to ``[A-Za-z0-9._@-]`` (:func:`safe_student_id`). Raw ids that become
equal after that are told apart, the same way on every run: a raw id that is already
clean keeps its id, every other one gets ``-`` and the start of the SHA-256 of the raw
id appended (``a b`` -> ``a_b-c8687a``); the change is reported and noted on the
submission.

Trust boundary
--------------
Symbolic links, device files, absolute paths and ``..`` components are never followed
or extracted. A file larger than ``MAX_FILE`` bytes, files beyond ``MAX_TOTAL`` bytes
in all, entries beyond the first ``MAX_ENTRIES``, names with control characters or not
valid UTF-8, names longer than ``MAX_NAME``/``MAX_PATH`` bytes or deeper than
``MAX_DEPTH`` folders, encrypted or corrupt zip entries, a name held by two entries, a
name that is both a file and a folder, and files that cannot be read are each skipped
on their own and reported; the rest of the class is still read. A released notebook
with more than ``MAX_CELLS`` cells or more than ``MAX_SAVED_OUTPUTS`` bytes of saved
outputs is refused before it runs, with the reason. Only a zip
whose directory cannot be read at all raises :class:`ValueError`. Every name or id
taken from the submissions is quoted with ``repr()`` in what is reported.
"""
from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from .layout import claims, place_loose_files, refuse_double_claims, unique_ids
from .source import (Entry, build, dir_entries, drop_duplicate_names, drop_file_folder_clashes, open_zip, quote,
                     zip_entries)
from .submission import Submission, safe_student_id

__all__ = ["NothingToGrade", "Submission", "collect", "safe_student_id"]


class NothingToGrade(Exception):
    """The submissions hold nothing to grade (no notebook of the course that can be
    graded); the message says what was found instead."""


def collect(source: Path, assignments: dict[str, list[str]],
            students=None) -> tuple[list[Submission], list[str]]:
    """Submissions found under ``source`` (folder or zip) for the known ``assignments``
    ({assignment: [notebook names without .ipynb]}), and a list of what was skipped,
    refused or changed. ``students``: the raw ids of the gradebook's student list
    (None: no list), which decides a flat name that reads two ways. Raises ValueError
    if ``source`` is a file that cannot be read as a zip at all."""
    students = None if students is None else frozenset(students)
    source = Path(source)
    problems: list[str] = []
    if source.is_dir():
        return _collect(dir_entries(source, problems), set(), assignments, problems, students)
    if not source.exists():
        raise FileNotFoundError(f"no such folder or zip: {source}")
    with ExitStack() as stack:
        zf, not_utf8 = open_zip(source, stack)
        entries, folders = zip_entries(zf, not_utf8, problems)
        return _collect(entries, folders, assignments, problems, students)


def _collect(entries: list[Entry], folders: set[tuple[str, ...]], assignments: dict[str, list[str]],
             problems: list[str], students: frozenset[str] | None) -> tuple[list[Submission], list[str]]:
    entries = sorted(drop_duplicate_names(entries, problems), key=lambda e: e.parts)
    entries = drop_file_folder_clashes(entries, folders, problems)
    found = place_loose_files(claims(entries, assignments, problems, students), problems)
    found = refuse_double_claims(found, problems)
    ids, id_notes = unique_ids({c.student for c in found}, problems)
    for c in found:
        if c.student not in ids:
            problems.append(f"skipped {quote(c.entry.name)}: no usable student id in {c.student!r}")
    return build([c for c in found if c.student in ids], ids, id_notes, assignments, problems), problems
