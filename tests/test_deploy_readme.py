"""deploy/README.md says what the code does and how far each claim was taken.

- every cgroup interface file the README names (``memory.max``, ``cpu.weight`` ...) is one the
  grader's cgroup code reads or writes (classroom/isolation/cgroups.py, cgroup_group.py,
  cgroup_layout.py);
- its table "What was run here, what was emulated, what is only written": every row starts
  its "how far" with one of the words of :data:`HOW_FAR`, in bold; a row that says **run** for cgroup v2 needs a machine with
  cgroup v2 (this one has v1 only: the v2 code has run against a fake cgroup file system,
  which is **emulated**); a row resting on the ``test_v2_fake_*`` tests says **emulated**;
- every file its table names as where a claim is checked exists;
- the roster the README's ``add_students`` command takes has the columns ngshare's
  ``ngshare-course-management`` requires.
Each check also runs on a broken copy of the text, so none passes by accident. Fast.
"""
from __future__ import annotations

import re

import pytest

import deploy_files  # noqa: E402

from classroom.isolation import cgroups  # noqa: E402

ROOT = deploy_files.ROOT
README = deploy_files.DEPLOY / "README.md"
CGROUP_CODE = [ROOT / "classroom" / "isolation" / name
               for name in ("cgroups.py", "cgroup_group.py", "cgroup_layout.py")]
HOW_FAR = ("run", "emulated", "checked as written", "checked statically", "only written")
TABLE_HEADING = "## What was run here, what was emulated, what is only written"
_CGROUP_FILE = re.compile(r"`((?:memory|cpu|pids|cgroup)\.[a-z_.]+)`")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")

pytestmark = pytest.mark.fast


def _text() -> str:
    return README.read_text(encoding="utf-8")


def cgroup_file_problems(text: str) -> list[str]:
    code = "\n".join(p.read_text() for p in CGROUP_CODE)
    return [f"deploy/README.md names `{name}`, which the cgroup code never reads or writes"
            for name in sorted(set(_CGROUP_FILE.findall(text))) if f'"{name}"' not in code]


def table_rows(text: str) -> list[tuple[str, str, str]]:
    """(claim, how far, where) of every row of the README's table of what was run."""
    assert TABLE_HEADING in text, "the table of what was run is gone"
    section = text.split(TABLE_HEADING, 1)[1]
    rows = []
    for line in section.splitlines():
        if not line.startswith("|") or line.startswith("|---") or line.startswith("| claim"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cells) == 3, line
        rows.append(tuple(cells))
    return rows


def table_problems(text: str, machine_cgroup: str) -> list[str]:
    problems = []
    for claim, how, where in table_rows(text):
        bold = [b.strip().lower() for b in _BOLD.findall(how)]
        said = [b for b in bold if b in HOW_FAR]
        if not bold or bold[0] not in HOW_FAR:
            problems.append(f"{claim[:60]!r}: how far must start with one of {HOW_FAR} in bold, not {how[:80]!r}")
        if "run" in said and re.search(r"cgroup v2|\bv2\b", claim) and machine_cgroup != "v2":
            problems.append(f"{claim[:60]!r}: says **run** for cgroup v2, but this machine has {machine_cgroup}")
        if "test_v2_fake" in where and said != ["emulated"]:
            problems.append(f"{claim[:60]!r}: rests on the fake cgroup v2 file system, so it is **emulated**")
        for path in re.findall(r"`(tests/[^`:]+)", where):
            if not (ROOT / path).is_file():
                problems.append(f"{claim[:60]!r}: {path} does not exist")
    return problems


def roster_problems(text: str) -> list[str]:
    from ngshare_exchange import course_management
    import inspect
    required = re.search(r"required_cols = \[([^\]]+)\]", inspect.getsource(course_management))
    columns = [c.strip().strip("'\"") for c in required.group(1).split(",")]
    m = re.search(r"add_students \S+ (\S+)\s+# (.*)$", text, re.M)
    if not m:
        return ["deploy/README.md gives no add_students command with its roster's columns"]
    return [] if ",".join(columns) in m.group(2) else [f"the roster's columns are {','.join(columns)}: {m.group(2)!r}"]


def _machine() -> str:
    try:
        return cgroups.detect()
    except cgroups.CgroupUnavailable:
        return "no usable cgroup"


def test_every_cgroup_file_named_is_one_the_code_uses():
    assert cgroup_file_problems(_text()) == []
    assert cgroup_file_problems("caps from `cpu.max` and `memory.max`") == [
        "deploy/README.md names `cpu.max`, which the cgroup code never reads or writes"]


def test_the_table_says_truly_how_far_each_claim_went():
    text = _text()
    assert len(table_rows(text)) >= 15
    assert table_problems(text, _machine()) == []
    row = "| per-learner caps (cgroup v2 `memory.max`) | **run** on this machine | `tests/test_classroom_confine.py` |"
    broken = text.replace("|---|---|---|\n", "|---|---|---|\n" + row + "\n", 1)
    assert any("says **run** for cgroup v2" in p for p in table_problems(broken, "v1"))
    fake = "| v2 caps | **run** | `tests/test_classroom_confine.py` (`test_v2_fake_*`) |"
    broken = text.replace("|---|---|---|\n", "|---|---|---|\n" + fake + "\n", 1)
    assert any("rests on the fake" in p for p in table_problems(broken, "v2"))
    missing = text.replace("|---|---|---|\n", "|---|---|---|\n| x | **run** | `tests/test_nothing_here.py` |\n", 1)
    assert any("does not exist" in p for p in table_problems(missing, "v1"))


def test_the_roster_has_the_columns_ngshare_requires(monkeypatch):
    monkeypatch.setenv("USER", "instructor1")  # ngshare_exchange reads it when imported
    assert roster_problems(_text()) == []
    assert roster_problems("ngshare-course-management add_students c roster.csv   # id,first_name\n") != []
