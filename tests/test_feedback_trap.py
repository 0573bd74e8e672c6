"""Feedback pages run nothing a learner wrote, lose no points, and work wherever they are read.

One grading run (the course's grading command, two workers, a temporary gradebook) over
three learners:

- ``trap`` hands in a correct GELU whose notebook tries to run script through every way
  a notebook reaches its feedback page: stream, display, result and error outputs; every
  mime type nbconvert renders (HTML, SVG, PNG and JPEG with width/height/alt/filenames
  metadata, Markdown, LaTeX, JavaScript, JSON, widget views, "isolated" HTML); the
  notebook's and the cells' metadata; markdown cells with raw HTML, links, MathJax
  ``\\href``/``\\style``/``\\class``, pasted images (cell attachments: a PNG, a hostile
  SVG, one that is missing); ``<base>``, ``<meta refresh>``, iframes, forms, CSS
  ``url()`` and expressions, ``javascript:``/``data:text/html`` URLs, mXSS forms, markup
  in an exception's class, message and file name. Beside the traps it shows honest
  content: text, a PNG, math in markdown and in a LaTeX output, a pasted image.
- ``pasted`` hands in a correct LayerNorm with an image pasted into a markdown cell.
- ``broken_page`` hands in a correct GELU, and the grader is run with its page builder
  forced to fail for that learner (tests/feedback_driver: the real grading command with
  one function replaced).

Then headless Chromium (Debian's, through Playwright), with every request but the page's
own file blocked and recorded, opens each page with a trap recorder installed before any
page content (``__trap``, ``alert``/``confirm``/``prompt``, console, dialogs, popups,
navigations). The control: the same traps in the page as nbconvert rendered it, before
this project's page builder, fire -- so a trap that stays silent on the finished page
was stopped by it.
"""
from __future__ import annotations

import base64
import json
import re
import shutil
import struct
import subprocess
import sys
import urllib.parse
import zlib
from pathlib import Path

import pytest

from grading_submissions import ASSIGNMENTS, CASES, make_submission  # noqa: E402
from jupyter_browser import open_page

from classroom.reporting import chapters, feedback, mathsvg, sanitiser  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BY_NAME = {c.student: c for c in CASES}
TRAP = "trap"
HONEST_TEXT = "HONEST-LEARNER-TEXT: my own words stay on the page"
HONEST_ALT = "my honest plot"


