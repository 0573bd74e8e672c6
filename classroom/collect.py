"""Read a class's submissions from a folder or a zip, safely.

Accepted layouts (a folder, or the same inside a ``.zip``), below the *class root*:

1. nbgrader's own: ``[submitted/]<student>/<assignment>/<notebook>.ipynb`` (plus
   nbgrader's ``timestamp.txt``);
2. one folder per learner: ``<student>/<notebook>.ipynb``, e.g. ``alice/gelu.ipynb``
   (``<student>/<assignment>.ipynb`` of a one-notebook assignment and
   ``<student>/<student>_<notebook>.ipynb`` are read the same way);
3. one file per learner and notebook, as learning platforms export them:
   ``<student>_<notebook>.ipynb`` or ``<student>_<assignment>.ipynb``, e.g.
   ``alice_gelu.ipynb`` or ``alice_02_gelu.ipynb``.

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
name; if the possible splits give different assignments the file is refused as
ambiguous, otherwise the longest known name decides (``dave_02_gelu.ipynb`` is dave's
``02_gelu``, not ``dave_02``'s ``gelu``). Two different files that hand in the same
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
on their own and reported; the rest of the class is still read. Only a zip
whose directory cannot be read at all raises :class:`ValueError`. Every name or id
taken from the submissions is quoted with ``repr()`` in what is reported.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import struct
import tempfile
import unicodedata
import zipfile
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

MAX_FILE = 50 * (1 << 20)
MAX_TOTAL = 2 * (1 << 30)
MAX_ENTRIES = 10_000
MAX_NAME = 255  # bytes in one component of a path
MAX_PATH = 1024  # bytes in a whole path
MAX_DEPTH = 16  # components of a path
MAX_TIMESTAMP = 256  # bytes of nbgrader's timestamp.txt
TIMESTAMP = "timestamp.txt"
NBGRADER_DIR = "submitted"

_SAFE = re.compile(r"[^A-Za-z0-9._@-]")
# control, format (bidi overrides, zero-width), surrogate (bytes that are not UTF-8 in
# a folder's names), and the line/paragraph separators that end a line on their own
_BAD_CHARS = {"Cc", "Cf", "Cs", "Zl", "Zp"}
_LISTED = 20  # names listed one by one in a report line before "and N more"


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


# ----------------------------------------------------------------------------- reporting
def _q(text: str) -> str:
    """``text`` quoted so that it cannot break or forge a report line."""
    return repr(text) if len(text) <= 200 else repr(text[:200]) + "..."


def _names(names: list[str]) -> str:
    if not names:
        return "nothing"
    quoted = [_q(n) for n in names[:_LISTED]]
    if len(names) > _LISTED:
        return ", ".join(quoted) + f" and {len(names) - _LISTED} more"
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def _fault(exc: Exception) -> str:
    return f"{type(exc).__name__}: {_q(str(exc))}"


# ----------------------------------------------------------------------------- entries
@dataclass(frozen=True)
class _Entry:
    parts: tuple[str, ...]  # the path in the source, cleaned of "" and "." components
    size: int  # as the source declares it
    read: Callable[[], bytes]  # the content; raises on any fault

    @property
    def name(self) -> str:
        return "/".join(self.parts)


def _name_fault(raw: str) -> tuple[tuple[str, ...], str]:
    """The components of the path ``raw`` ("/"-separated), or () and why it is refused."""
    if any(unicodedata.category(c) in _BAD_CHARS for c in raw):
        return (), "control or invalid characters in the name"
    if raw.startswith("/") or re.match(r"[A-Za-z]:(/|$)", raw):
        return (), "absolute path"
    parts = tuple(p for p in raw.split("/") if p not in ("", "."))
    if ".." in parts:
        return (), "'..' in the path"
    if not parts:
        return (), "empty name"
    if len(parts) > MAX_DEPTH:
        return (), f"more than {MAX_DEPTH} folders deep"
    if len(raw.encode()) > MAX_PATH or any(len(p.encode()) > MAX_NAME for p in parts):
        return (), f"name longer than {MAX_NAME} bytes or path longer than {MAX_PATH} bytes"
    return parts, ""


def _read_zip_entry(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> bytes:
    with zf.open(info) as fh:
        data = fh.read(info.file_size + 1)
    if len(data) != info.file_size:
        raise ValueError(f"holds {len(data)} bytes where the zip says {info.file_size}")
    return data


def _unmark_invalid_utf8_names(fh) -> set[int]:
    """Clear the UTF-8 flag of the central directory records, in the zip open read-write
    as ``fh``, whose names are not UTF-8 (zipfile cannot open the zip otherwise); returns
    their positions in the directory."""
    size = fh.seek(0, os.SEEK_END)
    tail_start = max(0, size - 22 - 0xFFFF)
    fh.seek(tail_start)
    tail = fh.read()
    end = tail.rfind(b"PK\x05\x06")
    if end < 0 or len(tail) - end < 22:
        return set()
    (cd_size,) = struct.unpack_from("<I", tail, end + 12)
    cd_start = tail_start + end - cd_size
    if cd_start < 0:
        return set()
    fh.seek(cd_start)
    cd = bytearray(fh.read(cd_size))
    bad, pos, index = set(), 0, 0
    while pos + 46 <= len(cd) and cd[pos:pos + 4] == b"PK\x01\x02":
        (flags,) = struct.unpack_from("<H", cd, pos + 8)
        n, m, k = struct.unpack_from("<HHH", cd, pos + 28)
        if flags & 0x800:
            try:
                bytes(cd[pos + 46:pos + 46 + n]).decode("utf-8")
            except UnicodeDecodeError:
                struct.pack_into("<H", cd, pos + 8, flags & ~0x800)
                bad.add(index)
        pos, index = pos + 46 + n + m + k, index + 1
    fh.seek(cd_start)
    fh.write(cd)
    return bad


def _open_zip(path: Path, stack: ExitStack) -> tuple[zipfile.ZipFile, set[int]]:
    """The zip at ``path`` (closed with ``stack``), and the positions of the entries whose
    names are not valid UTF-8 though the zip says they are."""
    try:
        try:
            return stack.enter_context(zipfile.ZipFile(path)), set()
        except UnicodeDecodeError:  # read a copy where those names are not marked UTF-8
            copy = stack.enter_context(tempfile.TemporaryFile())
            with open(path, "rb") as fh:
                shutil.copyfileobj(fh, copy)
            bad = _unmark_invalid_utf8_names(copy)
            return stack.enter_context(zipfile.ZipFile(copy)), bad
    except Exception as exc:  # whatever zipfile makes of a broken directory
        raise ValueError(f"{path}: cannot be read as a zip file ({_fault(exc)})") from exc


def _zip_entries(zf: zipfile.ZipFile, not_utf8: set[int],
                 problems: list[str]) -> tuple[list[_Entry], set[tuple[str, ...]]]:
    """The zip's files, and the folders it names; every unusable entry is reported."""
    infos = zf.infolist()
    if len(infos) > MAX_ENTRIES:
        problems.append(f"skipped {len(infos) - MAX_ENTRIES} zip entries beyond the first {MAX_ENTRIES}: "
                        + _names([i.orig_filename for i in infos[MAX_ENTRIES:]]))
    entries, folders = [], set()
    for index, info in enumerate(infos[:MAX_ENTRIES]):
        raw = info.orig_filename.replace("\\", "/")
        parts, fault = _name_fault(raw)
        if index in not_utf8:
            fault = "name is not valid UTF-8"
        mode = (info.external_attr >> 16) & 0o170000
        if not fault:
            if raw.endswith("/"):
                folders.add(parts)
                continue
            if mode and not stat.S_ISREG(mode):
                fault = "symbolic link or not a regular file"
            elif info.flag_bits & 0x1:
                fault = "encrypted"
            elif info.file_size > MAX_FILE:
                fault = f"larger than {MAX_FILE} bytes"
        if fault:
            problems.append(f"skipped zip entry {_q(info.orig_filename)}: {fault}")
            continue
        entries.append(_Entry(parts, info.file_size, partial(_read_zip_entry, zf, info)))
    return entries, folders


