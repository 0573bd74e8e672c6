"""The feedback pages of one graded submission.

:func:`write_feedback` renders the graded notebooks with nbgrader's feedback template --
each made safe to show first (:mod:`classroom.reporting.notebook`: no hidden test, the
independent verdicts in the graded cells, outputs reduced to what a page without script
shows) -- and :func:`build_page` makes each rendering a page that runs nothing a learner
wrote and reads the same wherever it is opened (:mod:`classroom.reporting.page`): one
sanitiser over the final body (:mod:`classroom.reporting.sanitiser`), math typeset as SVG
when the page is built, chapter links to the book at ``c.CourseBook.url`` (a published
book, or the book served by the server the page is read from, such as the course's
JupyterHub) or to a copy shipped beside the page (:mod:`classroom.reporting.chapters`).
A page that cannot be built is replaced by one that says so (:func:`unavailable_page`):
the points recorded before are never touched. :func:`preflight` says once per run what makes every page poorer.
"""
from __future__ import annotations

import html
import os
import re
from pathlib import Path

import jinja2
import nbformat
from nbconvert.exporters import HTMLExporter
from nbgrader.utils import temp_attrs

from andrea_lab import LINK_PREFIX
from andrea_ref.i18n import N_, current_language, gettext

from . import chapters, mathsvg
from .chapters import SHIPPED, book_url, georgian_css, ship_chapter
from .notebook import feedback_notebook
from .page import PAGE_CSS, clean_css, compose, split_page, typeset_body
from .sanitiser import Links, sanitise

NO_BOOK_NOTE = N_("The links to the book's chapters are left out: the book was not built where this page was "
                  "made, and no published address of the book is set.")


class _CompiledTemplates(jinja2.BytecodeCache):
    """The feedback template's Jinja code, compiled once per process: nbgrader makes a new
    exporter (and so a new Jinja environment) for every submission, and compiling the
    template's nine files costs more than rendering a page. Kept by template name and
    file; a file whose text changed is compiled again (Jinja compares its checksum)."""

    def __init__(self):
        self.code: dict[str, bytes] = {}

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        if bucket.key in self.code:
            bucket.bytecode_from_string(self.code[bucket.key])

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self.code[bucket.key] = bucket.bytecode_to_string()


_TEMPLATES = _CompiledTemplates()


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter, the one nbgrader's ``generate_feedback`` uses, with its
    templates compiled once per process (``c.GenerateFeedback.exporter_class``); it
    renders exactly what HTMLExporter renders."""

    def _create_environment(self):
        environment = super()._create_environment()
        environment.bytecode_cache = _TEMPLATES
        return environment


def preflight(config=None) -> list[str]:
    """One line for each thing that makes every feedback page of a run poorer, or that the
    instructor should know of every page (for the grader to print once, before grading)."""
    lines = []
    raw = str(config.CourseBook.get("url", "") or "").strip() if config is not None and "CourseBook" in config else ""
    url = book_url(config)
    source = " (from $ANDREA_BOOK_URL)" if raw and raw == os.environ.get("ANDREA_BOOK_URL", "").strip() else ""
    if raw and not url:
        lines.append(f"warning: c.CourseBook.url in nbgrader_config.py{source} is neither an http(s) address nor "
                     f"a path on the web server the pages are read from ({raw[:100]!r}): it is ignored")
    if not url:
        where = ("link to copies of the chapters shipped beside them" if (chapters.BUILT_BOOK / SHIPPED).is_dir()
                 else "cannot link the book's chapters (the book is not built here: make book)")
        lines.append("note: c.CourseBook.url is unset in nbgrader_config.py: feedback pages " + where +
                     "; set it to the published book's address to link there")
    elif url.startswith("/"):
        served = ("the book the course's JupyterHub serves every user" if url == LINK_PREFIX
                  else "the book served at that path")
        lines.append(f"note: c.CourseBook.url{source} is {url[:100]!r}, a path on the server a page is read from: "
                     f"feedback pages link the chapters to {served}, so their chapter links work where a page is "
                     "opened from that server (a page fetched on the hub, opened in the learner's JupyterLab), "
                     "and lead nowhere in a page opened from a file, mailed or uploaded elsewhere")
    why = mathsvg.unavailable()
    if why:
        lines.append(f"note: feedback pages show their formulas as TeX: {why}")
    return lines


def build_page(rendered: str, dest: Path, config=None, cache: Path | None = None) -> dict:
    """Write the feedback page ``dest`` from ``rendered`` (nbgrader's page, rendered by
    nbconvert) and the chapters it links to beside it. Returns what it did:
    ``{"math": formulas, "math_seconds": wall, "math_cpu_seconds": Node's CPU, "notes": [...],
    "shipped": [...]}``."""
    language = current_language()
    head, body = split_page(rendered)
    css = [clean_css(c) for c in re.findall(r"<style[^>]*>(.*?)</style>", head, re.S | re.I)]
    title = dest.stem
    notes: list[str] = []
    shipped: set[str] = set()
    linked: set[str] = set()  # the relative and site-relative chapter links this page may keep
    missing: list[str] = []
    url = book_url(config)

    def chapter(edition: str, name: str, fragment: str) -> str | None:
        if url:
            address = f"{url}{'' if edition == 'en' else edition + '/'}{SHIPPED}/{name}.html"
            if url.startswith("/"):  # a path on the server the page is read from: kept by the later passes
                linked.add(address)
            return address + fragment
        rel = f"{SHIPPED}/{name}.html" if edition == "en" else f"{SHIPPED}/{edition}/{name}.html"
        if rel in shipped or ship_chapter(edition, name, dest.parent / rel, cache):
            shipped.add(rel)
            linked.add(rel)
            return rel + fragment
        missing.append(name)
        return None

    links = Links(chapter=chapter, shipped=linked)
    body = sanitise(body, links)  # the chapter links are decided here, before the notes are
    if missing:
        notes.append(gettext(NO_BOOK_NOTE))
    body, math_css, stats = typeset_body(body, links, notes)
    if language == "ka":
        css.append(georgian_css())
    page = compose(body, [*css, math_css, PAGE_CSS], title, language)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, dest)
    return {"math": stats["math"], "math_seconds": round(stats["seconds"], 3),
            "math_cpu_seconds": round(stats["cpu_seconds"], 3), "notes": notes, "shipped": sorted(shipped)}


PAGE_FAILED = N_("Your feedback page for this notebook could not be built ({reason}).")
POINTS_KEPT = N_("Your points are recorded all the same: {score} of {max_score}.")
INSTRUCTOR_TOLD = N_("Your instructor has been told and can send you the page once it is fixed.")
CELL_HEADER, POINTS_HEADER = N_("Graded cell"), N_("Points")


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def unavailable_page(assignment: str, notebook: str, reason: str, record: dict) -> str:
    """The page a learner gets where their feedback page could not be built: what could
    not be shown, the points that were recorded, and the grader's messages."""
    e = html.escape
    scores = (record.get("notebooks") or {}).get(notebook) or {}
    total = sum(v for v in scores.values() if isinstance(v, (int, float)))
    most = (record.get("max_by_notebook") or {}).get(notebook)
    messages = ((record.get("checks") or {}).get(notebook) or {}).get("messages") or {}
    rows = "".join(f"<tr><td><code>{e(str(g))}</code></td><td>{e(str(s))}</td></tr>" for g, s in scores.items())
    body = (f"<h1>{e(assignment)}: {e(notebook)}</h1>"
            f"<p>{e(gettext(PAGE_FAILED).format(reason=reason))}</p>"
            + (f"<p>{e(gettext(POINTS_KEPT).format(score=round(total, 2), max_score=most if most is not None else '?'))}</p>"
               if scores else "")
            + (f"<table><thead><tr><th>{e(gettext(CELL_HEADER))}</th><th>{e(gettext(POINTS_HEADER))}</th></tr></thead>"
               f"<tbody>{rows}</tbody></table>" if rows else "")
            + "".join(f"<h2><code>{e(str(g))}</code></h2><pre>{e(str(m))}</pre>" for g, m in messages.items())
            + f"<p>{e(gettext(INSTRUCTOR_TOLD))}</p>")
    css = ("body { font-family: 'Noto Sans Georgian', 'Helvetica Neue', Helvetica, Arial, sans-serif; "
           "max-width: 50rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; }\n"
           "table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: 0.3em 0.7em; }\n"
           "pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f6f6; padding: 0.5em; }\n")
    language = current_language()
    return compose(sanitise(body), [css, georgian_css() if language == "ka" else ""], f"{assignment}: {notebook}",
                   language)


