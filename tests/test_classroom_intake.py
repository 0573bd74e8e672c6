"""The submission intake (classroom.intake) against odd and hostile input: whatever
one learner hands in is skipped or refused with a reason, and every honest learner
of the same folder or zip is still read with exactly their own files."""
from __future__ import annotations

import hashlib
import json
import os
import warnings
import zipfile
from pathlib import Path

import pytest

from classroom.intake import Submission, collect
from classroom.intake import source as collect_mod

ASSIGNMENTS = {"02_layernorm": ["layernorm"], "03_gelu": ["gelu"]}


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def _nb(text: str) -> bytes:
    return json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5, "x": text}).encode()


def _tree(root: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root


def _zip(path: Path, entries, compression=zipfile.ZIP_STORED) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate names we write on purpose
        with zipfile.ZipFile(path, "w", compression) as zf:
            for name, data in entries:
                zf.writestr(name, data)
    return path


def _files(subs: list[Submission]) -> dict[tuple[str, str], dict[str, bytes]]:
    return {(s.student, s.assignment): s.files for s in subs}


def _written(subs: list[Submission], dest: Path) -> dict[str, list[str]]:
    """Write every submission as the grader does; what ends up on disk."""
    out = {}
    for s in subs:
        d = dest / s.student / s.assignment
        d.mkdir(parents=True)
        s.write(d)
        out[s.key] = sorted(str(p.relative_to(d)) for p in d.rglob("*"))
    return out


def _suffix(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()[:6]


def _one(problems: list[str], *needles: str) -> str:
    hits = [p for p in problems if all(n in p for n in needles)]
    assert len(hits) == 1, (needles, problems)
    return hits[0]


# ----------------------------------------------------------------------------- 1: ids
def test_ids_equal_after_cleaning_are_told_apart(tmp_path):
    _tree(tmp_path, {"a b/gelu.ipynb": _nb("space"), "a_b/gelu.ipynb": _nb("clean"),
                     "carol/gelu.ipynb": _nb("c")})
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    other = f"a_b-{_suffix('a b')}"
    assert _files(subs) == {("a_b", "03_gelu"): {"gelu.ipynb": _nb("clean")},
                            (other, "03_gelu"): {"gelu.ipynb": _nb("space")},
                            ("carol", "03_gelu"): {"gelu.ipynb": _nb("c")}}
    line = f"student ids 'a b' and 'a_b' are the same after cleaning: 'a b' is graded as '{other}'"
    assert problems == [line]
    notes = {s.student: s.notes for s in subs}
    assert notes == {"a_b": [], other: [line], "carol": []}
    # the same ids on every run, so a resumed grading run finds the same submissions
    again, _ = collect(tmp_path, ASSIGNMENTS)
    assert [(s.student, s.digest()) for s in again] == [(s.student, s.digest()) for s in subs]


def test_ids_equal_after_cleaning_none_clean_all_get_suffixes(tmp_path):
    long = "x" * 120
    path = _zip(tmp_path / "class.zip", [
        ("a b_gelu.ipynb", _nb("space")), ("a+b_gelu.ipynb", _nb("plus")),
        (f"{long}_gelu.ipynb", _nb("long")), (f"{long}y_gelu.ipynb", _nb("longer")),  # equal once cut to 100
        ("dave_gelu.ipynb", _nb("d"))])
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == {
        (f"a_b-{_suffix('a b')}", "03_gelu"): {"gelu.ipynb": _nb("space")},
        (f"a_b-{_suffix('a+b')}", "03_gelu"): {"gelu.ipynb": _nb("plus")},
        (f"{'x' * 100}-{_suffix(long)}", "03_gelu"): {"gelu.ipynb": _nb("long")},
        (f"{'x' * 100}-{_suffix(long + 'y')}", "03_gelu"): {"gelu.ipynb": _nb("longer")},
        ("dave", "03_gelu"): {"gelu.ipynb": _nb("d")}}
    _one(problems, "'a b' and 'a+b' are the same after cleaning", f"'a+b' is graded as 'a_b-{_suffix('a+b')}'")
    _one(problems, "'a b' and 'a+b' are the same after cleaning", f"'a b' is graded as 'a_b-{_suffix('a b')}'")
    assert len(problems) == 4


def test_unusable_id_is_reported(tmp_path):
    _tree(tmp_path, {"__/gelu.ipynb": _nb("x"), "erin/gelu.ipynb": _nb("e")})
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    assert _files(subs) == {("erin", "03_gelu"): {"gelu.ipynb": _nb("e")}}
    assert problems == ["skipped '__/gelu.ipynb': no usable student id in '__'"]


# ----------------------------------------------------------------------------- 2: whose file
def test_file_in_a_learners_folder_named_for_another_is_refused(tmp_path):
    _tree(tmp_path, {"alice/gelu.ipynb": _nb("alice"), "bob/gelu.ipynb": _nb("bob"),
                     "bob/alice_gelu.ipynb": _nb("forged"), "bob/alice_02_layernorm.ipynb": _nb("forged"),
                     "mallory/alice_gelu.ipynb": _nb("forged")})  # mallory hands in nothing of her own
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    assert _files(subs) == {("alice", "03_gelu"): {"gelu.ipynb": _nb("alice")},
                            ("bob", "03_gelu"): {"gelu.ipynb": _nb("bob")}}
    assert [s.refused for s in subs] == [[], []]
    assert sorted(problems) == [
        "skipped 'bob/alice_02_layernorm.ipynb': it is in the folder of student 'bob' but named for student "
            "'alice' or 'alice_02'",
        "skipped 'bob/alice_gelu.ipynb': it is in the folder of student 'bob' but named for student 'alice'",
        "skipped 'mallory/alice_gelu.ipynb': it is in the folder of student 'mallory' "
        "but named for student 'alice'"]


def test_nested_learner_folder_does_not_take_anothers_place(tmp_path):
    _tree(tmp_path, {"alice/03_gelu/gelu.ipynb": _nb("alice"), "bob/alice/03_gelu/gelu.ipynb": _nb("forged")})
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    assert _files(subs) == {("alice", "03_gelu"): {"gelu.ipynb": _nb("alice")}}
    _one(problems, "'bob/alice/03_gelu/gelu.ipynb'", "'bob' hands in no assignment")


def test_own_name_in_own_folder_is_read(tmp_path):
    _tree(tmp_path, {"bob/bob_gelu.ipynb": _nb("b"), "carol/03_gelu.ipynb": _nb("c"), "x/y.txt": b""})
    subs, _ = collect(tmp_path, ASSIGNMENTS)
    assert _files(subs) == {("bob", "03_gelu"): {"gelu.ipynb": _nb("b")},
                            ("carol", "03_gelu"): {"gelu.ipynb": _nb("c")}}


def test_one_learner_class_keeps_its_folder(tmp_path):
    # the only folder, holding a notebook named for itself: a learner's folder, not a wrapper
    _tree(tmp_path, {"bob/bob_gelu.ipynb": _nb("b"), "bob/utils.py": b"x"})
    (sub,), problems = collect(tmp_path, ASSIGNMENTS)
    assert (sub.student, sub.files, sub.refused) == ("bob", {"gelu.ipynb": _nb("b")}, ["utils.py"])
    assert len(problems) == 1 and "kept away from the grader" in problems[0]


def test_two_files_for_the_same_notebook_are_both_refused(tmp_path):
    path = _zip(tmp_path / "class.zip", [
        ("alice_gelu.ipynb", _nb("one")), ("alice/gelu.ipynb", _nb("two")),
        ("bob_03_gelu.ipynb", _nb("b1")), ("bob/03_gelu/gelu.ipynb", _nb("b2")),
        ("bob/layernorm.ipynb", _nb("bl")), ("carol_gelu.ipynb", _nb("c"))])
    # the student list tells bob's 03_gelu from bob_03's gelu
    subs, problems = collect(path, ASSIGNMENTS, students={"alice", "bob", "carol"})
    assert _files(subs) == {("bob", "02_layernorm"): {"layernorm.ipynb": _nb("bl")},
                            ("carol", "03_gelu"): {"gelu.ipynb": _nb("c")}}
    assert sorted(problems) == [
        "refused 'alice/gelu.ipynb' and 'alice_gelu.ipynb': each hands in 'gelu.ipynb' of '03_gelu' "
        "for student 'alice'; which one counts cannot be told",
        "refused 'bob/03_gelu/gelu.ipynb' and 'bob_03_gelu.ipynb': each hands in 'gelu.ipynb' of '03_gelu' "
        "for student 'bob'; which one counts cannot be told"]


def test_ambiguous_flat_name_is_refused(tmp_path):
    assignments = {"01_x": ["b_c"], "02_y": ["c"], "03_gelu": ["gelu"]}
    path = _zip(tmp_path / "class.zip", [
        ("a_b_c.ipynb", _nb("?")),  # a's b_c (01_x) or a_b's c (02_y)
        ("dave_c.ipynb", _nb("d")),  # only one reading
        ("erin_03_gelu.ipynb", _nb("e"))])  # erin's 03_gelu or erin_03's gelu
    subs, problems = collect(path, assignments)
    assert _files(subs) == {("dave", "02_y"): {"c.ipynb": _nb("d")}}
    hint = "; rename it, hand it in as <student>/<notebook>.ipynb, or add the learner to the gradebook's student list"
    assert problems == ["skipped 'a_b_c.ipynb': ambiguous: it reads as 'b_c' of '01_x' of student 'a' "
                        "or as 'c' of '02_y' of student 'a_b'" + hint,
                        "skipped 'erin_03_gelu.ipynb': ambiguous: it reads as 'gelu' of '03_gelu' of student "
                        "'erin' or as 'gelu' of '03_gelu' of student 'erin_03'" + hint]


def test_a_login_that_reads_as_another_learner_takes_no_place(tmp_path):
    """``dave_03`` (a login with an underscore and digits) hands in ``dave_03_gelu.ipynb``,
    his ``gelu``; read by the longest known name it would be dave's ``03_gelu``, and dave's
    own file beside it would make the two refuse each other (or, first-wins, replace
    him). The gradebook's student list decides; without it the name is refused, and
    dave's own file is still graded as his."""
    files = [("dave_03_gelu.ipynb", _nb("dave_03's")), ("dave_gelu.ipynb", _nb("dave's"))]
    subs, problems = collect(_zip(tmp_path / "class.zip", files), ASSIGNMENTS, students={"dave", "dave_03"})
    assert problems == ["skipped 'dave_03_gelu.ipynb': ambiguous: it reads as 'gelu' of '03_gelu' of student "
                        "'dave' or as 'gelu' of '03_gelu' of student 'dave_03'; rename it, hand it in as "
                        "<student>/<notebook>.ipynb, or add the learner to the gradebook's student list"]
    assert _files(subs) == {("dave", "03_gelu"): {"gelu.ipynb": _nb("dave's")}}
    subs, problems = collect(_zip(tmp_path / "two.zip", files), ASSIGNMENTS, students={"dave_03", "erin"})
    assert problems == [] and _files(subs) == {("dave_03", "03_gelu"): {"gelu.ipynb": _nb("dave_03's")},
                                               ("dave", "03_gelu"): {"gelu.ipynb": _nb("dave's")}}
    subs, problems = collect(_zip(tmp_path / "three.zip", files[:1]), ASSIGNMENTS)  # no list: refused
    assert subs == [] and len(problems) == 1 and "ambiguous" in problems[0]
    # in a learner's own folder the folder decides
    _tree(tmp_path / "folder", {"dave_03/dave_03_gelu.ipynb": _nb("mine"), "dave/dave_gelu.ipynb": _nb("his")})
    subs, problems = collect(tmp_path / "folder", ASSIGNMENTS)
    assert problems == [] and _files(subs) == {("dave_03", "03_gelu"): {"gelu.ipynb": _nb("mine")},
                                               ("dave", "03_gelu"): {"gelu.ipynb": _nb("his")}}


def test_one_wrapping_folder_is_looked_through(tmp_path):
    path = _zip(tmp_path / "class.zip", [
        ("export/submitted/alice/03_gelu/gelu.ipynb", _nb("a")), ("export/bob_gelu.ipynb", _nb("b")),
        ("export/carol/gelu.ipynb", _nb("c")), ("__MACOSX/export/._bob_gelu.ipynb", b"junk")])
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == {("alice", "03_gelu"): {"gelu.ipynb": _nb("a")},
                            ("bob", "03_gelu"): {"gelu.ipynb": _nb("b")},
                            ("carol", "03_gelu"): {"gelu.ipynb": _nb("c")}}
    assert problems == ["skipped '__MACOSX/export/._bob_gelu.ipynb': hidden file or folder (system metadata)"]


def test_single_learner_folder_is_not_a_wrapper(tmp_path):
    _tree(tmp_path, {"bob/gelu.ipynb": _nb("b"), "bob/alice_gelu.ipynb": _nb("forged")})
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    assert _files(subs) == {("bob", "03_gelu"): {"gelu.ipynb": _nb("b")}}
    _one(problems, "'bob/alice_gelu.ipynb'", "named for student 'alice'")


# ----------------------------------------------------------------------------- 3: broken entries
def _bob_and_carol():
    return [("bob/gelu.ipynb", _nb("bob")), ("carol_gelu.ipynb", _nb("carol"))]


HONEST = {("bob", "03_gelu"): {"gelu.ipynb": _nb("bob")}, ("carol", "03_gelu"): {"gelu.ipynb": _nb("carol")}}


def test_zip_entry_with_bad_crc_is_skipped(tmp_path):
    path = _zip(tmp_path / "class.zip", [("alice/gelu.ipynb", _nb("ALICE-CONTENT"))] + _bob_and_carol())
    raw = path.read_bytes()
    assert raw.count(b"ALICE-CONTENT") == 1
    path.write_bytes(raw.replace(b"ALICE-CONTENT", b"ALICE-C0NTENT"))
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    line = _one(problems, "'alice/gelu.ipynb'", "cannot be read", "BadZipFile")
    assert "CRC" in line


def test_encrypted_zip_entry_is_skipped(tmp_path):
    path = tmp_path / "class.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in [("alice/gelu.ipynb", _nb("a"))] + _bob_and_carol():
            zf.writestr(name, data)
        zf.getinfo("alice/gelu.ipynb").flag_bits |= 0x1  # the directory says: encrypted
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    assert problems == ["skipped zip entry 'alice/gelu.ipynb': encrypted"]


def test_truncated_and_mislabelled_zip_entries_are_skipped(tmp_path):
    path = tmp_path / "class.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("alice/gelu.ipynb", _nb("a" * 5000))
        zf.writestr("dave/gelu.ipynb", _nb("d" * 5000))
        for name, data in _bob_and_carol():
            zf.writestr(name, data)
        zf.getinfo("alice/gelu.ipynb").compress_size -= 10  # the directory cuts alice's data short
        zf.getinfo("dave/gelu.ipynb").file_size += 7  # and says dave's is longer than it is
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    _one(problems, "'alice/gelu.ipynb'", "cannot be read")
    _one(problems, "'dave/gelu.ipynb'", "cannot be read")
    assert len(problems) == 2


def test_file_and_folder_of_one_name_are_skipped(tmp_path):
    path = _zip(tmp_path / "class.zip", [
        ("alice/03_gelu/gelu.ipynb", _nb("a")), ("alice/03_gelu/gelu.ipynb/x.py", b"x"),
        ("dave/03_gelu/gelu.ipynb", _nb("d")), ("dave/03_gelu/data", b"file"), ("dave/03_gelu/data/", b""),
        ] + _bob_and_carol())
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == {**HONEST, ("dave", "03_gelu"): {"gelu.ipynb": _nb("d")}}
    assert [s.refused for s in subs] == [[], [], []]
    assert sorted(problems) == [
        "skipped 'alice/03_gelu/gelu.ipynb': 'alice/03_gelu/gelu.ipynb' is both a file and a folder",
        "skipped 'alice/03_gelu/gelu.ipynb/x.py': 'alice/03_gelu/gelu.ipynb' is both a file and a folder",
        "skipped 'dave/03_gelu/data': 'dave/03_gelu/data' is both a file and a folder"]
    assert _written(subs, tmp_path / "out") == {"bob/03_gelu": ["gelu.ipynb"], "carol/03_gelu": ["gelu.ipynb"],
                                                "dave/03_gelu": ["gelu.ipynb"]}


def test_duplicate_zip_names_are_all_skipped(tmp_path):
    path = _zip(tmp_path / "class.zip", [
        ("alice/gelu.ipynb", _nb("one")), ("alice/gelu.ipynb", _nb("two")),
        ("dave/gelu.ipynb", _nb("one")), ("./dave//gelu.ipynb", _nb("two"))] + _bob_and_carol())
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    assert problems == ["skipped 'alice/gelu.ipynb': 2 entries have that name",
                        "skipped 'dave/gelu.ipynb': 2 entries have that name"]


def test_names_with_control_characters_are_skipped_and_quoted(tmp_path):
    path = _zip(tmp_path / "class.zip", [
        ("eve\n/gelu.ipynb", _nb("e")), ("mallory\x1b[2J_gelu.ipynb", _nb("m")),
        ("oscar\u202egelu.ipynb", _nb("o")), ("NULMARK_gelu.ipynb", _nb("n")),
        ("trudy\u2028x_gelu.ipynb", _nb("t"))] + _bob_and_carol())
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b"NULMARK", b"nul\0abc"))  # zipfile itself refuses to write a NUL
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    assert len(problems) == 5
    for p in problems:
        assert p.isprintable() and "control or invalid characters" in p
    assert any("'nul\\x00abc_gelu.ipynb'" in p for p in problems)
    assert any("'eve\\n/gelu.ipynb'" in p for p in problems)
    assert any("\\x1b[2J" in p for p in problems)


