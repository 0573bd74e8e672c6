"""The course manifest, course.toml: the one list of the assignments.

It names what the repository holds (every folder of solutions/ is an entry, every entry
has its notebooks, chapter, checks and catalogs); a manifest that cannot be used is
refused with one line naming the entry and what was expected, by the reader and by the
commands that read it, before any work; the points a learner reads (the notebooks'
tables, in every language, and the graded cells' first lines) are nbgrader's; the
documentation names no assignment the manifest lacks. And an assignment is added
through the manifest alone: a copy of one under a new name, in a copy of the course, is
released, graded right and wrong by ``python -m classroom.grade`` and goes into the
learner kit (slow).
"""
from __future__ import annotations

import copy
import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from andrea_ref.grading import points_table
from andrea_ref.i18n import read_catalog
from andrea_ref.grading.manifest import FILE, KEYS, ManifestError, load
from classroom import notebook_i18n
from classroom.isolation import uids

ROOT = Path(__file__).resolve().parent.parent
COURSE = load()


# ----------------------------------------------------------------------------- the repository's
@pytest.mark.fast
def test_the_manifest_names_every_assignment_the_repository_holds():
    assert COURSE.names == sorted(p.name for p in (ROOT / "solutions").iterdir() if any(p.glob("*.ipynb")))
    for a in COURSE:
        assert a.solution.is_file() and a.exercise.is_file(), a
        assert a.chapter_file.is_file() and (ROOT / "andrea_ref" / "grading" / f"{a.checks}.py").is_file(), a
        assert set(a.catalogs()) == {"de", "ka"} and all(p.is_file() for p in a.catalogs().values()), a
        assert sorted(p.name for p in a.exercise.parent.glob("*.ipynb")) == [a.filename], a
        assert a.points() and all(p > 0 for p in a.points().values()), a
    assert COURSE["03_gelu"].function() == ("gelu", "x")
    with pytest.raises(KeyError, match="'09_nothing' is no assignment"):
        COURSE["09_nothing"]


@pytest.mark.fast
def test_the_notebooks_follow_the_chapters_and_are_numbered_as_done():
    """Learners do the notebooks in the manifest's order: each practises a chapter no
    earlier than the one before, and its title, in every edition, says which it is."""
    chapters = [a.chapter_number for a in COURSE]
    assert chapters == sorted(chapters), [(a.name, a.chapter_number) for a in COURSE]
    words = {"en": "Exercise", "de": "Übung", "ka": "სავარჯიშო"}
    for place, a in enumerate(COURSE, start=1):
        title = "".join(json.loads(a.solution.read_text(encoding="utf-8"))["cells"][0]["source"]).splitlines()[0]
        assert re.fullmatch(rf"# Exercise {place}: .+", title), (a.name, title)
        for language, catalog in a.catalogs().items():
            translated = read_catalog(catalog).get(title, "")
            assert translated.startswith(f"# {words[language]} {place}: "), (a.name, language, translated)


@pytest.mark.fast
@pytest.mark.parametrize("where", ["solutions", "exercises"])
def test_the_notebooks_show_nbgrader_s_points(where):
    for a in COURSE:
        nb = json.loads((ROOT / where / a.path).read_text(encoding="utf-8"))
        assert points_table.disagreements(nb["cells"], f"{where}/{a.path}") == []
        rows = [row for c in nb["cells"] if c["cell_type"] == "markdown"
                for row in points_table.table_rows("".join(c["source"])) or []]
        assert [float(points_table.row_points(r)) for r in rows] == list(a.points().values()), a.name


@pytest.mark.fast
@pytest.mark.parametrize("language", ["de", "ka"])
def test_the_translated_tables_show_the_same_points(language):
    for a in COURSE:
        nb = json.loads(a.exercise.read_text(encoding="utf-8"))
        messages = notebook_i18n.catalog(language, a.name)
        (table,) = [block for c in nb["cells"] if c["cell_type"] == "markdown"
                    for block, _ in notebook_i18n.blocks("".join(c["source"]))
                    if block.startswith(points_table.HEADER)]
        assert table in messages, f"{a.catalog(language)}: the points table has no translation"
        english, translated = table.split("\n")[2:], messages[table].split("\n")[2:]
        assert [points_table.row_points(r) for r in translated] == [points_table.row_points(r) for r in english], \
            f"{a.catalog(language)}: the translated points table does not show nbgrader's points"