def _read_regular_file(path: Path) -> bytes:
    """The content of ``path`` if it is (still) a regular file of at most MAX_FILE bytes."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise ValueError("not a regular file")
        data = fh.read(MAX_FILE + 1)
    if len(data) > MAX_FILE:
        raise ValueError(f"larger than {MAX_FILE} bytes")
    return data


def _mode_fault(st: os.stat_result) -> str:
    """Why a folder's item of this (lstat) kind is not read; "" for a file or folder."""
    if stat.S_ISLNK(st.st_mode):
        return "symbolic link"
    if stat.S_ISDIR(st.st_mode):
        return ""
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if st.st_size > MAX_FILE:
        return f"larger than {MAX_FILE} bytes"
    return ""


def _dir_entries(root: Path, problems: list[str]) -> list[_Entry]:
    """The files below ``root``, without following links; every unusable one is reported."""
    entries: list[_Entry] = []
    beyond: list[str] = []
    stack: list[tuple[str, ...]] = [()]
    seen = 0
    while stack:
        here = stack.pop()
        try:
            with os.scandir(root.joinpath(*here)) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(f"skipped folder {_q('/'.join(here))}: cannot be listed ({_fault(exc)})")
            continue
        for item in items:
            rel = "/".join(here + (item.name,))
            seen += 1
            if seen > MAX_ENTRIES:
                beyond.append(rel)
                continue
            parts, fault = _name_fault(rel)
            if not fault:
                try:
                    st = item.stat(follow_symlinks=False)
                    fault = _mode_fault(st)
                except OSError as exc:
                    fault = f"cannot be read ({_fault(exc)})"
            if fault:
                problems.append(f"skipped {_q(rel)}: {fault}")
            elif stat.S_ISDIR(st.st_mode):
                stack.append(parts)
            else:
                entries.append(_Entry(parts, st.st_size, lambda p=item.path: _read_regular_file(Path(p))))
    if beyond:
        problems.append(f"skipped {len(beyond)} entries beyond the first {MAX_ENTRIES}: {_names(beyond)}")
    return entries