def test_zip_name_that_is_not_utf8_is_skipped(tmp_path):
    path = _zip(tmp_path / "class.zip", [("al\u00e9/gelu.ipynb", _nb("a"))] + _bob_and_carol())
    raw = path.read_bytes()
    assert raw.count("al\u00e9".encode()) == 2  # local header and directory, both marked UTF-8
    path.write_bytes(raw.replace("al\u00e9".encode(), b"al\xff\xfe"))
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    assert len(problems) == 1 and problems[0].endswith("/gelu.ipynb': name is not valid UTF-8")


def test_absurdly_long_or_deep_names_are_skipped(tmp_path):
    path = _zip(tmp_path / "class.zip", [
        ("a" * 300 + "_gelu.ipynb", _nb("x")),
        ("/".join(["d" * 200] * 6) + "/gelu.ipynb", _nb("x")),
        ("/".join(["d"] * 40) + "/gelu.ipynb", _nb("x"))] + _bob_and_carol())
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    assert len(problems) == 3
    assert sum("longer than" in p for p in problems) == 2
    assert sum("folders deep" in p for p in problems) == 1
    assert all(len(p) < 500 for p in problems)


def test_too_many_zip_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(collect_mod, "MAX_ENTRIES", 4)
    path = _zip(tmp_path / "class.zip", _bob_and_carol() + [(f"junk{i}.txt", b"") for i in range(30)])
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    assert problems[0].startswith("skipped 28 zip entries beyond the first 4: 'junk2.txt', 'junk3.txt'")
    assert problems[0].endswith("and 8 more")
    assert problems[1:] == ["skipped 'junk0.txt': not a notebook, and not in a learner's folder",
                            "skipped 'junk1.txt': not a notebook, and not in a learner's folder"]