@pytest.mark.fast
def test_the_release_writes_the_metadata_s_points_into_the_table_and_the_first_lines():
    cells = COURSE["02_layernorm"].cells()
    changed = copy.deepcopy(cells)
    cell = next(c for c in changed if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "ln_eps")
    cell["metadata"]["nbgrader"]["points"] = 1
    problems = points_table.disagreements(changed, "x.ipynb")
    assert problems == ["x.ipynb: cell 'rules' does not show the points of nbgrader's metadata",
                        "x.ipynb: cell 'ln_eps' does not show the points of nbgrader's metadata"]
    assert points_table.sync_cells(changed, "x.ipynb") is True
    assert "".join(cell["source"]).startswith("# [locked] Graded check, 1 point\n")
    table = next(c for c in changed if points_table.table_rows("".join(c["source"])) is not None)
    assert points_table.table_rows("".join(table["source"]))[-1] == "| `eps` inside the square root | 1 |"
    assert points_table.disagreements(changed, "x.ipynb") == [] and not points_table.sync_cells(changed, "x")
    # a table that cannot be matched with the graded cells is refused, in one line
    del changed[changed.index(cell)]
    with pytest.raises(points_table.TableError) as err:
        points_table.sync_cells(changed, "x.ipynb")
    assert str(err.value) == ("x.ipynb: its table of graded properties has 4 rows, the notebook 3 graded cells "
                              "(ln_shape, ln_normalise, ln_affine): expected one row per graded cell, in order")


@pytest.mark.fast
def test_the_docs_name_no_assignment_the_manifest_lacks():
    named = re.compile(r"`(\d{2}_[a-z][a-z0-9_]*)`")
    texts = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "book").glob("*.md"))]
    for path in texts:
        for name in named.findall(path.read_text(encoding="utf-8")):
            chapter = (ROOT / "book" / f"{name}.md").is_file()
            assert name in COURSE.names or chapter, f"{path.relative_to(ROOT)} names `{name}`, no assignment of {FILE}"


# ----------------------------------------------------------------------------- bad manifests
def _entry(**over) -> dict:
    entry = {"name": "02_layernorm", "notebook": "layernorm", "chapter": "04_layernorm_and_placement",
             "checks": "layernorm"}
    entry.update(over)
    return {k: v for k, v in entry.items() if v is not None}


def _toml(*entries: dict, extra: str = "") -> str:
    return extra + "".join("[[assignment]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in e.items()) + "\n"
                           for e in entries)


GELU = _entry(name="03_gelu", notebook="gelu", chapter="05_mlp_and_gelu", checks="gelu")
BAD = {
    "missing folder": (_toml(_entry(name="07_missing")),
                       "course.toml: assignment 1 ('07_missing'): expected the folder solutions/07_missing/, "
                       "which does not exist"),
    "missing notebook": (_toml(_entry(notebook="layer_norm")),
                         "course.toml: assignment 1 ('02_layernorm'): expected the notebook "
                         "solutions/02_layernorm/layer_norm.ipynb, which does not exist"),
    "unknown key": (_toml(_entry(), {**GELU, "points": 10}),
                    "course.toml: assignment 2 ('03_gelu'): unknown key 'points' (expected only "
                    + ", ".join(KEYS) + ")"),
    "duplicate name": (_toml(_entry(), _entry()),
                       "course.toml: assignment 2 ('02_layernorm'): duplicate name, already assignment 1 "
                       "(expected each assignment once)"),
    "missing key": (_toml(_entry(chapter=None)),
                    "course.toml: assignment 1 ('02_layernorm'): missing key 'chapter' (expected "
                    + ", ".join(KEYS) + ")"),
    "not a string": (_toml(_entry(notebook=3)),
                     "course.toml: assignment 1 ('02_layernorm'): notebook must be a non-empty string, got 3"),
    "missing chapter": (_toml(_entry(chapter="04_layernorm")),
                        "course.toml: assignment 1 ('02_layernorm'): chapter '04_layernorm': expected the page "
                        "book/04_layernorm.md, which does not exist"),
    "missing checks": (_toml(_entry(checks="layer_norm")),
                       "course.toml: assignment 1 ('02_layernorm'): checks 'layer_norm': expected the module "
                       "andrea_ref/grading/layer_norm.py, which does not exist"),
    "bad name": (_toml(_entry(name="layernorm")),
                 "course.toml: assignment 1 ('layernorm'): name must be NN_topic (two digits, then lower-case "
                 "letters, digits or _), got 'layernorm'"),
    "out of order": (_toml(GELU, _entry()),
                     "course.toml: assignments must be listed in the order of their names (NN_...), got "
                     "03_gelu, 02_layernorm"),
    "unknown top-level key": (_toml(_entry(), extra='title = "x"\n'),
                              "course.toml: unknown key 'title' (expected only [[assignment]] tables)"),
    "no assignments": ("", "course.toml: expected at least one [[assignment]] table"),
    "not TOML": ("[[assignment]\n", "course.toml: not valid TOML (Expected ']]' at the end of an array "
                                    "declaration (at line 1, column 13))"),
}


