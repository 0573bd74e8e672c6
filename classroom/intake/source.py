"""Reading a class's files from a folder or a zip, safely (the trust boundary of
:mod:`classroom.intake`), and reading their contents into submissions."""
from __future__ import annotations

import hashlib
import json
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
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from .submission import Submission

if TYPE_CHECKING:  # for the annotations only: layout builds on this module
    from .layout import Claim

MAX_FILE = 50 * (1 << 20)
MAX_TOTAL = 2 * (1 << 30)
MAX_ENTRIES = 10_000
MAX_NAME = 255  # bytes in one component of a path
MAX_PATH = 1024  # bytes in a whole path
MAX_DEPTH = 16  # components of a path
MAX_TIMESTAMP = 256  # bytes of nbgrader's timestamp.txt
TIMESTAMP = "timestamp.txt"
# a released notebook handed in with more cells, or more bytes of saved outputs, is
# refused before it runs: grading it would cost the worker's whole memory cap or
# deadline (the released notebooks have a dozen cells and no outputs)
MAX_CELLS = 2000
MAX_SAVED_OUTPUTS = 16 * (1 << 20)
NBGRADER_DIR = "submitted"

# control, format (bidi overrides, zero-width), surrogate (bytes that are not UTF-8 in
# a folder's names), and the line/paragraph separators that end a line on their own
_BAD_CHARS = {"Cc", "Cf", "Cs", "Zl", "Zp"}
_LISTED = 20  # names listed one by one in a report line before "and N more"


# ----------------------------------------------------------------------------- reporting
def quote(text: str) -> str:
    """``text`` quoted so that it cannot break or forge a report line."""
    return repr(text) if len(text) <= 200 else repr(text[:200]) + "..."


def listing(names: list[str]) -> str:
    if not names:
        return "nothing"
    quoted = [quote(n) for n in names[:_LISTED]]
    if len(names) > _LISTED:
        return ", ".join(quoted) + f" and {len(names) - _LISTED} more"
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def error_text(exc: Exception) -> str:
    return f"{type(exc).__name__}: {quote(str(exc))}"


# ----------------------------------------------------------------------------- entries
@dataclass(frozen=True)
class Entry:
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


def open_zip(path: Path, stack: ExitStack) -> tuple[zipfile.ZipFile, set[int]]:
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
        raise ValueError(f"{path}: cannot be read as a zip file ({error_text(exc)})") from exc


def zip_entries(zf: zipfile.ZipFile, not_utf8: set[int],
                 problems: list[str]) -> tuple[list[Entry], set[tuple[str, ...]]]:
    """The zip's files, and the folders it names; every unusable entry is reported."""
    infos = zf.infolist()
    if len(infos) > MAX_ENTRIES:
        problems.append(f"skipped {len(infos) - MAX_ENTRIES} zip entries beyond the first {MAX_ENTRIES}: "
                        + listing([i.orig_filename for i in infos[MAX_ENTRIES:]]))
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
            problems.append(f"skipped zip entry {quote(info.orig_filename)}: {fault}")
            continue
        entries.append(Entry(parts, info.file_size, partial(_read_zip_entry, zf, info)))
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


def dir_entries(root: Path, problems: list[str]) -> list[Entry]:
    """The files below ``root``, without following links; every unusable one is reported."""
    entries: list[Entry] = []
    beyond: list[str] = []
    stack: list[tuple[str, ...]] = [()]
    seen = 0
    while stack:
        here = stack.pop()
        try:
            with os.scandir(root.joinpath(*here)) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(f"skipped folder {quote('/'.join(here))}: cannot be listed ({error_text(exc)})")
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
                    fault = f"cannot be read ({error_text(exc)})"
            if fault:
                problems.append(f"skipped {quote(rel)}: {fault}")
            elif stat.S_ISDIR(st.st_mode):
                stack.append(parts)
            else:
                entries.append(Entry(parts, st.st_size, lambda p=item.path: _read_regular_file(Path(p))))
    if beyond:
        problems.append(f"skipped {len(beyond)} entries beyond the first {MAX_ENTRIES}: {listing(beyond)}")
    return entries