def test_unsafe_zip_entries_are_skipped(tmp_path, monkeypatch):
    monkeypatch.setattr(collect_mod, "MAX_FILE", 1000)
    link = zipfile.ZipInfo("alice/gelu.ipynb")
    link.external_attr = 0o120777 << 16
    path = _zip(tmp_path / "class.zip", [
        (link, "/etc/passwd"), ("../dave_gelu.ipynb", _nb("x")), ("/erin_gelu.ipynb", _nb("x")),
        ("C:/frank_gelu.ipynb", _nb("x")), ("gina/gelu.ipynb", b"x" * 2000)] + _bob_and_carol())
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    assert problems == [
        "skipped zip entry 'alice/gelu.ipynb': symbolic link or not a regular file",
        "skipped zip entry '../dave_gelu.ipynb': '..' in the path",
        "skipped zip entry '/erin_gelu.ipynb': absolute path",
        "skipped zip entry 'C:/frank_gelu.ipynb': absolute path",
        "skipped zip entry 'gina/gelu.ipynb': larger than 1000 bytes"]


def test_class_total_is_capped_without_stopping_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr(collect_mod, "MAX_TOTAL", len(_nb("bob")) + len(_nb("carol")))
    path = _zip(tmp_path / "class.zip", _bob_and_carol() + [("dave/gelu.ipynb", _nb("dave"))])
    subs, problems = collect(path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    assert problems == [f"skipped 'dave/gelu.ipynb': the class's files exceed {collect_mod.MAX_TOTAL} bytes"]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "bad_directory"])
