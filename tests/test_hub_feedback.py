"""The feedback a learner fetches on the course's JupyterHub links the book the hub serves.

nbgrader's exchange releases each feedback page alone (``<notebook>.html``; nothing the
grader ships beside it reaches the learner). So ``scripts/hub.py return`` grades with
``ANDREA_BOOK_URL=/hub/user-redirect/andrea-book/`` (the default of ``c.CourseBook.url``
in nbgrader_config.py), unless the variable is set already, and the pages link each
chapter to the book every user's server serves, in the page's edition; a published
http(s) address written in nbgrader_config.py wins; with the variable set empty the pages
ship chapter copies, which ``return`` puts beside each page and says stay behind.

Here the feedback folder is made the grader's way: a notebook with chapter links in
English, German and Georgian, rendered by nbconvert, made a page by the grader's page
builder (``feedback.build_page``, with the run's chapter cache, as ``write_feedback``
calls it) with the course configuration read from nbgrader_config.py as the grader reads
it, in the environment the hub gives the grading command, against a small built book.
nbgrader (collect, release_feedback) and the grading command are stand-ins: the unit
under test is what ``return_feedback`` runs the grader with and hands nbgrader to release.
No JupyterHub is started (tests/test_class_hub.py runs the class end to end;
tests/test_hub_feedback_browser.py follows a page's chapter links in a browser).
"""
from __future__ import annotations

import os
import re
import types
from pathlib import Path

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from traitlets.config import Config

from andrea_lab import CHAPTER_LINK, LINK_PREFIX, chapter_link
from classroom.course.snapshot import load_course_config
from classroom.reporting import chapters, feedback
from scripts import hub

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENT = "02_layernorm"
CHAPTER = "04_layernorm_and_placement"
STUDENTS = ("ada", "ben")
EDITIONS = {"en": "LayerNorm and its placement", "de": "LayerNorm und ihre Platzierung",
            "ka": "LayerNorm და მისი მდებარეობა"}
HUB_LINKS = [f"{LINK_PREFIX}book/{CHAPTER}.html#eps", f"{LINK_PREFIX}de/book/{CHAPTER}.html",
             f"{LINK_PREFIX}ka/book/{CHAPTER}.html"]
COPIES = [f"book/{CHAPTER}.html", f"book/de/{CHAPTER}.html", f"book/ka/{CHAPTER}.html"]
PUBLISHED = "https://courses.example.org/andrea-block-lab/"
# a built chapter as Sphinx writes it: navigation around the article, a figure beside it
BUILT_PAGE = """<!DOCTYPE html><html lang="{lang}"><head><title>{title}</title></head><body>
<nav>the book's navigation</nav><article class="bd-article"><h1>{title}</h1>
<p id="eps">Where eps goes.</p><img src="../_images/figure.svg" alt="a figure"></article></body></html>"""
FIGURE = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>'


@pytest.fixture()
def built_book(tmp_path, monkeypatch):
    """A small built book (its three editions) where the grader looks for one."""
    html = tmp_path / "book-html"
    for edition, title in EDITIONS.items():
        base = html if edition == "en" else html / edition
        (base / "book").mkdir(parents=True)
        (base / "_images").mkdir()
        (base / "book" / f"{CHAPTER}.html").write_text(BUILT_PAGE.format(lang=edition, title=title))
        (base / "_images" / "figure.svg").write_text(FIGURE)
    monkeypatch.setattr(chapters, "BUILT_BOOK", html)
    return html


def rendered_notebook() -> str:
    """A notebook with chapter links as the course's notebooks write them, rendered by nbconvert."""
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(
        f"Read [where eps goes]({chapter_link('book/' + CHAPTER, 'en', '#eps')}), "
        f"or [the German edition]({chapter_link('book/' + CHAPTER, 'de')}), "
        f"or [the Georgian edition]({chapter_link('book/' + CHAPTER, 'ka')})."))
    return HTMLExporter().from_notebook_node(nb)[0]