def png(width: int, height: int, rgb=(200, 30, 30)) -> bytes:
    """A real PNG image of one colour."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


PNG = base64.b64encode(png(24, 16)).decode()
PASTED = base64.b64encode(png(40, 20, (30, 120, 200))).decode()
JPEG = "/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAP" + "A" * 40  # a JPEG's first bytes; not a whole image


def trap(key: str) -> str:
    return f"__trap('{key}')"


# ----------------------------------------------------------------------------- the payloads
HTML_TRAPS = [
    f"<script>{trap('html-script')}</script>",
    f"<img src=x onerror=\"{trap('html-onerror')}\">",
    f"<svg onload=\"{trap('html-svg-onload')}\"><script>{trap('html-svg-script')}</script></svg>",
    f"<svg><a href=\"javascript:{trap('svg-a')}\"><text y='20'>svg link</text></a>"
    f"<animate attributeName='href' values='javascript:{trap('svg-animate')}'/>"
    f"<set attributeName='onmouseover' to=\"{trap('svg-set')}\"/>"
    f"<foreignObject><img src=x onerror=\"{trap('svg-foreign')}\"></foreignObject></svg>",
    f"<a href=\"javascript:{trap('a-js')}\">js link</a> <a href=\"  jav&#x09;ascript:{trap('a-js2')}\">js2</a>",
    f"<a href=\"data:text/html;base64,{base64.b64encode(('<script>' + trap('a-data') + '</script>').encode()).decode()}\">data link</a>",
    f"<iframe src=\"data:text/html,<script>parent.{trap('iframe')}</script>\"></iframe>",
    f"<iframe srcdoc=\"<script>parent.{trap('iframe-srcdoc')}</script>\"></iframe>",
    f"<object data=\"javascript:{trap('object')}\"></object><embed src=\"javascript:{trap('embed')}\">",
    "<base href=\"http://trap.invalid/base/\"><img src=\"relative-after-base.png\">",
    f"<meta http-equiv=\"refresh\" content=\"0;url=javascript:{trap('meta')}\">",
    "<meta http-equiv=\"refresh\" content=\"0;url=http://trap.invalid/refresh\">",
    "<link rel=\"stylesheet\" href=\"http://trap.invalid/style.css\"><link rel=\"prefetch\" href=\"http://trap.invalid/pf\">",
    "<style>@import 'http://trap.invalid/import.css'; body { background: url(http://trap.invalid/bg.png) }</style>",
    f"<div style=\"background-image: url(http://trap.invalid/inline.png); width: expression({trap('css-expr')})\">styled</div>",
    "<div style=\"position: fixed; top: 0; left: 0; width: 100%; height: 100%; background: white\">cover</div>",
    f"<form action=\"javascript:{trap('form')}\"><input autofocus onfocus=\"{trap('input-focus')}\">"
    f"<button formaction=\"javascript:{trap('formaction')}\">go</button></form>",
    f"<details open ontoggle=\"{trap('details')}\"><summary>s</summary>d</details>",
    f"<video><source onerror=\"{trap('video')}\"></video><audio src=x onerror=\"{trap('audio')}\"></audio>",
    f"<math><mtext><table><mglyph><style><img src=x onerror=\"{trap('mxss-math')}\"></style></mglyph></table></mtext></math>",
    f"<noscript><p title=\"</noscript><img src=x onerror={trap('mxss-noscript')}>\"></p></noscript>",
    f"<svg><style><img src=x onerror=\"{trap('mxss-svg-style')}\"></style></svg>",
    f"<img src=\"http://trap.invalid/remote.png\"><img srcset=\"http://trap.invalid/srcset.png 1x\">"
    "<img src=\"file:///etc/hostname\"><img src=\"/etc/hostname\">",
    f"<img src=\"data:text/html,<script>{trap('img-data-html')}</script>\">",
    f"<a href=\"#\" onclick=\"{trap('onclick')}\" onmouseover=\"{trap('onmouseover')}\">hover</a>",
    f"<body onload=\"{trap('body-onload')}\"><marquee onstart=\"{trap('marquee')}\">m</marquee>",
    f"<template><img src=x onerror=\"{trap('template')}\"></template>",
    f"<textarea><img src=x onerror=\"{trap('textarea')}\"></textarea>",
    f"$\\href{{javascript:{trap('html-mathjax-href')}}}{{x}}$",
]
SVG_TRAP = (f"<svg xmlns='http://www.w3.org/2000/svg' width='30' height='30' onload=\"{trap('svg-output-onload')}\">"
            f"<script>{trap('svg-output-script')}</script><rect width='30' height='30' fill='green'/></svg>")
WIDTH_TRAP = f"10 onerror={trap('png-width')}"
DISPLAYS = [
    ({"text/html": "".join(HTML_TRAPS), "text/plain": "html"}, {}),
    ({"text/html": f"<script>{trap('isolated')}</script><img src=x onerror=\"{trap('isolated-img')}\">"},
     {"text/html": {"isolated": True}}),
    ({"image/png": PNG}, {"image/png": {"width": WIDTH_TRAP, "height": f"10 onload={trap('png-height')}",
                                        "alt": f"\"><img src=x onerror=\"{trap('png-alt')}\">",
                                        "unconfined": True}}),
    ({"image/png": PNG}, {"filenames": {"image/png": f"javascript:{trap('png-filename')}"}}),
    ({"image/jpeg": JPEG}, {"image/jpeg": {"width": f"5 onerror={trap('jpeg-width')}"}}),
    ({"image/png": f"x\" onerror=\"{trap('png-data')}"}, {}),
    ({"image/svg+xml": SVG_TRAP}, {}),
    ({"text/markdown": f"[md link](javascript:{trap('md-link')}) <img src=x onerror=\"{trap('md-img')}\"> "
                       f"$\\href{{javascript:{trap('md-href')}}}{{y}}$"}, {}),
    ({"text/latex": f"$$\\href{{javascript:{trap('latex-href')}}}{{z}} + \\style{{background-image: "
                    f"url(http://trap.invalid/mj.png)}}{{w}} + \\class{{x\" onload=\"{trap('latex-class')}}}{{v}}"
                    f" + \\cssId{{top}}{{u}}$$", "text/plain": "latex"}, {}),
    ({"application/javascript": f"{trap('javascript')}"}, {}),
    ({"application/json": {"a": f"<script>{trap('json')}</script>"}}, {}),
    ({"application/vnd.jupyter.widget-view+json": {"model_id": f"</script><script>{trap('widget')}</script>",
                                                   "version_major": 2, "version_minor": 0},
      "text/plain": f"<script>{trap('widget-plain')}</script>"}, {}),
]
RESULT = ({"text/html": f"<img src=x onerror=\"{trap('result-html')}\"><b>result</b>",
           "text/plain": f"<script>{trap('result-plain')}</script>"},
          {"text/html": {"isolated": "yes"}})
TRAP_CELLS = [
    # stream outputs
    "import sys\n"
    f"print(\"<script>{trap('stdout')}</script><img src=x onerror=\\\"{trap('stdout-img')}\\\">\")\n"
    f"print(\"<img src=x onerror={trap('stderr')}>\", file=sys.stderr)\n"
    f"print({HONEST_TEXT!r})\n",
    # display outputs, every mime type, with metadata
    "import base64, json\nfrom IPython.display import publish_display_data\n"
    f"for data, metadata in json.loads(base64.b64decode({base64.b64encode(json.dumps(DISPLAYS).encode()).decode()!r})):\n"
    "    publish_display_data(data, metadata)\n",
    # the honest ones
    "from IPython.display import publish_display_data\n"
    f"publish_display_data({{'image/png': {PNG!r}, 'text/plain': 'plot'}}, "
    f"{{'image/png': {{'width': 48, 'alt': {HONEST_ALT!r}}}}})\n"
    "publish_display_data({'text/latex': r'$$\\sqrt{2} \\approx 1.414$$', 'text/plain': 'sqrt 2'})\n",
    # an execute result
    "import base64, json\n"
    f"class Result:\n    def _repr_mimebundle_(self, include=None, exclude=None):\n"
    f"        return tuple(json.loads(base64.b64decode({base64.b64encode(json.dumps(RESULT).encode()).decode()!r})))\n"
    "Result()\n",
    # an error: markup in the class name, the message and the file name of the traceback
    f"Bad = type(\"<img src=x onerror={trap('ename')}>\", (Exception,), {{}})\n"
    f"exec(compile(\"raise Bad('<script>{trap('evalue')}</script>')\", "
    f"\"<img src=x onerror={trap('filename')}>.py\", 'exec'))\n",
]
TRAP_MARKDOWN = (
    "## My notes\n\n"
    f"<script>{trap('md-cell-script')}</script>\n\n<img src=x onerror=\"{trap('md-cell-img')}\">\n\n"
    f"[a link](javascript:{trap('md-cell-link')}) and [data](data:text/html,<script>{trap('md-cell-data')}</script>)\n\n"
    f"<a href=\"jAvAsCrIpT:{trap('md-cell-case')}\">case</a> <base href=\"http://trap.invalid/\">"
    f"<meta http-equiv=\"refresh\" content=\"0;url=http://trap.invalid/md\"><iframe src=\"javascript:{trap('md-iframe')}\"></iframe>\n\n"
    f"Math: $\\href{{javascript:{trap('md-cell-href')}}}{{click}}$ and $\\class{{\\\" onmouseover=\\\"{trap('md-class')}}}{{c}}$ "
    "and $\\require{action}\\toggle{a}{b}\\endtoggle$ and honest math $\\frac{a}{b} + \\sqrt{x}$.\n\n"
    "A pasted image: ![honest paste](attachment:paste.png)\n\n"
    "A hostile one: ![svg](attachment:evil.svg) and one with no data: ![gone](attachment:missing.png)\n\n"
    f"<img src=\"attachment:paste.png\" onerror=\"{trap('md-attachment-raw')}\">\n"
)
ATTACHMENTS = {
    "paste.png": {"image/png": PASTED},
    "evil.svg": {"image/svg+xml": base64.b64encode(SVG_TRAP.encode()).decode(),
                 "text/html": f"<script>{trap('attachment-html')}</script>"},
}


def trap_notebook() -> str:
    """A correct GELU, with the trap cells right after the learner's own check (before
    the graded cells: what runs after them is not shown), and hostile metadata."""
    nb_file = ASSIGNMENTS["03_gelu"][0]
    released = json.loads((ROOT / "exercises" / "03_gelu" / nb_file).read_text())
    solution = json.loads((ROOT / "solutions" / "03_gelu" / nb_file).read_text())
    nb = json.loads(make_submission(BY_NAME["gelu_solution"], released, solution))
    first_graded = next(i for i, c in enumerate(nb["cells"]) if (c.get("metadata", {}).get("nbgrader") or {}).get("grade"))
    hostile_meta = {"alt": f"\"><img src=x onerror=\"{trap('cell-alt')}\">",
                    "tags": [f"<script>{trap('cell-tag')}</script>"],
                    "jupyter": {"source_hidden": False}, "widgets": {"x": f"</script><script>{trap('cell-widget')}</script>"}}
    cells = [{"cell_type": "code", "execution_count": None, "metadata": dict(hostile_meta), "outputs": [],
              "source": src, "id": f"trap-code-{i}"} for i, src in enumerate(TRAP_CELLS)]
    cells.insert(0, {"cell_type": "markdown", "metadata": dict(hostile_meta), "source": TRAP_MARKDOWN,
                     "attachments": ATTACHMENTS, "id": "trap-markdown"})
    nb["cells"][first_graded - 1:first_graded - 1] = cells
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {}, "version_major": 2, "version_minor": 0,
        "</script><script>" + trap("nb-widget-state") + "</script>": 1}}
    nb["metadata"]["title"] = f"</title><script>{trap('nb-title')}</script>"
    return json.dumps(nb, indent=1)


def pasted_notebook() -> str:
    """A correct LayerNorm with an image pasted into a markdown cell of the learner's own."""
    nb_file = ASSIGNMENTS["02_layernorm"][0]
    released = json.loads((ROOT / "exercises" / "02_layernorm" / nb_file).read_text())
    solution = json.loads((ROOT / "solutions" / "02_layernorm" / nb_file).read_text())
    nb = json.loads(make_submission(BY_NAME["ln_solution"], released, solution))
    at = next(i for i, c in enumerate(nb["cells"]) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "layer_norm")
    nb["cells"].insert(at + 1, {"cell_type": "markdown", "metadata": {}, "id": "my-sketch",
                                "source": "My sketch of the normalisation:\n\n![image.png](attachment:image.png)\n",
                                "attachments": {"image.png": {"image/png": PASTED}}})
    return json.dumps(nb, indent=1)