def test_unreadable_zip_raises_one_clear_error(tmp_path, damage):
    path = _zip(tmp_path / "class.zip", _bob_and_carol())
    raw = path.read_bytes()
    if damage == "garbage":
        raw = b"this is not a zip" * 10
    elif damage == "truncated":
        raw = raw[: len(raw) // 2]
    else:
        cd = raw.rindex(b"PK\x01\x02")
        raw = raw[:cd] + b"XX" + raw[cd + 2:]
    path.write_bytes(raw)
    with pytest.raises(ValueError, match="cannot be read as a zip file"):
        collect(path, ASSIGNMENTS)


def test_missing_source(tmp_path):
    with pytest.raises(FileNotFoundError):
        collect(tmp_path / "nothing.zip", ASSIGNMENTS)


def test_unreadable_file_in_a_folder_is_skipped(tmp_path, monkeypatch):
    _tree(tmp_path, {"alice/gelu.ipynb": _nb("a"), "bob/gelu.ipynb": _nb("bob"), "carol_gelu.ipynb": _nb("carol")})
    real = collect_mod._read_regular_file

    def read(path):
        if path.parent.name == "alice":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)
    monkeypatch.setattr(collect_mod, "_read_regular_file", read)
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    _one(problems, "skipped 'alice/gelu.ipynb': cannot be read (PermissionError")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_file_without_read_permission_is_skipped(tmp_path):
    _tree(tmp_path, {"alice/gelu.ipynb": _nb("a"), "bob/gelu.ipynb": _nb("bob"), "carol_gelu.ipynb": _nb("carol")})
    (tmp_path / "alice" / "gelu.ipynb").chmod(0)
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    _one(problems, "'alice/gelu.ipynb'", "cannot be read")