def _config_as_graded(course: Path, env: dict, monkeypatch):
    """The course's nbgrader configuration as the grading command reads it: from
    ``course/nbgrader_config.py``, in the environment ``env`` it was started with."""
    with monkeypatch.context() as m:
        m.delenv("ANDREA_BOOK_URL", raising=False)
        if "ANDREA_BOOK_URL" in env:
            m.setenv("ANDREA_BOOK_URL", env["ANDREA_BOOK_URL"])
        return load_course_config(course)


@pytest.fixture()
def hub_course(tmp_path, monkeypatch, built_book):
    """An instructor's course folder with two collected submissions, and stand-ins for
    nbgrader and the grading command that record what they were asked to do. ``course``:
    the folder whose nbgrader_config.py the grading command reads (the checkout's)."""
    home = tmp_path / "home"
    cdir = home / hub.COURSE_DIR
    for s in STUDENTS:
        sub = cdir / "submitted" / s / ASSIGNMENT
        sub.mkdir(parents=True)
        (sub / "layernorm.ipynb").write_text("{}")
        (sub / "timestamp.txt").write_text("2026-12-06 10:00:00.000000 UTC")
        (sub / "submission_secret.txt").write_text(f"secret-{s}")
    user = types.SimpleNamespace(pw_dir=str(home), pw_uid=os.getuid(), pw_gid=os.getgid())
    monkeypatch.setattr(hub, "pwd", types.SimpleNamespace(getpwnam=lambda name: user))
    monkeypatch.setenv("ANDREA_HUB_STATE", str(tmp_path / "state"))
    monkeypatch.delenv("ANDREA_BOOK_URL", raising=False)
    state = {"cdir": cdir, "calls": [], "course": ROOT, "built": {}}
    page = rendered_notebook()

    def nbgrader(user_name, *args, cwd):
        state["calls"].append(("nbgrader", *args))
        return ""

    def grading_command(cmd, **kwargs):
        """The grader's output for each learner: the page (and the chapters it ships, made
        with the run's chapter cache, hard links into OUT/chapters), as write_feedback does."""
        env = kwargs.get("env")
        assert env is not None and env.get("PATH") == os.environ.get("PATH"), "the grader needs the hub's environment"
        state["calls"].append(("grade", env.get("ANDREA_BOOK_URL")))
        config = _config_as_graded(state["course"], env, monkeypatch)
        out = Path(cmd[cmd.index("--out") + 1])
        for s in STUDENTS:
            dest = out / "feedback" / s / ASSIGNMENT / "layernorm.html"
            state["built"][s] = feedback.build_page(page, dest, config, cache=out / "chapters")
        state["preflight"] = feedback.preflight(config)
        (cdir / "gradebook.db").touch()
        return types.SimpleNamespace(returncode=0, stdout="", stderr="")

    monkeypatch.setattr(hub, "_nbgrader", nbgrader)
    monkeypatch.setattr(hub, "subprocess", types.SimpleNamespace(run=grading_command))
    return state


def _links(page: Path) -> list[str]:
    return re.findall(r'\b(?:href|src)="([^"]+)"', page.read_text(encoding="utf-8"))


def _returned(cdir: Path, student: str) -> list[str]:
    returned = cdir / "feedback" / student / ASSIGNMENT
    return sorted(p.relative_to(returned).as_posix() for p in returned.rglob("*") if p.is_file())


# ----------------------------------------------------------------------------- book_url
@pytest.mark.parametrize("value, expected", [
    ("https://courses.example.org/andrea-block-lab", PUBLISHED),
    ("http://127.0.0.1:8000/book/", "http://127.0.0.1:8000/book/"),
    (" /hub/user-redirect/andrea-book/ ", "/hub/user-redirect/andrea-book/"),
    ("/hub/user-redirect/andrea-book", "/hub/user-redirect/andrea-book/"),
    ("/user/ada/andrea-book/", "/user/ada/andrea-book/"),
    ("/course-book", "/course-book/"),
])
def test_book_url_takes_a_published_or_a_site_relative_address(value, expected):
    cfg = Config()
    cfg.CourseBook.url = value
    assert chapters.book_url(cfg) == expected