DRIVER = '''\
"""The course's grading command with the feedback page builder forced to fail for one learner."""
import sys

from classroom import grade
from classroom.reporting import feedback

_build = feedback.build_page


def build_page(rendered, dest, *args, **kwargs):
    if dest.parent.parent.name == "broken_page":
        raise RuntimeError("forced failure: this page cannot be built")
    return _build(rendered, dest, *args, **kwargs)


feedback.build_page = build_page  # the workers import this file too (spawn): they get it as well

if __name__ == "__main__":
    sys.exit(grade.main(sys.argv[1:]))
'''

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if not (chapters.BUILT_BOOK / "book").is_dir():
        pytest.fail("_build/html is missing: build the book first (make book)")
    why = mathsvg.unavailable()
    if why:
        pytest.fail(f"math cannot be typeset here: {why}")
    tmp = tmp_path_factory.mktemp("trap")
    subs = tmp / "subs"
    gelu = ASSIGNMENTS["03_gelu"][0]
    released = json.loads((ROOT / "exercises" / "03_gelu" / gelu).read_text())
    solution = json.loads((ROOT / "solutions" / "03_gelu" / gelu).read_text())
    for student, assignment, name, text in (
            (TRAP, "03_gelu", gelu, trap_notebook()),
            ("pasted", "02_layernorm", ASSIGNMENTS["02_layernorm"][0], pasted_notebook()),
            ("broken_page", "03_gelu", gelu, make_submission(BY_NAME["gelu_solution"], released, solution))):
        path = subs / student / assignment / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    driver = tmp / "feedback_driver.py"
    driver.write_text(DRIVER)
    out = tmp / "out"
    proc = subprocess.run([sys.executable, str(driver), str(subs), "--workers", "2", "--out", str(out),
                           "--db", f"sqlite:///{tmp / 'gradebook.db'}", "--no-progress"],
                          cwd=ROOT, capture_output=True, text=True, timeout=1500)
    records = {}
    for state in out.glob("state/*/*.json"):
        r = json.loads(state.read_text())
        records[r["student"]] = r
    return {"proc": proc, "out": out, "tmp": tmp, "records": records}