def _drop_duplicate_names(entries: list[_Entry], problems: list[str]) -> list[_Entry]:
    """Names held by more than one entry (possible in a zip) are skipped, all of them."""
    by_name: dict[tuple[str, ...], list[_Entry]] = defaultdict(list)
    for e in entries:
        by_name[e.parts].append(e)
    for parts, group in by_name.items():
        if len(group) > 1:
            problems.append(f"skipped {_q('/'.join(parts))}: {len(group)} entries have that name")
    return [e for e in entries if len(by_name[e.parts]) == 1]


def _drop_file_folder_clashes(entries: list[_Entry], folders: set[tuple[str, ...]],
                              problems: list[str]) -> list[_Entry]:
    """A name that is both a file and a folder: the file and everything below it are skipped."""
    files = {e.parts for e in entries}
    below = set(folders) | {e.parts[:i] for e in entries for i in range(1, len(e.parts))}
    clashes = files & below
    kept = []
    for e in entries:
        hit = next((e.parts[:i] for i in range(1, len(e.parts) + 1) if e.parts[:i] in clashes), None)
        if hit is None:
            kept.append(e)
        else:
            problems.append(f"skipped {_q(e.name)}: {_q('/'.join(hit))} is both a file and a folder")
    return kept


# ----------------------------------------------------------------------------- whose file
def _is_hidden(name: str) -> bool:
    return name.startswith(".") or name == "__MACOSX"


def _notebook_named(stem: str, assignments: dict[str, list[str]]) -> tuple[str, str] | str | None:
    """(assignment, notebook) for ``<notebook>`` or a one-notebook ``<assignment>``; a
    reason when that name cannot be placed; None when it names neither."""
    owners = sorted(a for a, nbs in assignments.items() if stem in nbs)
    if len(owners) > 1:
        return f"ambiguous: notebook {stem!r} is part of {_names(owners)}"
    if owners:
        return owners[0], stem
    if stem in assignments:
        if len(assignments[stem]) != 1:
            return f"{stem!r} has several notebooks; name the file <notebook>.ipynb"
        return stem, assignments[stem][0]
    return None