def test_odd_folder_entries_are_skipped(tmp_path):
    _tree(tmp_path, {"bob/gelu.ipynb": _nb("bob"), "carol_gelu.ipynb": _nb("carol"),
                     "eve\nx_gelu.ipynb": _nb("e"), "/".join(["d"] * 20) + "/gelu.ipynb": _nb("d")})
    os.mkfifo(tmp_path / "fifo_gelu.ipynb")
    (tmp_path / "link_gelu.ipynb").symlink_to(tmp_path / "bob" / "gelu.ipynb")
    os.mkdir(os.path.join(os.fsencode(tmp_path), b"bad\xff"))
    (tmp_path / os.fsdecode(b"bad\xff") / "gelu.ipynb").write_bytes(_nb("x"))
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    assert sorted(problems) == sorted([
        "skipped 'bad\\udcff': control or invalid characters in the name",
        "skipped 'eve\\nx_gelu.ipynb': control or invalid characters in the name",
        "skipped 'fifo_gelu.ipynb': not a regular file",
        "skipped 'link_gelu.ipynb': symbolic link",
        f"skipped {'/'.join(['d'] * 17)!r}: more than 16 folders deep"])


# ----------------------------------------------------------------------------- 4: what reaches the kernel
def test_only_released_notebooks_reach_the_grader(tmp_path):
    alice = {"gelu.ipynb": _nb("a"), "timestamp.txt": b"2024-05-01 10:00:00.000000 UTC\n",
             "andrea_ref/__init__.py": b"x", "torch/__init__.py": b"x", "sitecustomize.py": b"x",
             "evil.pth": b"import os", "fast.so": b"\x7fELF", "extra.ipynb": _nb("x"), ".hidden.py": b"x",
             "notes/layernorm.ipynb": _nb("x")}
    _tree(tmp_path, {f"submitted/alice/03_gelu/{k}": v for k, v in alice.items()})
    _tree(tmp_path, {"submitted/bob/gelu.ipynb": _nb("bob"), "submitted/bob/sitecustomize.py": b"x",
                     "submitted/carol_gelu.ipynb": _nb("carol")})
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    by_key = {s.key: s for s in subs}
    assert sorted(by_key) == ["alice/03_gelu", "bob/03_gelu", "carol/03_gelu"]
    assert by_key["alice/03_gelu"].files == {"gelu.ipynb": _nb("a"), "timestamp.txt": alice["timestamp.txt"]}
    assert by_key["alice/03_gelu"].refused == [".hidden.py", "andrea_ref/__init__.py", "evil.pth", "extra.ipynb",
                                               "fast.so", "notes/layernorm.ipynb", "sitecustomize.py",
                                               "torch/__init__.py"]
    assert by_key["bob/03_gelu"].files == {"gelu.ipynb": _nb("bob")}
    assert by_key["bob/03_gelu"].refused == ["sitecustomize.py"]
    assert by_key["carol/03_gelu"].refused == []
    assert _written(subs, tmp_path / "out") == {"alice/03_gelu": ["gelu.ipynb", "timestamp.txt"],
                                                "bob/03_gelu": ["gelu.ipynb"], "carol/03_gelu": ["gelu.ipynb"]}
    line = _one(problems, "student 'alice'", "kept away from the grader")
    assert line.endswith("'sitecustomize.py' and 'torch/__init__.py'")
    assert by_key["alice/03_gelu"].notes == [line.split(": ", 1)[1]]
    assert _one(problems, "student 'bob'", "kept away from the grader").endswith(": 'sitecustomize.py'")
    assert len(problems) == 2