def _page(graded, student: str, assignment: str = "03_gelu") -> Path:
    name = Path(ASSIGNMENTS[assignment][0]).stem
    page = graded["out"] / "feedback" / student / assignment / f"{name}.html"
    assert page.is_file(), (page, graded["proc"].stdout[-3000:], graded["proc"].stderr[-3000:])
    return page


def test_the_points_hold(graded):
    proc, records = graded["proc"], graded["records"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "this run graded 3 submission(s)" in proc.stdout, proc.stdout[-3000:]
    for student in (TRAP, "pasted", "broken_page"):
        assert records[student]["status"] == "ok", records[student]
        if student == TRAP:  # its error cell runs exec(compile(...)) for a traceback's file name: held for review
            check = records[student]["checks"]["gelu"]
            assert check["held"] and any("exec()" in r for r in check["review"]), check
            assert not check["differs"], check  # the checks agree with the notebook; the points only wait
            continue
        assert records[student]["score"] == 10.0, (student, records[student].get("score"), records[student].get("checks"))


def test_a_page_that_cannot_be_built_is_reported_and_replaced(graded):
    record = graded["records"]["broken_page"]
    assert any("feedback page of gelu could not be built" in n and "forced failure" in n for n in record["notes"]), record["notes"]
    report = (graded["out"] / "report.txt").read_text()
    assert "feedback page of gelu could not be built" in report
    text = _page(graded, "broken_page").read_text()
    assert "could not be built" in text and "forced failure" in text
    assert "10" in re.sub(r"<[^>]+>", " ", text)  # the points, as recorded
    assert "<script" not in text.lower()


def test_the_grader_warns_once_that_the_book_address_is_unset(graded):
    lines = [ln for ln in (graded["proc"].stdout + graded["proc"].stderr).splitlines() if "c.CourseBook.url" in ln]
    assert len(lines) == 1, lines


# ----------------------------------------------------------------------------- the browser
def audit(page) -> list[str]:
    """What in the page's DOM could run or load something."""
    return page.evaluate("""() => {
        const bad = [];
        for (const e of document.querySelectorAll('*')) {
          const tag = e.tagName.toLowerCase();
          if (['script', 'iframe', 'object', 'embed', 'base', 'form', 'frame', 'frameset', 'link',
               'video', 'audio', 'source', 'template', 'foreignobject', 'animate', 'set', 'use', 'image']
               .includes(tag)) bad.push('element ' + tag);
          if (tag === 'meta' && e.httpEquiv && e.httpEquiv.toLowerCase() !== 'content-security-policy') bad.push('meta ' + e.httpEquiv);
          for (const a of e.attributes) {
            const n = a.name.toLowerCase(), v = a.value.trim().toLowerCase();
            if (n.startsWith('on')) bad.push(tag + ' ' + n);
            if (['href', 'xlink:href', 'src', 'action', 'formaction', 'data', 'srcset', 'poster', 'background']
                 .includes(n)) {
              const ok = n === 'src' ? (tag === 'img' && v.startsWith('data:image/'))
                                     : (v.startsWith('#') || /^https?:\\/\\//.test(v) || /^book\\/((de|ka)\\/)?[\\w.-]+\\.html(#.*)?$/.test(v));
              if (!ok) bad.push(tag + ' ' + n + '=' + v.slice(0, 60));
            }
            if (n === 'style' && /url\\(|expression|javascript|position:\\s*(?!relative|static)/.test(v))
              bad.push(tag + ' style=' + v.slice(0, 60));
          }
        }
        return bad; }""")


def _assert_quiet(events, what: str):
    assert not events["fired"], (what, events["fired"])
    assert not events["dialogs"] and not events["popups"], (what, events)
    assert not events["requests"], (what, events["requests"])
    assert not events["console"], (what, events["console"])
    elsewhere = {u.split("#")[0] for u in events["navigations"]}
    assert len(elsewhere) <= 1, (what, events["navigations"])  # the page itself (and its fragments)


@pytest.mark.parametrize("bypass_csp", [False, True], ids=["with its policy", "sanitiser alone"])
def test_no_trap_fires_on_the_feedback_page(graded, browser, bypass_csp):
    page, context, events = open_page(browser, _page(graded, TRAP), bypass_csp=bypass_csp)
    try:
        _assert_quiet(events, "feedback page")
        assert not audit(page)
    finally:
        context.close()


def test_the_traps_are_live_in_the_page_nbconvert_rendered(graded, browser):
    """Control: the same notebook as nbconvert renders it (nbgrader's page, before this
    project's page builder) runs the learner's script."""
    raw = list((graded["out"] / "workers").glob(f"w*/feedback/{TRAP}/03_gelu/gelu.html"))
    assert raw, "nbgrader's rendering of the trap notebook was not kept"
    page, context, events = open_page(browser, raw[0], bypass_csp=True, interact=False)
    try:
        fired = set(events["fired"])
        assert len(fired) >= 5, events
        assert {"html-script", "html-onerror"} <= fired, fired
    finally:
        context.close()


def test_the_learners_honest_content_is_shown(graded, browser):
    page, context, events = open_page(browser, _page(graded, TRAP), interact=False)
    try:
        text = page.evaluate("() => document.body.innerText")
        assert HONEST_TEXT in text
        images = page.evaluate("""() => Array.from(document.images).map(i => ({
            src: i.getAttribute('src').slice(0, 30), alt: i.alt, ok: i.complete && i.naturalWidth > 0,
            width: i.getBoundingClientRect().width}))""")
        assert all(i["ok"] for i in images), images
        plot = [i for i in images if i["alt"] == HONEST_ALT]
        assert plot and plot[0]["src"].startswith("data:image/png") and plot[0]["width"] == 48, images
        pasted = [i for i in images if i["alt"] == "honest paste"]
        assert pasted and pasted[0]["src"].startswith("data:image/png"), images
        assert "missing.png could not be shown" in text  # the pasted image with no data: a note
        # math typeset at build: in the markdown cell and in the LaTeX output, no TeX left there
        assert page.locator("div.text_cell_render mjx-container svg").count() >= 2
        assert page.locator("div.output_latex mjx-container svg").count() >= 1
        latex = page.locator("div.output_latex").first.inner_text()
        assert "\\sqrt" not in latex
        assert "needs JavaScript is not shown" in text
    finally:
        context.close()


def test_a_pasted_image_is_shown(graded, browser):
    page, context, events = open_page(browser, _page(graded, "pasted", "02_layernorm"), interact=False)
    try:
        _assert_quiet(events, "pasted")
        images = page.evaluate("""() => Array.from(document.images).map(i => ({
            src: i.getAttribute('src').slice(0, 22), alt: i.alt, ok: i.complete && i.naturalWidth > 0}))""")
        assert {"src": "data:image/png;base64,", "alt": "image.png", "ok": True} in images, images
        assert "My sketch of the normalisation" in page.evaluate("() => document.body.innerText")
    finally:
        context.close()


# ----------------------------------------------------------------------------- anywhere
def _links_and_images(page) -> dict:
    return page.evaluate("""() => ({
        images: Array.from(document.images).map(i => ({src: i.getAttribute('src').slice(0, 40),
                                                        ok: i.complete && i.naturalWidth > 0})),
        links: Array.from(document.querySelectorAll('[href]')).map(a => a.getAttribute('href')),
        ids: Array.from(document.querySelectorAll('[id], a[name]')).map(e => e.id || e.getAttribute('name')),
        math: document.querySelectorAll('mjx-container > svg').length,
        scripts: document.scripts.length})""")


def _check_links(info: dict, folder: Path, what: str) -> list[str]:
    shipped = []
    for href in info["links"]:
        if href.startswith("#"):
            assert href[1:] == "" or urllib.parse.unquote(href[1:]) in info["ids"], (what, href)
        elif re.match(r"^https?://", href):
            continue
        else:
            target = folder / urllib.parse.unquote(href.split("#")[0])
            assert target.is_file(), (what, "dead link", href)
            shipped.append(href)
    return shipped


def test_a_page_copied_anywhere_reads_the_same(graded, browser, tmp_path):
    """Each page, with what it ships, copied to an unrelated folder and opened with the
    network blocked: math typeset, every image loaded, no dead link, no file:// anywhere."""
    pages = [_page(graded, "pasted", "02_layernorm"), _page(graded, TRAP)]
    for page_path in pages:
        folder = tmp_path / page_path.parent.parent.name / "somewhere" / "else"
        shutil.copytree(page_path.parent, folder)
        for html in folder.rglob("*.html"):
            assert "file://" not in html.read_text(), html
        copy = folder / page_path.name
        page, context, events = open_page(browser, copy, allowed=folder, interact=False)
        try:
            _assert_quiet(events, copy.name)
            info = _links_and_images(page)
            assert info["scripts"] == 0 and info["math"] > 0, info["math"]
            assert all(i["ok"] for i in info["images"]), info["images"]
            linked = _check_links(info, folder, copy.name)
            assert linked and all(h.startswith("book/") for h in linked), info["links"]
        finally:
            context.close()
        for href in sorted({h.split("#")[0] for h in linked}):
            page, context, events = open_page(browser, folder / href, allowed=folder, interact=False)
            try:
                _assert_quiet(events, href)
                info = _links_and_images(page)
                assert info["scripts"] == 0 and info["math"] > 10, (href, info["math"])
                assert info["images"] and all(i["ok"] for i in info["images"]), (href, info["images"])
                _check_links(info, (folder / href).parent, href)
                prose = page.evaluate("""() => { const a = document.querySelector('article').cloneNode(true);
                    a.querySelectorAll('mjx-container, pre, code').forEach(m => m.remove()); return a.innerText; }""")
                assert "\\(" not in prose and "\\frac" not in prose, prose[:500]
                title = page.evaluate("() => document.querySelector('h1').innerText")
                assert title.strip(), href
            finally:
                context.close()


# ----------------------------------------------------------------------------- the policy, by itself
def _elements(fragment: str) -> list[tuple[str, dict]]:
    """(tag, attributes) of every start tag in ``fragment``, as a browser's parser reads them."""
    from html.parser import HTMLParser

    found = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag, attrs):
            found.append((tag, {k: v or "" for k, v in attrs}))

        handle_startendtag = handle_starttag

    Parser(convert_charrefs=True).feed(fragment)
    return found