def _split_flat(stem: str, assignments: dict[str, list[str]]) -> tuple[str, str, str] | str | None:
    """(student, assignment, notebook) read from ``<student>_<notebook|assignment>``; a
    reason when the name is ambiguous or incomplete; None when no known name ends it."""
    splits = []  # (length of the known name, is a notebook, student, assignment, notebook)
    for assignment, notebooks in assignments.items():
        for known, nb in [(assignment, None)] + [(n, n) for n in notebooks]:
            if len(stem) > len(known) + 1 and stem.endswith("_" + known):
                splits.append((len(known), nb is not None, stem[: -len(known) - 1], assignment, nb))
    if not splits:
        return None
    if len({s[3] for s in splits}) > 1:
        readings = sorted({(s[2], s[3]) for s in splits})
        return "ambiguous: it reads as " + " or as ".join(f"{a!r} of student {s!r}" for s, a in readings)
    _, _, student, assignment, nb = max(splits, key=lambda s: (s[0], s[1]))
    if nb is None:
        if len(assignments[assignment]) != 1:
            return f"{assignment!r} has several notebooks; name the file <student>_<notebook>.ipynb"
        nb = assignments[assignment][0]
    return student, assignment, nb


def _is_student_folder(name: str, inside: list[tuple[str, ...]], assignments: dict[str, list[str]]) -> bool:
    """Whether the folder ``name`` holding these paths is a learner's: it holds an
    ``<assignment>/`` folder, a released ``<notebook>.ipynb`` or ``<name>_<notebook>.ipynb``."""
    for p in inside:
        if len(p) >= 2 and p[0] in assignments:
            return True
        if len(p) == 1 and p[0].endswith(".ipynb"):
            if isinstance(_notebook_named(p[0][:-6], assignments), tuple):
                return True
            split = _split_flat(p[0][:-6], assignments)
            if isinstance(split, tuple) and split[0] == name:
                return True
    return False


def _strip_submitted(parts: tuple[str, ...]) -> tuple[str, ...]:
    return parts[1:] if len(parts) > 1 and parts[0] == NBGRADER_DIR else parts


def _wrapping_folder(paths: list[tuple[str, ...]], assignments: dict[str, list[str]]) -> str | None:
    """The one folder that wraps the whole class, if there is one (see the module doc)."""
    tops = {p[0] for p in paths if not _is_hidden(p[0])}
    if len(tops) != 1:
        return None
    (top,) = tops
    inside = [p[1:] for p in paths if p[0] == top]
    if any(not p for p in inside) or _is_student_folder(top, inside, assignments):
        return None
    return top


@dataclass
class _Claim:
    student: str  # the raw id, as the source names it
    assignment: str | None  # None: a loose file in the learner's folder
    rel: str  # its path inside the submission
    entry: _Entry


def _claim_in_student_folder(student: str, rest: tuple[str, ...], entry: _Entry,
                             assignments: dict[str, list[str]]) -> _Claim | str:
    """Whose and which file ``<student>/<rest>`` is: always ``student``'s."""
    if len(rest) >= 2 and rest[0] in assignments:  # nbgrader: <student>/<assignment>/...
        return _Claim(student, rest[0], "/".join(rest[1:]), entry)
    if len(rest) == 1 and rest[0].endswith(".ipynb"):  # <student>/<notebook>.ipynb
        stem = rest[0][:-6]
        found = _notebook_named(stem, assignments)
        if found is None:
            found = _split_flat(stem, assignments)
            if isinstance(found, tuple):
                named, assignment, nb = found
                if named != student:
                    return f"it is in the folder of student {student!r} but named for student {named!r}"
                found = assignment, nb
        if isinstance(found, str):
            return found
        if found is not None:
            return _Claim(student, found[0], f"{found[1]}.ipynb", entry)
    return _Claim(student, None, "/".join(rest), entry)