def _course(tmp_path: Path, text: str, folders=("02_layernorm", "03_gelu")) -> Path:
    for name in folders:
        shutil.copytree(ROOT / "solutions" / name, tmp_path / "solutions" / name)
    (tmp_path / "book").mkdir()
    for chapter in ("04_layernorm_and_placement", "05_mlp_and_gelu"):
        shutil.copy(ROOT / "book" / f"{chapter}.md", tmp_path / "book")
    (tmp_path / FILE).write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.fast
@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_manifest_is_refused_in_one_line_naming_the_entry(case, tmp_path):
    text, line = BAD[case]
    root = _course(tmp_path, text)
    with pytest.raises(ManifestError) as err:
        load(root)
    assert str(err.value) == line and "\n" not in line


@pytest.mark.fast
def test_a_folder_the_manifest_does_not_name_is_refused(tmp_path):
    root = _course(tmp_path, _toml(_entry()))
    with pytest.raises(ManifestError) as err:
        load(root)
    assert str(err.value) == ("course.toml: solutions/03_gelu/ holds a notebook but no [[assignment]] names it "
                              "(expected an entry with name = '03_gelu', or no such folder)")
    assert load(_course(tmp_path / "ok", _toml(_entry(), GELU))).names == ["02_layernorm", "03_gelu"]


@pytest.mark.fast
def test_the_commands_refuse_a_bad_manifest_in_one_line_before_any_work(tmp_path):
    text, line = BAD["duplicate name"]
    root = _course(tmp_path, text)
    shutil.copy(ROOT / "nbgrader_config.py", root)
    (root / "scripts").mkdir()
    for script in ("release.py", "release_state.py"):
        shutil.copy(ROOT / "scripts" / script, root / "scripts")
    runs = {"reader": [sys.executable, "-m", "andrea_ref.grading.manifest", "--root", str(root)],
            "release": [sys.executable, str(root / "scripts" / "release.py")]}
    for what, cmd in runs.items():
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stderr == line + "\n" and proc.stdout == "", (what, proc)
    assert not (root / "exercises").exists() and not (root / "gradebook.db").exists()
    proc = subprocess.run(runs["reader"][:-2], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and [r.split("\t")[0] for r in proc.stdout.splitlines()] == COURSE.names


# ----------------------------------------------------------------------------- one more assignment
# What a copy of the course needs to release, grade and build a kit: the course, its packages
# and the commands (the book's pages the manifest names; a stand-in for the built book).
COPIED = ("course.toml", "nbgrader_config.py", "pyproject.toml", "setup.py", "MANIFEST.in", "solutions",
          "exercises", "andrea_ref", "andrea_lab", "classroom", "scripts", "lab", "cuda", "book/locales")
NEW, NOTEBOOK = f"{len(COURSE) + 1:02d}_gelu_again", "gelu_again"


def _copy_of_the_course(dest: Path) -> Path:
    dest.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints", "*.egg-info", "build")
    for part in COPIED:
        src, target = ROOT / part, dest / part
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree(src, target, ignore=ignore) if src.is_dir() else shutil.copy(src, target))
    for page in (ROOT / "book").glob("*.md"):
        shutil.copy(page, dest / "book" / page.name)
    return dest