@pytest.mark.parametrize("value", [
    "", "   ", "file:///srv/book", "javascript:alert(1)", "data:text/html,x", "ftp://example.org/book/",
    "//evil.example/book/",                      # another host, without a scheme
    "/srv/book", "/srv/andrea-book/", "/home/alice/andrea-block-lab/_build/html", "/tmp/book", "/usr/share/doc",
    str(ROOT / "_build" / "html"),               # a folder of this machine
    "/book/../../etc/", "/book/./x/", "/book/%2e%2e/x/", "/book/%2E%2E/x/", "/.hidden/",
    "/book//x/", "/a b/", '/a"onmouseover="x/', "/a<b>/", "/a\\b/", "/a?x=1", "/a#x",
    "hub/user-redirect/andrea-book/", "../_build/html/", "book/", "C:/book/",
])
def test_book_url_refuses_anything_else(value):
    cfg = Config()
    cfg.CourseBook.url = value
    assert chapters.book_url(cfg) == "", value


def test_preflight_says_once_where_site_relative_links_work(monkeypatch):
    monkeypatch.setenv("ANDREA_BOOK_URL", LINK_PREFIX)
    cfg = Config()
    cfg.CourseBook.url = LINK_PREFIX
    lines = [ln for ln in feedback.preflight(cfg) if "CourseBook" in ln]
    assert len(lines) == 1, lines
    (line,) = lines
    assert line.startswith("note: ") and LINK_PREFIX in line and "$ANDREA_BOOK_URL" in line, line
    assert "JupyterHub" in line and "opened from that server" in line and "lead nowhere" in line, line
    # another path, written in nbgrader_config.py: the same note, without the hub's words
    monkeypatch.delenv("ANDREA_BOOK_URL")
    cfg.CourseBook.url = "/course-book"
    (line,) = [ln for ln in feedback.preflight(cfg) if "CourseBook" in ln]
    assert "'/course-book/'" in line and "ANDREA_BOOK_URL" not in line and "JupyterHub" not in line, line
    # a published book, and the refusals, as before
    cfg.CourseBook.url = PUBLISHED
    assert not [ln for ln in feedback.preflight(cfg) if "CourseBook" in ln]
    cfg.CourseBook.url = "/srv/andrea-book"
    warning = [ln for ln in feedback.preflight(cfg) if ln.startswith("warning")]
    assert len(warning) == 1 and "'/srv/andrea-book'" in warning[0] and "ignored" in warning[0], warning


# ----------------------------------------------------------------------------- a page
def test_a_page_built_with_the_hubs_address_links_the_served_book(tmp_path, built_book):
    """Each edition's chapter link names the page the hub serves (andrea_lab: the built
    book under /hub/user-redirect/andrea-book/), survives every pass of the sanitiser, and
    nothing is shipped."""
    cfg = Config()
    cfg.CourseBook.url = LINK_PREFIX
    dest = tmp_path / "feedback" / "layernorm.html"
    done = feedback.build_page(rendered_notebook(), dest, cfg, cache=tmp_path / "chapters")
    assert done["shipped"] == [] and not done["notes"], done
    assert sorted(p.name for p in dest.parent.iterdir()) == ["layernorm.html"]
    assert not (tmp_path / "chapters").exists()
    links = _links(dest)
    assert [h for h in links if "andrea-book" in h] == HUB_LINKS, links
    for href in HUB_LINKS:
        m = CHAPTER_LINK.fullmatch(href)  # the notebooks' own form: the hub serves it
        assert m, href
        served = built_book / (m.group("lang") or "") / f"{m.group('page')}.html"
        assert served.is_file(), (href, served)
    text = dest.read_text(encoding="utf-8")
    assert "script-src 'none'" in text and "<script" not in text.lower()
    assert 'href="book/' not in text and "file://" not in text and str(built_book) not in text