def test_digest_covers_refused_files(tmp_path):
    def digest(extra: dict[str, bytes]) -> str:
        root = tmp_path / str(len(list(tmp_path.iterdir())))
        _tree(root, {"alice/03_gelu/gelu.ipynb": _nb("a"), **{f"alice/03_gelu/{k}": v for k, v in extra.items()}})
        (sub,), _ = collect(root, ASSIGNMENTS)
        return sub.digest()
    plain = digest({})
    assert digest({}) == plain
    assert Submission("alice", "03_gelu", {"gelu.ipynb": _nb("a")}).digest() == plain
    one = digest({"torch.py": b"one"})
    assert one != plain
    assert digest({"torch.py": b"one"}) == one
    assert digest({"torch.py": b"two"}) != one
    assert digest({"numpy.py": b"one"}) != one


def test_bad_timestamp_is_refused(tmp_path):
    _tree(tmp_path, {"alice/03_gelu/gelu.ipynb": _nb("a"), "alice/03_gelu/timestamp.txt": b"x" * 5000,
                     "bob/03_gelu/gelu.ipynb": _nb("bob"), "bob/03_gelu/timestamp.txt": b"2024\n\x1b[2J\n",
                     "carol/03_gelu/gelu.ipynb": _nb("carol"), "carol/03_gelu/timestamp.txt": b"2024-05-01 10:00\n"})
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    got = {s.student: (sorted(s.files), s.refused) for s in subs}
    assert got == {"alice": (["gelu.ipynb"], ["timestamp.txt"]), "bob": (["gelu.ipynb"], ["timestamp.txt"]),
                   "carol": (["gelu.ipynb", "timestamp.txt"], [])}
    _one(problems, "refused 'alice/03_gelu/timestamp.txt' as nbgrader's timestamp: larger than 256 bytes")
    _one(problems, "refused 'bob/03_gelu/timestamp.txt' as nbgrader's timestamp: not one line of text")