def _claim_flat(name: str, entry: _Entry, assignments: dict[str, list[str]]) -> _Claim | str:
    """Whose and which file ``<student>_<notebook|assignment>.ipynb`` at the class root is."""
    if not name.endswith(".ipynb"):
        return "not a notebook, and not in a learner's folder"
    found = _split_flat(name[:-6], assignments)
    if found is None:
        return "cannot tell which student and assignment it belongs to"
    if isinstance(found, str):
        return found
    student, assignment, nb = found
    return _Claim(student, assignment, f"{nb}.ipynb", entry)


def _claims(entries: list[_Entry], assignments: dict[str, list[str]], problems: list[str]) -> list[_Claim]:
    paths = [_strip_submitted(e.parts) for e in entries]
    wrapper = _wrapping_folder(paths, assignments)
    claims = []
    for entry, parts in zip(entries, paths):
        if wrapper is not None and parts[0] == wrapper:
            parts = _strip_submitted(parts[1:])
        if _is_hidden(parts[0]):
            claim = "hidden file or folder (system metadata)"
        elif len(parts) == 1:
            claim = _claim_flat(parts[0], entry, assignments)
        else:
            claim = _claim_in_student_folder(parts[0], parts[1:], entry, assignments)
        if isinstance(claim, str):
            problems.append(f"skipped {_q(entry.name)}: {claim}")
        else:
            claims.append(claim)
    return claims


def _place_loose_files(claims: list[_Claim], problems: list[str]) -> list[_Claim]:
    """A loose file in a learner's folder belongs to the learner's one assignment there."""
    assignments_of: dict[str, set[str]] = defaultdict(set)
    for c in claims:
        if c.assignment is not None:
            assignments_of[c.student].add(c.assignment)
    placed = []
    for c in claims:
        if c.assignment is None:
            mine = assignments_of[c.student]
            if len(mine) != 1:
                how_many = "no assignment" if not mine else "several assignments"
                problems.append(f"skipped {_q(c.entry.name)}: not a released notebook, and student "
                                f"{c.student!r} hands in {how_many} beside it")
                continue
            c.assignment = next(iter(mine))
        placed.append(c)
    return placed


def _refuse_double_claims(claims: list[_Claim], problems: list[str]) -> list[_Claim]:
    """Files claiming the same path of the same learner's assignment are all refused."""
    groups: dict[tuple[str, str, str], list[_Claim]] = defaultdict(list)
    for c in claims:
        groups[c.student, c.assignment, c.rel].append(c)
    kept = []
    for (student, assignment, rel), group in groups.items():
        if len(group) == 1:
            kept.append(group[0])
            continue
        problems.append(f"refused {_names(sorted(c.entry.name for c in group))}: each hands in {rel!r} of "
                        f"{assignment!r} for student {student!r}; which one counts cannot be told")
    return kept


