"""The book's chapters that a feedback page links to.

Links to the book's chapters go to the book at ``c.CourseBook.url`` (nbgrader_config.py)
when it is set (:func:`book_url`): a published book's http(s) address, or a site-relative
path such as ``/hub/user-redirect/andrea-book/``, the book the course's JupyterHub serves
to every user (``scripts/hub.py`` grades with it); otherwise to a copy of the chapter
shipped beside the page (``book/<chapter>.html``, ``book/<edition>/<chapter>.html`` for
the German and Georgian editions), as self-contained as the page (:func:`chapter_copy`,
:func:`ship_chapter`), or, where the book was never built, nowhere (the page says so).
"""
from __future__ import annotations

import fcntl
import hashlib
import html
import os
import re
import shutil
from pathlib import Path

from andrea_ref.i18n import LANGUAGES, N_, gettext

from . import mathsvg, outputs, page, sanitiser
from .outputs import data_uri
from .page import clean_css, compose, split_page, typeset_body
from .sanitiser import SCHEME, Links

ROOT = Path(__file__).resolve().parents[2]
BUILT_BOOK = ROOT / "_build" / "html"
BOOK_CSS = ROOT / "book" / "_static" / "andrea.css"
FONT_DIRS = (BUILT_BOOK / "_static", ROOT / "book" / "_vendor" / "html" / "_static")
SHIPPED = "book"  # the folder beside a page with the chapters it links to
# the code that makes a chapter's copy: a copy cached by other code is made again
COPY_CODE = b"".join(Path(m.__file__).read_bytes() for m in (outputs, sanitiser, page, mathsvg)) \
    + Path(__file__).read_bytes()
# the class names Sphinx's MathJax setup gives math in a chapter (its sections are ignored)
CHAPTER_MATH = {"processHtmlClass": "tex2jax_process|mathjax_process|math|output_area"}

CHAPTER_COPY_NOTE = N_("A copy of this chapter, shipped with your feedback. The whole book is with your course.")

CHAPTER_CSS = """
/* classroom.feedback: a chapter shipped with a feedback page, without the book's navigation */
.bd-main { max-width: 60rem; margin: 0 auto; padding: 1rem 1.5rem; }
.bd-article-container { max-width: 100%; }
a.headerlink { display: none; }
a:not([href]) { color: inherit; text-decoration: none; }
"""


# A site-relative book address: a path on the web server a page is opened from (the course's
# JupyterHub serves the book to every user at /hub/user-redirect/andrea-book/). URL path
# characters only; no empty segment, none that starts with "." (no "." or "..", encoded or
# not); not a folder of a Unix file system (a
# page must never point at one machine's disk: "/srv/andrea-book" is the hub's copy on disk,
# not an address).
_SITE_PATH = re.compile(r"^/(?:[A-Za-z0-9_~%@+:,;=!$*()-][A-Za-z0-9._~%@+:,;=!$*()-]*/?)*$")
FILE_SYSTEM_TOPS = {"bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "media", "mnt",
                    "nix", "opt", "private", "proc", "root", "run", "sbin", "snap", "srv", "sys", "tmp",
                    "Users", "usr", "var", "Volumes"}


def site_relative(url: str) -> bool:
    """Whether ``url`` is a usable site-relative address (``/hub/user-redirect/andrea-book/``):
    a path from the root of the server a page is opened from, never a path of the grading
    machine's file system (one under a standard top folder, or one that exists here)."""
    if not _SITE_PATH.match(url) or re.search(r"%2e", url, re.I):  # a browser reads %2e%2e as ".."
        return False
    top = url.split("/")[1]
    try:
        on_disk = os.path.exists(url)
    except (OSError, ValueError):
        on_disk = True
    return top not in FILE_SYSTEM_TOPS and not (url != "/" and on_disk)


def book_url(config=None) -> str:
    """The book's address from ``c.CourseBook.url``, ending in ``/``: a published book's
    http(s) address, or a site-relative path (:func:`site_relative`: the book served by the
    server a page is opened from, such as the course's JupyterHub). Empty when unset or
    anything else (a file path, another scheme: a page must never point at one machine's
    disk)."""
    url = ""
    if config is not None and "CourseBook" in config:
        url = str(config.CourseBook.get("url", "") or "").strip()
    if not (re.match(r"^https?://[^/\s]+", url) or site_relative(url)):
        return ""
    return url if url.endswith("/") else url + "/"


def georgian_css() -> str:
    """The book's Georgian web font (its @font-face rules), for pages in Georgian."""
    try:
        faces = re.findall(r"@font-face\s*\{[^}]*\}", BOOK_CSS.read_text(encoding="utf-8"))
    except OSError:
        return ""
    base = next((d for d in FONT_DIRS if (d / "fonts").is_dir()), None)
    css = clean_css("\n".join(faces), base)
    return css + '\nbody, .rendered_html, .bd-article { font-family: "Noto Sans Georgian", "Helvetica Neue", ' \
                 "Helvetica, Arial, sans-serif; }\n"