def test_another_site_relative_address_survives_the_sanitiser(tmp_path, built_book):
    """A path that is not the notebooks' own link form is kept too (the sanitiser keeps only
    what the page links on purpose), while a learner's own link to the server is left out."""
    cfg = Config()
    cfg.CourseBook.url = "/course-book"
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(
        f"[chapter]({chapter_link('book/' + CHAPTER, 'de', '#eps')}) [mine](/user/ben/files/secret.txt)"))
    dest = tmp_path / "p.html"
    feedback.build_page(HTMLExporter().from_notebook_node(nb)[0], dest, cfg)
    links = _links(dest)
    assert f"/course-book/de/book/{CHAPTER}.html#eps" in links, links
    assert not [h for h in links if "secret" in h], links


# ----------------------------------------------------------------------------- the hub's return
def test_the_hubs_grading_links_the_book_it_serves(hub_course, capsys):
    cdir, calls = hub_course["cdir"], hub_course["calls"]
    out = hub.return_feedback("teacher", ASSIGNMENT)
    assert calls == [("nbgrader", "collect", "--update", ASSIGNMENT), ("grade", LINK_PREFIX),
                     ("nbgrader", "release_feedback", ASSIGNMENT)]
    assert any(LINK_PREFIX in ln and ln.startswith("note: ") for ln in hub_course["preflight"]), hub_course["preflight"]
    for s in STUDENTS:
        assert hub_course["built"][s]["shipped"] == [], hub_course["built"][s]
        # what nbgrader's exchange releases is the page: nothing it needs stays behind
        assert _returned(cdir, s) == ["layernorm.html", "submission_secret.txt", "timestamp.txt"]
        returned = cdir / "feedback" / s / ASSIGNMENT / "layernorm.html"
        assert returned.read_bytes() == (out / "feedback" / s / ASSIGNMENT / "layernorm.html").read_bytes()
        assert [h for h in _links(returned) if "andrea-book" in h] == HUB_LINKS
    printed = capsys.readouterr().out
    assert "warning" not in printed and "note" not in printed, printed


def test_an_address_already_set_is_kept(hub_course, monkeypatch, capsys):
    monkeypatch.setenv("ANDREA_BOOK_URL", PUBLISHED)
    hub.return_feedback("teacher", ASSIGNMENT)
    assert ("grade", PUBLISHED) in hub_course["calls"]
    page = hub_course["cdir"] / "feedback" / "ada" / ASSIGNMENT / "layernorm.html"
    assert f"{PUBLISHED}ka/book/{CHAPTER}.html" in _links(page)
    assert "note" not in capsys.readouterr().out


def test_a_published_address_in_nbgrader_config_wins(hub_course, tmp_path):
    """An instructor who writes the published book's address in nbgrader_config.py (as its
    comment says) gets it on the hub too, although the hub sets ANDREA_BOOK_URL."""
    source = (ROOT / "nbgrader_config.py").read_text()
    line = 'c.CourseBook.url = os.environ.get("ANDREA_BOOK_URL", "")'
    assert source.count(line) == 1, "nbgrader_config.py: c.CourseBook.url defaults to $ANDREA_BOOK_URL"
    course = tmp_path / "course"
    course.mkdir()
    (course / "nbgrader_config.py").write_text(source.replace(line, f'c.CourseBook.url = "{PUBLISHED}"'))
    hub_course["course"] = course
    hub.return_feedback("teacher", ASSIGNMENT)
    assert ("grade", LINK_PREFIX) in hub_course["calls"]
    page = hub_course["cdir"] / "feedback" / "ben" / ASSIGNMENT / "layernorm.html"
    assert [h for h in _links(page) if "book/" in h] == [f"{PUBLISHED}book/{CHAPTER}.html#eps",
                                                          f"{PUBLISHED}de/book/{CHAPTER}.html",
                                                          f"{PUBLISHED}ka/book/{CHAPTER}.html"]