def test_submission_without_a_released_notebook_is_dropped(tmp_path):
    _tree(tmp_path, {"alice/03_gelu/gelu.py": b"x", "alice/03_gelu/timestamp.txt": b"2024-05-01\n",
                     "bob/gelu.ipynb": _nb("bob"), "carol_gelu.ipynb": _nb("carol")})
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    assert _files(subs) == HONEST
    assert problems == ["no submission of '03_gelu' for student 'alice': none of its released notebooks was "
                        "handed in usable (found 'alice/03_gelu/gelu.py' and 'alice/03_gelu/timestamp.txt')"]


def test_loose_files_beside_several_assignments_are_reported(tmp_path):
    _tree(tmp_path, {"alice/gelu.ipynb": _nb("g"), "alice/layernorm.ipynb": _nb("l"), "alice/utils.py": b"x"})
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    assert _files(subs) == {("alice", "02_layernorm"): {"layernorm.ipynb": _nb("l")},
                            ("alice", "03_gelu"): {"gelu.ipynb": _nb("g")}}
    assert [s.refused for s in subs] == [[], []]
    assert problems == ["skipped 'alice/utils.py': not a released notebook, and student 'alice' "
                        "hands in several assignments beside it"]


def test_every_report_line_is_one_printable_line(tmp_path):
    path = _zip(tmp_path / "class.zip", [
        ("x\nskipped nothing: all fine_gelu.ipynb", _nb("x")),
        ("a b/gelu.ipynb", _nb("x")), ("a_b/gelu.ipynb", _nb("x")),
        ("bob/03_gelu/gelu.ipynb", _nb("bob")), ("bob/03_gelu/\x1b]0;pwned\x07.py", b"x"),
        ("bob/03_gelu/it's \"odd\".py", b"x"), ("carol_gelu.ipynb", _nb("carol"))])
    subs, problems = collect(path, ASSIGNMENTS)
    assert {s.student for s in subs} == {"a_b", f"a_b-{_suffix('a b')}", "bob", "carol"}
    assert [s.refused for s in subs if s.student == "bob"] == [["it's \"odd\".py"]]
    assert all(p.isprintable() for p in problems)
    assert all(n.isprintable() for s in subs for n in s.notes)
    assert not any(p.startswith("skipped nothing") for p in problems)