def _add_an_assignment(course: Path) -> None:
    """The steps CONTRIBUTING.md names: a solution notebook (a copy of 03_gelu, one cell's
    points changed), its checks (gelu's), a manifest entry and its catalogs."""
    solution = course / "solutions" / NEW / f"{NOTEBOOK}.ipynb"
    solution.parent.mkdir()
    nb = json.loads((course / "solutions" / "03_gelu" / "gelu.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("grade_id") == "gelu_values":
            meta["points"] = 5
    solution.write_text(json.dumps(nb, indent=1), encoding="utf-8")
    with open(course / FILE, "a", encoding="utf-8") as f:
        f.write(f'\n[[assignment]]\nname = "{NEW}"\nnotebook = "{NOTEBOOK}"\nchapter = "05_mlp_and_gelu"\n'
                'checks = "gelu"\n')
    for language in ("de", "ka"):
        catalogs = course / "book" / "locales" / language / "LC_MESSAGES" / "notebooks"
        text = (catalogs / "03_gelu.po").read_text(encoding="utf-8")
        (catalogs / f"{NEW}.po").write_text(text.replace("| 6 |", "| 5 |"), encoding="utf-8")


# the copy's grading run: a uid range of its own, inside this test run's (conftest.py)
COPY_UID_BASE = str(uids.UID_BASE + 1200)


def _run(course: Path, *cmd: str, timeout=900) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(course), ANDREA_UID_BASE=COPY_UID_BASE)
    env.pop("NBGRADER_DB_URL", None)
    proc = subprocess.run([sys.executable, *cmd], cwd=course, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd}: {proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.mark.slow
def test_one_more_assignment_is_added_through_the_manifest_alone(tmp_path):
    import grading_submissions as S

    course = _copy_of_the_course(tmp_path / "course")
    _add_an_assignment(course)
    new = load(course)[NEW]
    assert load(course).names == [*COURSE.names, NEW] and new.points()["gelu_values"] == 5

    # released: the table and the cell show nbgrader's 5 points, in every language
    proc = _run(course, "scripts/release.py")
    assert f"Wrote nbgrader's points into the table and graded cells of solutions/{new.path}" in proc.stdout
    assert f"({new.path})" in proc.stdout, proc.stdout  # the one new notebook, nothing else
    released = json.loads(new.exercise.read_text(encoding="utf-8"))
    assert points_table.disagreements(released["cells"], new.path) == []
    assert "| the tanh formula over [-6, 6], within rtol = atol = 1e-5 | 5 |" in new.exercise.read_text()
    assert "# [locked] Graded check, 5 points" in new.exercise.read_text()
    _run(course, "scripts/release.py", "--check")

    # graded by the real grader: the right answer earns 9 of 9, the erf GELU loses the 5
    solution = json.loads(new.solution.read_text(encoding="utf-8"))
    subs = tmp_path / "subs"
    right = next(c for c in S.CASES if c.student == "gelu_solution")
    wrong = next(c for c in S.CASES if c.student == "gelu_erf")
    for student, case in (("alice", right), ("bob", wrong)):
        path = subs / student / NEW / new.filename
        path.parent.mkdir(parents=True)
        path.write_text(S.make_submission(case, released, solution), encoding="utf-8")
    out = tmp_path / "grading"
    proc = _run(course, "-m", "classroom.grade", str(subs), "--out", str(out), "--workers", "1",
                "--db", f"sqlite:///{tmp_path / 'gradebook.db'}", "--no-progress", "--uid-base", COPY_UID_BASE)
    with open(out / "report.csv", newline="") as f:
        rows = {(r["student"], r["assignment"]): r for r in csv.DictReader(f)}
    alice, bob = rows["alice", NEW], rows["bob", NEW]
    assert (float(alice["score"]), float(alice["max_score"]), alice["status"]) == (9.0, 9.0, "graded"), rows
    # (report.csv names a property column notebook:grade_id where two notebooks share the id)
    values, shape = (bob[f"{NOTEBOOK}:{g}"] for g in ("gelu_values", "gelu_shape"))
    assert (float(bob["score"]), float(values), float(shape)) == (4.0, 0.0, 2.0), rows

    # in the learner kit, in every language, listed in its README
    html = tmp_path / "html"
    html.mkdir()
    (html / "index.html").write_text("<!doctype html><title>book</title>", encoding="utf-8")
    _run(course, "scripts/learner_kit.py", "--out", str(tmp_path / "kit"), "--html", str(html))
    for folder in ("notebooks", "notebooks-de", "notebooks-ka"):
        assert (tmp_path / "kit" / folder / new.path).is_file(), folder
    kit_de = json.loads((tmp_path / "kit" / "notebooks-de" / new.path).read_text(encoding="utf-8"))
    assert "| 5 |" in "".join("".join(c["source"]) for c in kit_de["cells"] if c["cell_type"] == "markdown")
    readme = (tmp_path / "kit" / "README.md").read_text(encoding="utf-8")
    assert f"`{load()[-1].name}`, `{NEW}`" in readme and f"The course's {len(COURSE) + 1} graded notebooks" in readme