def chapter_source(edition: str, name: str) -> Path | None:
    """The built page of chapter ``name`` in ``edition``, if the book was built here."""
    if not re.fullmatch(r"[\w.-]+", name) or edition not in LANGUAGES:
        return None
    path = (BUILT_BOOK if edition == "en" else BUILT_BOOK / edition) / SHIPPED / f"{name}.html"
    return path if path.is_file() else None


_STYLESHEET = re.compile(r"<link\b(?=[^>]*\brel=\"stylesheet\")[^>]*\bhref=\"([^\"]+)\"[^>]*>", re.I)
_OBJECT_SVG = re.compile(r"<object\b[^>]*\bdata=\"([^\"]+)\"[^>]*\btype=\"image/svg\+xml\"[^>]*>.*?</object>", re.S | re.I)
_IMG_SRC = re.compile(r"(<img\b[^>]*?\bsrc=\")([^\"]+)(\")", re.I)
_MIME_BY_SUFFIX = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
                   ".svg": "image/svg+xml", ".webp": "image/webp"}


def _book_file(page: Path, ref: str) -> Path | None:
    """The file a built page refers to with ``ref``, if it lies inside the built book."""
    if SCHEME.match(ref) or ref.startswith(("/", "#")):
        return None
    path = (page.parent / ref.split("?")[0].split("#")[0]).resolve()
    root = BUILT_BOOK.resolve()
    return path if path.is_file() and root in path.parents else None


def _inline_image(page: Path, ref: str) -> str | None:
    path = _book_file(page, ref)
    mime = _MIME_BY_SUFFIX.get(path.suffix.lower()) if path else None
    return data_uri(mime, path.read_bytes()) if mime else None


def chapter_copy(source: Path) -> str:
    """A built chapter page as one self-contained file: its article (no navigation), the
    book's styles inline, its figures as data: images, its math typeset, no script."""
    text = source.read_text(encoding="utf-8")
    head, body = split_page(text)
    language = (re.search(r'<html[^>]*\blang="([\w-]+)"', text) or [None, "en"])[1]
    title = re.search(r"<title>(.*?)</title>", head, re.S)
    start = body.find('<article class="bd-article">')
    end = body.find("</article>", start)
    article = body[start:end + len("</article>")] if start >= 0 and end >= 0 else body
    article = _OBJECT_SVG.sub(lambda m: f'<img class="graphviz" alt="" src="{_inline_image(source, m.group(1)) or ""}">',
                              article)
    article = _IMG_SRC.sub(lambda m: m.group(1) + (m.group(2) if m.group(2).startswith("data:") else
                                                   _inline_image(source, m.group(2)) or "") + m.group(3), article)
    css = []
    for href in _STYLESHEET.findall(head):
        path = _book_file(source, href)
        if path is not None and path.suffix == ".css":
            css.append(clean_css(path.read_text(encoding="utf-8", errors="replace"), path.parent))
    notes: list[str] = []
    body = ('<div class="bd-container"><div class="bd-container__inner bd-page-width"><main class="bd-main">'
            '<div class="bd-content"><div class="bd-article-container">'
            f'<p class="andrea-chapter-copy"><em>{gettext(CHAPTER_COPY_NOTE, language if language in LANGUAGES else "en")}</em></p>'
            f"{article}</div></div></main></div></div>")
    body, math_css, _ = typeset_body(body, Links(), notes, options=CHAPTER_MATH)
    return compose(body, [*css, math_css, CHAPTER_CSS], html.unescape(re.sub(r"<[^>]+>", "", title.group(1)))
                   if title else source.stem, language, ' data-theme="light" data-mode="light"')


def ship_chapter(edition: str, name: str, dest: Path, cache: Path | None = None) -> bool:
    """Put the self-contained copy of a chapter at ``dest``; False if the book was not built
    here. The copy is made once per version of the built page (in ``cache``, when given)."""
    source = chapter_source(edition, name)
    if source is None:
        return False
    digest = hashlib.sha256(source.read_bytes() + COPY_CODE).hexdigest()[:16]
    dest.parent.mkdir(parents=True, exist_ok=True)
    if cache is None:
        dest.write_text(chapter_copy(source), encoding="utf-8")
        return True
    made = cache / edition / f"{name}-{digest}.html"
    made.parent.mkdir(parents=True, exist_ok=True)
    with open(made.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the workers of a run make each copy once
        if not made.is_file():
            tmp = made.with_name(made.name + ".tmp")
            tmp.write_text(chapter_copy(source), encoding="utf-8")
            os.replace(tmp, made)
    dest.unlink(missing_ok=True)
    try:
        os.link(made, dest)
    except OSError:
        shutil.copyfile(made, dest)
    return True