def test_with_the_address_set_empty_the_copies_are_returned_and_said_to_stay_behind(hub_course, monkeypatch,
                                                                                    capsys):
    """ANDREA_BOOK_URL set empty: the grader ships chapter copies; each page goes into the
    course's feedback folder with everything it references, laid out as the grader wrote it,
    and the instructor is told that nbgrader's exchange releases the page without them."""
    monkeypatch.setenv("ANDREA_BOOK_URL", "")
    cdir, calls = hub_course["cdir"], hub_course["calls"]
    real_run = hub.subprocess.run

    def grading_command(cmd, **kwargs):
        done = real_run(cmd, **kwargs)
        out = Path(cmd[cmd.index("--out") + 1])
        # left by an earlier run: no page links it any more
        (out / "feedback" / "ada" / ASSIGNMENT / "book" / "05_old_chapter.html").write_text("old")
        return done

    monkeypatch.setattr(hub.subprocess, "run", grading_command)
    out = hub.return_feedback("teacher", ASSIGNMENT)
    assert ("grade", "") in calls
    for s in STUDENTS:
        assert hub_course["built"][s]["shipped"] == sorted(COPIES), hub_course["built"][s]
        graded = out / "feedback" / s / ASSIGNMENT
        returned = cdir / "feedback" / s / ASSIGNMENT
        assert _returned(cdir, s) == sorted([*COPIES, "layernorm.html", "submission_secret.txt", "timestamp.txt"])
        for rel in ("layernorm.html", *COPIES):
            assert (returned / rel).read_bytes() == (graded / rel).read_bytes(), rel
            assert not os.path.samefile(returned / rel, graded / rel)  # a copy, not the run's hard link
        assert (returned / "submission_secret.txt").read_text() == f"secret-{s}"
        # no dead link: every relative link of the page, and of what it ships, leads to a file
        linked = [h for h in _links(returned / "layernorm.html") if not re.match(r"^(?:[a-z]+:|#)", h)]
        assert sorted({h.split("#")[0] for h in linked}) == sorted(COPIES)
        for html in returned.rglob("*.html"):
            for href in _links(html):
                if not re.match(r"^(?:[a-z]+:|#)", href):
                    assert (html.parent / href.split("#")[0]).is_file(), (html, href)
    printed = capsys.readouterr().out
    assert "warning" not in printed, printed
    assert "releases each feedback page alone" in printed and "ANDREA_BOOK_URL" in printed, printed


def test_a_reference_out_of_the_folder_is_never_followed(tmp_path):
    pages = tmp_path / "feedback" / "ada" / ASSIGNMENT
    (pages / "book").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("not for the learner")
    (pages / "book" / "ok.html").write_text("<p>a chapter</p>")
    (pages / "book" / "link.html").symlink_to(tmp_path / "secret.txt")
    (pages / "gelu.html").write_text(
        '<a href="book/ok.html#top">ok</a> <a href="../../../secret.txt">up</a> <a href="/etc/hostname">root</a> '
        '<a href="book/link.html">link</a> <a href="book/gone.html">gone</a> <img src="data:image/png;base64,AA"> '
        f'<a href="https://example.org/x.html">web</a> <a href="#here">here</a> <a href="{HUB_LINKS[1]}">hub</a>')
    dest = tmp_path / "returned"
    copied, missing = hub.copy_feedback(pages, dest)
    assert copied == ["gelu.html", "book/ok.html"]
    assert missing == ["gelu.html: ../../../secret.txt", "gelu.html: book/link.html", "gelu.html: book/gone.html"]
    assert sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()) == \
        ["book/ok.html", "gelu.html"]


def test_the_grading_environment_keeps_the_rest():
    env = hub.grading_environment({"PATH": "/usr/bin", "NBGRADER_DB_URL": "sqlite:///x.db"})
    assert env == {"PATH": "/usr/bin", "NBGRADER_DB_URL": "sqlite:///x.db", "ANDREA_BOOK_URL": LINK_PREFIX}
    assert hub.grading_environment({"ANDREA_BOOK_URL": ""}) == {"ANDREA_BOOK_URL": ""}
    assert hub.HUB_BOOK_URL == "/hub/user-redirect/andrea-book/"