def write_feedback(api, wdir: Path, out: Path, student: str, assignment: str, notebooks: dict, verdicts: dict,
                   record: dict, prepare=lambda nb: nb) -> dict:
    """The feedback pages of one graded submission, in ``out/feedback/<student>/<assignment>/``.

    ``notebooks``: {name: the graded notebook}; ``verdicts``: {name: {grade_id: outputs of
    the independent check}}; ``prepare``: what to do to a notebook first (its language).
    A notebook whose page cannot be made, at any step, gets :func:`unavailable_page`
    instead: nothing here raises, and the points recorded before are never touched.
    Returns ``{"notes": lines for the report, "pages": {name: what build_page did}}``."""
    fb_out = out / "feedback" / student / assignment
    src_dir = wdir / "feedback_src" / student / assignment
    problems: dict[str, str] = {}
    for name, nb in notebooks.items():
        try:
            src_dir.mkdir(parents=True, exist_ok=True)
            nbformat.write(feedback_notebook(prepare(nb), verdicts.get(name, {})), src_dir / f"{name}.ipynb")
        except Exception as exc:  # noqa: BLE001 - the page says what failed; the points stand
            problems[name] = _why(exc)
    rendered = wdir / "feedback" / student / assignment
    failure = "the page was not rendered"
    if len(problems) < len(notebooks):
        try:
            with temp_attrs(api.coursedir, autograded_directory="feedback_src"):
                result = api.generate_feedback(assignment, student, force=True)
            if not result.get("success"):
                lines = [ln for ln in (result.get("error") or result.get("log") or "").splitlines() if ln.strip()]
                failure = f"nbconvert: {' '.join(lines[-1].split())[:200]}" if lines else "nbconvert failed"
        except Exception as exc:  # noqa: BLE001
            failure = _why(exc)
    pages = {}
    for name in notebooks:
        if name in problems:
            continue
        html = rendered / f"{name}.html"
        if not html.is_file():
            problems[name] = failure
            continue
        try:
            pages[name] = build_page(html.read_text(encoding="utf-8"), fb_out / html.name, api.config,
                                     cache=out / "chapters")
        except Exception as exc:  # noqa: BLE001
            problems[name] = _why(exc)
    notes = []
    for name, reason in problems.items():
        notes.append(f"the feedback page of {name} could not be built ({reason}); the learner's page says so")
        try:
            fb_out.mkdir(parents=True, exist_ok=True)
            (fb_out / f"{name}.html").write_text(unavailable_page(assignment, name, reason, record), encoding="utf-8")
        except Exception as exc:  # noqa: BLE001 - the grade stands even without a page
            notes.append(f"the page that replaces it could not be written either ({_why(exc)})")
    return {"notes": notes, "pages": pages}