# ----------------------------------------------------------------------------- ids
def _unique_ids(raw_ids: set[str], problems: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """{raw id: graded id} with raw ids that clean to the same id told apart, and
    {raw id: why its id is not the clean one}. Raw ids without a usable id are left out."""
    by_clean: dict[str, list[str]] = defaultdict(list)
    for raw in sorted(raw_ids):
        sid = safe_student_id(raw)
        if sid is not None:
            by_clean[sid].append(raw)
    ids: dict[str, str] = {}
    notes: dict[str, str] = {}
    taken = set(by_clean)
    for sid, group in sorted(by_clean.items()):
        for raw in group:
            if len(group) == 1 or raw == sid:
                ids[raw] = sid
                continue
            digest = hashlib.sha256(raw.encode("utf-8", "backslashreplace")).hexdigest()
            new = next(c for c in (f"{sid}-{digest[:n]}" for n in (6, 10, 16, 64)) if c not in taken)
            taken.add(new)
            ids[raw] = new
            notes[raw] = (f"student ids {_names(group)} are the same after cleaning: "
                          f"{raw!r} is graded as {new!r}")
            problems.append(notes[raw])
    return ids, notes


# ----------------------------------------------------------------------------- contents
def _timestamp_fault(data: bytes) -> str | None:
    if len(data) > MAX_TIMESTAMP:
        return f"larger than {MAX_TIMESTAMP} bytes"
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return "not plain text"
    line = text.rstrip("\r\n")
    if not line.strip() or not line.isprintable():
        return "not one line of text"
    return None


def _build(claims: list[_Claim], ids: dict[str, str], id_notes: dict[str, str],
           assignments: dict[str, list[str]], problems: list[str]) -> list[Submission]:
    subs: dict[tuple[str, str], Submission] = {}
    total = 0
    for c in sorted(claims, key=lambda c: (ids[c.student], c.assignment, c.rel)):
        if total + c.entry.size > MAX_TOTAL:
            problems.append(f"skipped {_q(c.entry.name)}: the class's files exceed {MAX_TOTAL} bytes")
            continue
        try:
            data = c.entry.read()
        except Exception as exc:  # corrupt, truncated, unreadable: this file only
            problems.append(f"skipped {_q(c.entry.name)}: cannot be read ({_fault(exc)})")
            continue
        total += len(data)
        sub = subs.get((ids[c.student], c.assignment))
        if sub is None:
            sub = subs[ids[c.student], c.assignment] = Submission(ids[c.student], c.assignment)
            if c.student in id_notes:
                sub.notes.append(id_notes[c.student])
        sub.origin.append(c.entry.name)
        released = {f"{nb}.ipynb" for nb in assignments[c.assignment]}
        fault = _timestamp_fault(data) if c.rel == TIMESTAMP else None
        if c.rel in released or (c.rel == TIMESTAMP and fault is None):
            sub.files[c.rel] = data
        else:
            if fault:
                problems.append(f"refused {_q(c.entry.name)} as nbgrader's timestamp: {fault}")
            sub.refused.append(c.rel)
            sub.refused_sha256[c.rel] = hashlib.sha256(data).hexdigest()
    result = []
    for (sid, assignment), sub in sorted(subs.items()):
        sub.refused.sort()
        if not any(name.endswith(".ipynb") for name in sub.files):
            problems.append(f"no submission of {assignment!r} for student {sid!r}: none of its released "
                            f"notebooks was handed in usable (found {_names(sorted(sub.origin))})")
            continue
        if sub.refused:
            note = f"kept away from the grader (only released notebooks are graded): {_names(sub.refused)}"
            sub.notes.append(note)
            problems.append(f"student {sid!r}, {assignment!r}: {note}")
        result.append(sub)
    return result


def collect(source: Path, assignments: dict[str, list[str]]) -> tuple[list[Submission], list[str]]:
    """Submissions found under ``source`` (folder or zip) for the known ``assignments``
    ({assignment: [notebook names without .ipynb]}), and a list of what was skipped,
    refused or changed. Raises ValueError if ``source`` is a file that cannot be read
    as a zip at all."""
    source = Path(source)
    problems: list[str] = []
    if source.is_dir():
        return _collect(_dir_entries(source, problems), set(), assignments, problems)
    if not source.exists():
        raise FileNotFoundError(f"{source}: neither a folder nor a zip file")
    with ExitStack() as stack:
        zf, not_utf8 = _open_zip(source, stack)
        entries, folders = _zip_entries(zf, not_utf8, problems)
        return _collect(entries, folders, assignments, problems)


def _collect(entries: list[_Entry], folders: set[tuple[str, ...]], assignments: dict[str, list[str]],
             problems: list[str]) -> tuple[list[Submission], list[str]]:
    entries = sorted(_drop_duplicate_names(entries, problems), key=lambda e: e.parts)
    entries = _drop_file_folder_clashes(entries, folders, problems)
    claims = _place_loose_files(_claims(entries, assignments, problems), problems)
    claims = _refuse_double_claims(claims, problems)
    ids, id_notes = _unique_ids({c.student for c in claims}, problems)
    for c in claims:
        if c.student not in ids:
            problems.append(f"skipped {_q(c.entry.name)}: no usable student id in {c.student!r}")
    claims = [c for c in claims if c.student in ids]
    return _build(claims, ids, id_notes, assignments, problems), problems