FORBIDDEN = {"script", "iframe", "object", "embed", "base", "meta", "form", "link", "style", "frame", "input",
             "button", "textarea", "video", "audio", "source", "template", "foreignobject", "animate", "set",
             "use", "image", "noscript", "marquee", "body"}


@pytest.mark.parametrize("payload", HTML_TRAPS + [SVG_TRAP, TRAP_MARKDOWN], ids=range(len(HTML_TRAPS) + 2))
def test_the_sanitiser_leaves_nothing_that_runs(payload):
    for tag, attrs in _elements(sanitiser.sanitise(payload)):
        assert tag not in FORBIDDEN, (tag, attrs)
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name, value)
            if name in ("href", "xlink:href"):
                assert re.match(r"^(#|https?://)", value.strip()), (tag, name, value)
            if name in ("src", "srcset", "action", "formaction", "data", "poster", "background"):
                assert tag == "img" and name == "src" and value.startswith("data:image/"), (tag, name, value)
            if name == "style":
                assert not re.search(r"url\(|expression|position:\s*(?!relative|static)", value), (tag, value)


def test_math_as_mathjax_writes_it_survives_the_sanitiser():
    """Every element and attribute of MathJax's SVG output (and its hidden MathML) is
    allowed: honest formulas come out of the sanitiser as they went in."""
    tex = (r"$x^2$ $$\frac{a}{b}\sqrt[3]{x}\sum_{i=1}^n \int_0^1 \begin{pmatrix}1&2\\3&4\end{pmatrix}$$ "
           r"$$\begin{array}{|c|c|}\hline a & b\\ \hline\end{array}\ \boxed{x}\ \color{red}{y}\ \text{ab}\ "
           r"\overbrace{a+b}^{n}\ \cancel{x}\ \mathbb{R}\ \unicode{x263A}\ \ce{H2O}\ \href{https://example.org}{l}$$")
    html, css, stats = mathsvg.typeset(f"<p>{tex}</p>")
    assert stats["math"] == 3 and "<svg" in html and "<math" in html
    before = [(t, sorted(a)) for t, a in _elements(html)]
    after = [(t, sorted(k for k in a if k != "rel")) for t, a in _elements(sanitiser.sanitise(html))]
    assert after == before