def test_a_notebook_too_large_to_run_is_refused_before_it_runs(tmp_path):
    """A notebook of thousands of cells, or with huge saved outputs, would cost the
    worker its memory cap or deadline: it is refused at intake with the reason, and the
    rest of the class is graded."""
    from classroom.intake.source import MAX_CELLS, MAX_SAVED_OUTPUTS

    def notebook(cells):
        return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()

    code = {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [], "execution_count": None}
    big = {**code, "outputs": [{"output_type": "stream", "name": "stdout", "text": "y" * (MAX_SAVED_OUTPUTS + 1)}]}
    _tree(tmp_path, {"many/gelu.ipynb": notebook([code] * (MAX_CELLS + 1)),
                     "huge/gelu.ipynb": notebook([big]),
                     "fine/gelu.ipynb": notebook([code] * MAX_CELLS)})
    subs, problems = collect(tmp_path, ASSIGNMENTS)
    assert [(s.student, s.assignment) for s in subs] == [("fine", "03_gelu")]
    assert sorted(p for p in problems if not p.startswith("no submission of '03_gelu'")) == [
        f"refused 'huge/gelu.ipynb' before running it: its saved outputs take 16.0 MiB; at most 16 MiB are "
        f"accepted (clear the outputs and hand it in again)",
        f"refused 'many/gelu.ipynb' before running it: it has {MAX_CELLS + 1} cells; at most {MAX_CELLS} are run"]