def drop_duplicate_names(entries: list[Entry], problems: list[str]) -> list[Entry]:
    """Names held by more than one entry (possible in a zip) are skipped, all of them."""
    by_name: dict[tuple[str, ...], list[Entry]] = defaultdict(list)
    for e in entries:
        by_name[e.parts].append(e)
    for parts, group in by_name.items():
        if len(group) > 1:
            problems.append(f"skipped {quote('/'.join(parts))}: {len(group)} entries have that name")
    return [e for e in entries if len(by_name[e.parts]) == 1]


def drop_file_folder_clashes(entries: list[Entry], folders: set[tuple[str, ...]],
                              problems: list[str]) -> list[Entry]:
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
            problems.append(f"skipped {quote(e.name)}: {quote('/'.join(hit))} is both a file and a folder")
    return kept


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


def notebook_fault(data: bytes) -> str | None:
    """Why a handed-in notebook is too large to run (None: it may run). A file that is
    not a notebook at all is left to the grader, which says so on the learner's record."""
    try:
        nb = json.loads(data)
    except (ValueError, RecursionError):
        return None
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        return None
    if len(cells) > MAX_CELLS:
        return f"it has {len(cells)} cells; at most {MAX_CELLS} are run"
    saved = sum(len(json.dumps(c.get("outputs", []))) for c in cells if isinstance(c, dict))
    if saved > MAX_SAVED_OUTPUTS:
        return (f"its saved outputs take {saved / (1 << 20):.1f} MiB; at most {MAX_SAVED_OUTPUTS >> 20} MiB are accepted "
                f"(clear the outputs and hand it in again)")
    return None


def build(claims: list[Claim], ids: dict[str, str], id_notes: dict[str, str],
           assignments: dict[str, list[str]], problems: list[str]) -> list[Submission]:
    subs: dict[tuple[str, str], Submission] = {}
    total = 0
    for c in sorted(claims, key=lambda c: (ids[c.student], c.assignment, c.rel)):
        if total + c.entry.size > MAX_TOTAL:
            problems.append(f"skipped {quote(c.entry.name)}: the class's files exceed {MAX_TOTAL} bytes")
            continue
        try:
            data = c.entry.read()
        except Exception as exc:  # corrupt, truncated, unreadable: this file only
            problems.append(f"skipped {quote(c.entry.name)}: cannot be read ({error_text(exc)})")
            continue
        total += len(data)
        sub = subs.get((ids[c.student], c.assignment))
        if sub is None:
            sub = subs[ids[c.student], c.assignment] = Submission(ids[c.student], c.assignment)
            if c.student in id_notes:
                sub.notes.append(id_notes[c.student])
        sub.origin.append(c.entry.name)
        released = {f"{nb}.ipynb" for nb in assignments[c.assignment]}
        if c.rel in released and (too_large := notebook_fault(data)) is not None:
            problems.append(f"refused {quote(c.entry.name)} before running it: {too_large}")
            continue
        fault = _timestamp_fault(data) if c.rel == TIMESTAMP else None
        if c.rel in released or (c.rel == TIMESTAMP and fault is None):
            sub.files[c.rel] = data
        else:
            if fault:
                problems.append(f"refused {quote(c.entry.name)} as nbgrader's timestamp: {fault}")
            sub.refused.append(c.rel)
            sub.refused_sha256[c.rel] = hashlib.sha256(data).hexdigest()
    result = []
    for (sid, assignment), sub in sorted(subs.items()):
        sub.refused.sort()
        if not any(name.endswith(".ipynb") for name in sub.files):
            problems.append(f"no submission of {assignment!r} for student {sid!r}: none of its released "
                            f"notebooks was handed in usable (found {listing(sorted(sub.origin))})")
            continue
        if sub.refused:
            note = f"kept away from the grader (only released notebooks are graded): {listing(sub.refused)}"
            sub.notes.append(note)
            problems.append(f"student {sid!r}, {assignment!r}: {note}")
        result.append(sub)
    return result