def test_chapter_links_follow_the_book_address(graded):
    """c.CourseBook.url set: the chapter links go to the published book (in the page's edition)."""
    from traitlets.config import Config
    raw = next((graded["out"] / "workers").glob("w*/feedback/pasted/02_layernorm/layernorm.html"))
    cfg = Config()
    cfg.CourseBook.url = "https://courses.example.org/andrea-block-lab"
    dest = graded["tmp"] / "published" / "layernorm.html"
    done = feedback.build_page(raw.read_text(), dest, cfg)
    page = dest.read_text()
    assert 'href="https://courses.example.org/andrea-block-lab/book/04_layernorm_and_placement.html"' in page
    assert not done["shipped"] and not (dest.parent / "book").exists()
    assert "file://" not in page and "courses.example.org/andrea-block-lab/_static" not in page


def test_without_a_built_book_the_links_are_left_out_with_a_note(graded, monkeypatch):
    raw = next((graded["out"] / "workers").glob("w*/feedback/pasted/02_layernorm/layernorm.html"))
    monkeypatch.setattr(chapters, "BUILT_BOOK", graded["tmp"] / "no-book-here")
    dest = graded["tmp"] / "unbuilt" / "layernorm.html"
    done = feedback.build_page(raw.read_text(), dest)
    page = dest.read_text()
    assert "the book was not built where this page was made" in page
    assert "04_layernorm_and_placement" not in re.sub(r"<[^>]+>", "", page) or "href=\"book/" not in page
    assert 'href="book/' not in page and "_build/html" not in page and not done["shipped"]


