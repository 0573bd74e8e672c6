"""The README and the book's guides say only what the repository has.

The README stays short (at most 120 lines: a reference manual belongs in the guides);
every ``make X`` it or a guide names, in code, is a target of the Makefile; every
relative link and every repository path they name exists (build outputs, which the
repository ignores, excepted); every guide page is in the book's table of contents,
in its Guides part, and every {doc} link of a guide names a page of the book. Each
check is also run on a broken text, so none can pass by accident. Fast, no network.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BOOK = ROOT / "book"
GUIDES = sorted(BOOK.glob("guide_*.md"))
MAX_README_LINES = 120

# What the build and the set-up write: named in the docs, absent from a fresh clone.
BUILD_OUTPUTS = ("_build", "_build_instructor", "_grading", ".venv", ".venv-ngshare", ".venv-hub",
                 ".venv-cuda", ".venv-torch-oldest", ".pytest_cache", "book/_vendor", "gradebook.db")
# Files the docs name by their full path even where the folder is not a top-level one.
CHECKED_SUFFIXES = (".py", ".md", ".yml", ".yaml", ".txt", ".json", ".toml", ".cfg", ".po")

_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_MAKE = re.compile(r"(?:^|[\s;&|(])make\s+([A-Za-z][\w-]*)")
_TARGET = re.compile(r"^([A-Za-z][\w-]*)\s*:(?!=)", re.M)


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    phony = re.search(r"^\.PHONY:(.*)$", text, re.M)
    return set(_TARGET.findall(text)) | set(phony.group(1).split() if phony else ())


def code_of(text: str) -> list[str]:
    """The fenced blocks and the inline code spans of a markdown text."""
    blocks = _FENCE.findall(text)
    return blocks + _SPAN.findall(_FENCE.sub("", text))


def make_problems(text: str, where: str) -> list[str]:
    targets = makefile_targets()
    named = {t for code in code_of(text) for t in _MAKE.findall(code)}
    return [f"{where}: `make {t}` is no target of the Makefile" for t in sorted(named - targets)]


def _is_build_output(path: str) -> bool:
    return any(path == out or path.startswith(out + "/") for out in BUILD_OUTPUTS)


def path_problems(text: str, where: str) -> list[str]:
    """Repository paths named in code (``scripts/hub.py``, ``deploy/k8s/``) that do not exist."""
    top = {p.name for p in ROOT.iterdir()}
    problems = []
    for code in code_of(text):
        for word in code.split():
            word = word.strip("\"'()[],;:.")
            if ("/" not in word or "://" in word or word.startswith(("/", "~", "-", "$"))
                    or any(c in word for c in "<>*{}=@")):
                continue
            word = word.rstrip("/")
            if not word or _is_build_output(word):
                continue
            if word.split("/")[0] in top or word.endswith(CHECKED_SUFFIXES):
                if not (ROOT / word).exists():
                    problems.append(f"{where}: names {word}, which does not exist")
    return problems


def link_problems(text: str, where: str, base: Path) -> list[str]:
    problems = []
    for target in _LINK.findall(text):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        path = target.split("#")[0]
        if path and not (base / path).exists():
            problems.append(f"{where}: links to {target}, which does not exist")
    return problems


def readme_problems(text: str) -> list[str]:
    problems = []
    n = len(text.splitlines())
    if n > MAX_README_LINES:
        problems.append(f"README.md has {n} lines (at most {MAX_README_LINES}: move the rest into a guide)")
    return (problems + make_problems(text, "README.md") + path_problems(text, "README.md")
            + link_problems(text, "README.md", ROOT))


def guide_problems(text: str, where: str) -> list[str]:
    docs = re.findall(r"\{doc\}`([^`]+)`", text)
    page = re.compile(r"(?:.*<)?([^<>]+)>?$")  # {doc}`page` or {doc}`title <page>`
    missing = [d for d in docs if not (BOOK / (page.match(d).group(1) + ".md")).is_file()]
    return (make_problems(text, where) + path_problems(text, where)
            + [f"{where}: {{doc}}`{d}` names no page of the book" for d in missing])


def toc_parts() -> dict[str, list[str]]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return {part["caption"]: [c["file"] for c in part["chapters"]] for part in toc["parts"]}


# ---------------------------------------------------------------------------- the real docs

def test_the_readme_is_short_and_names_only_what_exists():
    problems = readme_problems(README.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


def test_the_readme_points_to_every_guide():
    text = README.read_text(encoding="utf-8")
    assert GUIDES, "no guide pages (book/guide_*.md)"
    for guide in GUIDES:
        assert f"]({guide.relative_to(ROOT).as_posix()})" in text, f"README.md does not link {guide.name}"
    assert "make book" in text and "make test" in text and "sudo apt-get" in text


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.stem)
def test_a_guide_names_only_targets_paths_and_pages_that_exist(guide):
    problems = guide_problems(guide.read_text(encoding="utf-8"), guide.name)
    assert not problems, "\n".join(problems)


def test_every_guide_is_in_the_guides_part_of_the_toc():
    parts = toc_parts()
    assert "Guides" in parts, list(parts)
    listed = parts["Guides"]
    assert sorted(listed) == sorted(g.relative_to(ROOT).with_suffix("").as_posix() for g in GUIDES), listed
    captions = list(parts)
    # after the chapters, before the glossary and the references
    assert captions.index("Guides") > captions.index("Chapters")
    assert "book/glossary" in parts[captions[-1]] and captions[-1] != "Guides"


# ---------------------------------------------------------------------------- the checks fail

def test_the_checks_catch_a_broken_readme():
    good = README.read_text(encoding="utf-8")
    assert not readme_problems(good)
    assert any("lines" in p for p in readme_problems(good + "\nmore\n" * MAX_README_LINES))
    assert any("make lap" in p for p in readme_problems(good + "\n`make lap` opens the lab\n"))
    assert any("make publish" in p for p in readme_problems(good + "\n```bash\nsudo make publish\n```\n"))
    assert any("guide_lerner.md" in p for p in readme_problems(good + "\n[Learners](book/guide_lerner.md)\n"))
    assert any("scripts/hubb.py" in p for p in readme_problems(good + "\nrun `.venv/bin/python scripts/hubb.py`\n"))
    assert any("deploy/k8s/grading.yaml" in p
               for p in readme_problems(good + "\nsee `deploy/k8s/grading.yaml`.\n"))
    # prose that says "make" is no target, and build outputs need not exist in a fresh clone
    assert not readme_problems(good + "\nmake sure `_build/html/de/index.html` and `.venv-hub/bin/python` are there\n")


def test_the_checks_catch_a_broken_guide():
    assert not guide_problems("run `make grade SUBMISSIONS=x` and read `classroom/grade.py`", "x.md")
    assert guide_problems("run `make grades`", "x.md")
    assert guide_problems("see `classroom/grader.py`", "x.md")
    assert guide_problems("see {doc}`guide_lerner`", "x.md")
    assert not guide_problems("see {doc}`the learner guide <guide_learner>`", "x.md")


def test_the_threat_models_counts_are_the_test_suites():
    """The numbers the threat model quotes are those of the tests that measure them."""
    import importlib.util

    from honest import HABITS
    from hostile.shortcuts import CLASSES

    spec = importlib.util.spec_from_file_location("source_tests", ROOT / "tests" / "test_classroom_source.py")
    source_tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(source_tests)
    text = " ".join((ROOT / "book" / "guide_threat_model.md").read_text(encoding="utf-8").split())
    quoted = {k: int(re.search(pattern, text).group(1)) for k, pattern in (
        ("forged", r"(\d+) forged answers in (\w+) classes"), ("habits", r"(\d+) honest but unusual habits"),
        ("honest uses", r"(\d+) honest uses find nothing"), ("held uses", r"(\d+) uses that stay held"))}
    assert quoted == {"forged": sum(len(v) for v in CLASSES.values()), "habits": len(HABITS),
                      "honest uses": len(source_tests.HONEST), "held uses": len(source_tests.HELD)}
    assert re.search(r"forged answers in (\w+) classes", text).group(1) == {10: "ten"}.get(len(CLASSES))