def test_math_that_cannot_be_typeset_is_shown_as_tex_with_a_note(graded, monkeypatch):
    raw = next((graded["out"] / "workers").glob("w*/feedback/pasted/02_layernorm/layernorm.html"))
    monkeypatch.setattr(mathsvg, "NODE_MODULES", graded["tmp"] / "no-mathjax")
    monkeypatch.setattr(mathsvg, "STAMP", graded["tmp"] / "no-mathjax" / "stamp")
    dest = graded["tmp"] / "no-math" / "layernorm.html"
    feedback.build_page(raw.read_text(), dest)
    page = dest.read_text()
    assert "could not be typeset" in page and "MathJax for Node is not vendored" in page
    assert "\\sqrt" in page and "<mjx-container" not in page


def test_one_pages_tex_never_reaches_the_next_page():
    """The pages of a grading process share one Node typesetter: a macro that one page
    defines (\\def, \\newcommand, \\let) is unknown on the next, and a page that runs past
    its time ends the typesetter without harming the page after it."""
    defined, _, _ = mathsvg.typeset(r"<p>$\def\alpha{HACK}\newcommand{\foo}{X}\let\beta=\gamma \alpha\foo\beta$</p>")
    assert [m for m in re.findall(r"<mi>([^<]*)</mi>", defined)] == ["H", "A", "C", "K", "X", "γ"]
    html, _, stats = mathsvg.typeset(r"<p>$\alpha$ $\beta$ $\foo$</p>")
    assert stats["math"] == 3
    assert re.findall(r"<mi>([^<]*)</mi>", html)[:2] == ["α", "β"] and "HACK" not in html
    assert "\\foo" in html  # undefined here: MathJax shows it as an error, not as X
    with pytest.raises(mathsvg.TypesetError, match="ran past"):
        mathsvg.typeset(r"<p>$x$</p>", timeout=1e-6)
    after, _, stats = mathsvg.typeset(r"<p>$\alpha$</p>")
    assert stats["math"] == 1 and re.findall(r"<mi>([^<]*)</mi>", after) == ["α"]
