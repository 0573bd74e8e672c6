"""``report.html``: the class at a glance, for the instructor, in the instructor's language.

One page (:func:`class_view`) of the whole class as the course gradebook holds it
(:class:`classroom.reporting.classlist.ClassList`):

- what to do next, in a few lines (:func:`next_steps`);
- the score distribution of every assignment (a bar chart, inline SVG);
- the pass rate of every graded property (a graded cell: all its points, or not);
- the most common likely mistakes the checks named, with how many learners made each
  and who (:mod:`classroom.reporting.mistakes`);
- the learners to look at, with the reason, the details and their feedback page;
- every learner's totals, with what this run changed marked.

The page is the grader's kind of page (:mod:`classroom.reporting.page`): offline, its
styles inline, no script at all (its policy forbids any), every string a learner made
(ids, names, messages) escaped and the whole body through the one sanitiser, links only
to the feedback pages beside it. Its words are in ``ANDREA_LANG`` (English, German or
Georgian, from the course's catalogs).
"""
from __future__ import annotations

import html
import os
import statistics
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import quote

from andrea_ref.i18n import LANGUAGES, N_, gettext

from .. import dburl, textsafe
from .chapters import georgian_css
from .classlist import ClassList, Entry
from .findings import ORDER
from .mistakes import mistakes_of
from .page import compose
from .sanitiser import Links, sanitise
from .tables import to_look_at

TITLE = N_("Class report")
SUBTITLE = N_("The whole class as the course gradebook holds it ({gradebook}), written {when}.")
FIGURES = (N_("Learners"), N_("Notebooks handed in"), N_("Graded in this run"), N_("To look at"))
SECTIONS = {"next": N_("What to do next"), "scores": N_("Score distribution per assignment"),
            "properties": N_("Pass rate of every graded property"), "mistakes": N_("Most common likely mistakes"),
            "look": N_("Learners to look at"), "totals": N_("Per-learner totals"),
            "refused": N_("Files refused or skipped in this run")}
COLUMNS = {"assignment": N_("Assignment"), "property": N_("Property"), "points": N_("Points"),
           "passed": N_("Passed"), "rate": N_("Pass rate"), "mistake": N_("Likely mistake"),
           "learners": N_("Learners"), "who": N_("Who"), "learner": N_("Learner"), "notebook": N_("Notebook"),
           "status": N_("Status"), "why": N_("Why"), "feedback": N_("Feedback page"), "total": N_("Total")}
DIST_CAPTION = N_("{n} notebook(s) handed in: mean {mean}, median {median} of {most} points.")
DIST_LABEL = N_("Number of learners for each score in {assignment}")
PASSED_OF = N_("{passed} of {n}")
OPEN, DETAILS = N_("open"), N_("details")
NO_MISTAKES = N_("No check named a likely mistake.")
NO_LOOK = N_("Nobody: every notebook handed in was graded without a finding.")
THIS_RUN = {"new": N_("new in this run"), "changed": N_("changed in this run (was {previous})"),
            "regraded": N_("graded again in this run")}
STATUS_WORDS = {"not submitted": N_("not submitted"), "failed": N_("failed"), "timed out": N_("timed out"),
                "limit hit": N_("limit hit"), "tampering suspected": N_("tampering suspected"),
                "held for review": N_("held for review"), "files refused": N_("files refused"), "untouched": N_("untouched"),
                "probe suspected": N_("probe suspected"), "locked cells edited": N_("locked cells edited"),
                "graded": N_("graded")}
REASONS = {"failed": N_("the notebook could not be graded"), "timed out": N_("it ran out of time"),
           "limit hit": N_("it hit a limit of the sandbox"),
           "tampering suspected": N_("the notebook's own checks claim more than the independent check grants"),
           "held for review": N_("its code reaches for the grader's machinery or for a forbidden implementation: "
                                 "its points wait for your decision"),
           "files refused": N_("files handed in beside the notebook were kept away from the grader"),
           "untouched": N_("the answer cells are as released"),
           "probe suspected": N_("the answer reaches for machinery that no exercise needs"),
           "locked cells edited": N_("locked cells were edited (they were restored for grading)"),
           "graded": N_("graded; see the notes")}
NEXT = {
    "review": N_("Look at the {n} notebook(s) held for review (tampering suspected) before you publish the grades: "
                 "the evidence and each feedback page are under “Learners to look at”."),
    "accept": N_("{n} notebook(s) are held for review: read the evidence under “Learners to look at”, then "
                 "grant the points of each one you accept by grading again with --accept STUDENT/ASSIGNMENT."),
    "failed": N_("{n} notebook(s) could not be graded normally (failed, timed out or hit a limit): look at the "
                 "notebook, then grade the class again with the same command; only what changed is graded again."),
    "untouched": N_("{n} learner(s) handed in a notebook without an answer (as released): remind them to save "
                    "their answer before they hand it in."),
    "missing": N_("{n} notebook(s) have not been handed in yet ({which})."),
    "mistake": N_("The most common likely mistake, made by {n} learner(s): “{mistake}” Worth a few minutes "
                  "in class."),
    "property": N_("The property {property} of {assignment} holds in only {rate} of the notebooks handed in."),
    "refused": N_("{n} file(s) of this run were refused (listed at the end): ask their authors to hand in the "
                  "course's own notebook."),
    "feedback": N_("Return the feedback pages to the learners: one folder per learner in {folder}. Each page "
                   "reads offline, wherever it is opened."),
    "nothing": N_("Nothing needs a look: every notebook handed in was graded without a finding."),
}
CSS = """
body { font-family: "Noto Sans Georgian", "Helvetica Neue", Helvetica, Arial, sans-serif; max-width: 72rem;
       margin: 1.5rem auto; padding: 0 1rem; line-height: 1.45; color: #1d1d1d; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { border: 1px solid #d4d4d4; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
dl.figures { display: flex; flex-wrap: wrap; gap: 0.5em 2em; } dl.figures div { min-width: 9em; }
dl.figures dt { color: #555; font-size: 0.9em; } dl.figures dd { margin: 0; font-size: 1.6em; font-weight: 600; }
figure.chart { display: inline-block; margin: 0.5em 2em 1em 0; vertical-align: top; }
figcaption { font-size: 0.9em; color: #444; max-width: 22rem; }
.status { white-space: nowrap; } .status-graded { color: #1b6e20; } .status-not-submitted { color: #777; }
.status-failed, .status-timed-out, .status-limit-hit, .status-tampering-suspected { color: #a11919; font-weight: 600; }
.status-untouched, .status-files-refused { color: #8a5a00; }
.mark { font-size: 0.85em; color: #3553a8; white-space: nowrap; }
details summary { cursor: pointer; color: #3553a8; } pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 0.3em 0; }
ul.next li { margin: 0.3em 0; }
"""


def instructor_language() -> str:
    value = os.environ.get("ANDREA_LANG", "").strip()
    return value if value in LANGUAGES else "en"


class View:
    """The words and numbers of one page, in one language."""

    def __init__(self, language: str):
        self.language = language

    def t(self, message: str, **fields) -> str:
        """``message`` in the page's language, filled in, escaped for HTML."""
        text = gettext(message, self.language)
        return html.escape(text.format(**fields) if fields else text)

    def num(self, x: float | None) -> str:
        if x is None:
            return ""
        text = f"{round(float(x), 2):g}"
        return text.replace(".", ",") if self.language != "en" else text

    def pct(self, share: float) -> str:
        return f"{round(100 * share)}%" if self.language == "en" else f"{round(100 * share)} %"

    def status(self, status: str) -> str:
        base, _, detail = status.partition(": ")
        word = self.t(STATUS_WORDS.get(base, base)) + (f": {html.escape(detail)}" if detail else "")
        css = "status-" + base.replace(" ", "-")
        return f'<span class="status {css}">{word}</span>'


def _e(text) -> str:
    """Learner-made text as one escaped line."""
    return html.escape(textsafe.line(text, 300))


def learner(klass: ClassList, student: str) -> str:
    name = klass.names.get(student)
    return _e(student) + (f" ({_e(name)})" if name else "")


def histogram(scores: list[float], most: float, label: str) -> str:
    """An SVG bar chart of how many notebooks got each score (one bar per point)."""
    bins = list(range(int(most) + 1)) if 0 < most <= 30 else [round(most * i / 10, 1) for i in range(11)]
    counts = [0] * len(bins)
    for s in scores:
        i = min(range(len(bins)), key=lambda k: abs(bins[k] - s))
        counts[i] += 1
    width, height, pad = 28 * len(bins) + 20, 150, 22
    top = max(counts) or 1
    bars = []
    for i, (b, c) in enumerate(zip(bins, counts)):
        h = round((height - 2 * pad) * c / top)
        x = 10 + 28 * i
        bars.append(f'<rect x="{x + 3}" y="{height - pad - h}" width="22" height="{h}" fill="#4a6fc2"></rect>')
        if c:
            bars.append(f'<text x="{x + 14}" y="{height - pad - h - 4}" font-size="11" text-anchor="middle">{c}</text>')
        bars.append(f'<text x="{x + 14}" y="{height - 6}" font-size="11" text-anchor="middle" fill="#444">{b:g}</text>')
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="{label}"><title>{label}</title>'
            f'<line x1="8" y1="{height - pad}" x2="{width - 8}" y2="{height - pad}" stroke="#888"></line>'
            + "".join(bars) + "</svg>")


def rate_bar(share: float) -> str:
    return ('<svg xmlns="http://www.w3.org/2000/svg" width="120" height="12" viewBox="0 0 120 12" aria-hidden="true">'
            '<rect x="0" y="0" width="120" height="12" fill="#e6e6e6"></rect>'
            f'<rect x="0" y="0" width="{round(120 * share)}" height="12" fill="#3c9b4a"></rect></svg>')


def properties(klass: ClassList) -> list[tuple[str, str, str, float, int, int]]:
    """(assignment, notebook, grade id, points, passed, handed in) of every graded property
    of the notebooks somebody handed in (one nobody handed in has no pass rate yet)."""
    found = []
    for (a, nb), cells in sorted(klass.cells.items()):
        handed = [e for e in klass.of(a) if e.notebook == nb and e.submitted]
        for g, points in cells.items() if handed else ():
            passed = sum((e.cells.get(g) or 0.0) >= points - 1e-9 for e in handed)
            found.append((a, nb, g, points, passed, len(handed)))
    return found


def common_mistakes(klass: ClassList, language: str) -> list[tuple[str, list[str], list[str]]]:
    """(the mistake in ``language``, the properties it was named for, the learners who
    made it), most learners first."""
    by_key: dict[str, dict] = {}
    for e in klass.entries:
        for g, message in e.messages.items():
            for m in mistakes_of(message):
                item = by_key.setdefault(m.key, {"mistake": m, "where": set(), "who": set()})
                item["where"].add(f"{e.assignment}/{g}")
                item["who"].add(e.student)
    ranked = sorted(by_key.values(), key=lambda i: (-len(i["who"]), i["mistake"].key))
    return [(i["mistake"].text(language), sorted(i["where"]), sorted(i["who"])) for i in ranked]


def next_steps(v: View, klass: ClassList, skipped: list[str], out: Path, mistakes, props) -> list[str]:
    handed = [e for e in klass.entries if e.submitted]
    held = [e for e in handed if "tampering suspected" in e.statuses]
    on_review = [e for e in handed if "held for review" in e.statuses]
    broken = [e for e in handed if e.status in ("failed", "timed out") or e.status.startswith("limit hit")]
    untouched = sorted({e.student for e in handed if "untouched" in e.statuses})
    missing = [e for e in klass.entries if not e.submitted]
    lines = []
    if held:
        lines.append(v.t(NEXT["review"], n=len(held)))
    if on_review:
        lines.append(v.t(NEXT["accept"], n=len(on_review)))
    if broken:
        lines.append(v.t(NEXT["failed"], n=len(broken)))
    if untouched:
        lines.append(v.t(NEXT["untouched"], n=len(untouched)))
    if missing:
        per = defaultdict(int)
        for e in missing:
            per[e.assignment] += 1
        lines.append(v.t(NEXT["missing"], n=len(missing), which=", ".join(f"{a}: {n}" for a, n in sorted(per.items()))))
    if mistakes:
        text, _, who = mistakes[0]
        lines.append(v.t(NEXT["mistake"], n=len(who), mistake=textsafe.line(text, 300)))
    hard = [p for p in props if p[5] and p[4] / p[5] < 0.5]
    if hard:
        a, _, g, _, passed, n = min(hard, key=lambda p: p[4] / p[5])
        lines.append(v.t(NEXT["property"], property=g, assignment=a, rate=v.pct(passed / n)))
    refused = [s for s in skipped if s.startswith(("refused", "skipped"))]
    if refused:
        lines.append(v.t(NEXT["refused"], n=len(refused)))
    if not held and not broken and not untouched:
        lines.append(v.t(NEXT["nothing"]))
    if handed:
        lines.append(v.t(NEXT["feedback"], folder=str(out / "feedback")))
    return lines


def _table(v: View, heads: list[str], rows: list[str], css: str = "") -> str:
    head = "".join(f"<th scope=\"col\">{v.t(COLUMNS[h])}</th>" for h in heads)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _mark(v: View, e: Entry) -> str:
    if not e.this_run:
        return ""
    text = v.t(THIS_RUN[e.this_run], previous=v.num(e.previous))
    return f' <span class="mark this-run-{e.this_run}">{text}</span>'


def _feedback_link(v: View, e: Entry, out: Path, shipped: set[str]) -> str:
    page = e.feedback(out)
    if page is None:
        return ""
    rel = "/".join(quote(p) for p in page.relative_to(out).parts)
    shipped.add(rel)
    return f'<a href="{rel}">{v.t(OPEN)}</a>'


def class_view(klass: ClassList, skipped: list[str], *, out: Path, db_url: str, graded_now: int,
               header: str | None = None, language: str | None = None) -> str:
    """The whole page."""
    v = View(language or instructor_language())
    out = Path(out)
    mistakes = common_mistakes(klass, v.language)
    props = properties(klass)
    handed = [e for e in klass.entries if e.submitted]
    look = [e for e in klass.entries if to_look_at(e)]
    shipped: set[str] = set()
    parts = [f"<h1>{v.t(TITLE)}</h1>",
             f"<p>{v.t(SUBTITLE, gradebook=textsafe.line(dburl.shown(db_url)), when=time.strftime('%Y-%m-%d %H:%M'))}</p>"]
    if header:
        parts.append(f"<p>{_e(header)}</p>")
    figures = (len(klass.students), f"{len(handed)} / {len(klass.entries)}", graded_now,
               len({(e.student, e.assignment) for e in look}))
    parts.append('<dl class="figures">' + "".join(f'<div><dt>{v.t(label)}</dt><dd class="figure">{value}</dd></div>'
                                                  for label, value in zip(FIGURES, figures)) + "</dl>")
    parts.append(f'<h2 id="next">{v.t(SECTIONS["next"])}</h2><ul class="next">'
                 + "".join(f"<li>{line}</li>" for line in next_steps(v, klass, skipped, out, mistakes, props)) + "</ul>")

    parts.append(f'<h2 id="scores">{v.t(SECTIONS["scores"])}</h2>')
    for a in sorted(klass.notebooks):
        scores = [e.score for e in klass.of(a) if e.submitted]
        most = max((e.max_score for e in klass.of(a) if e.max_score is not None), default=0.0)
        if not scores:
            continue
        caption = v.t(DIST_CAPTION, n=len(scores), mean=v.num(statistics.mean(scores)),
                      median=v.num(statistics.median(scores)), most=v.num(most))
        parts.append(f'<figure class="chart" id="scores-{_e(a)}"><figcaption><strong>{_e(a)}</strong></figcaption>'
                     f"{histogram(scores, most, v.t(DIST_LABEL, assignment=a))}<figcaption>{caption}</figcaption></figure>")

    parts.append(f'<h2 id="properties">{v.t(SECTIONS["properties"])}</h2>')
    rows = [f'<tr class="property"><td>{_e(a)}</td><td><code>{_e(g)}</code></td><td class="num">{v.num(points)}</td>'
            f'<td class="num passed">{v.t(PASSED_OF, passed=passed, n=n)}</td>'
            f'<td class="num rate">{v.pct(passed / n) if n else ""} {rate_bar(passed / n) if n else ""}</td></tr>'
            for a, _, g, points, passed, n in props]
    parts.append(_table(v, ["assignment", "property", "points", "passed", "rate"], rows, "properties"))

    parts.append(f'<h2 id="mistakes">{v.t(SECTIONS["mistakes"])}</h2>')
    if mistakes:
        rows = [f'<tr class="mistake"><td>{_e(text)}</td><td>{", ".join(_e(w) for w in where)}</td>'
                f'<td class="num count">{len(who)}</td><td>{", ".join(learner(klass, s) for s in who)}</td></tr>'
                for text, where, who in mistakes]
        parts.append(_table(v, ["mistake", "property", "learners", "who"], rows, "mistakes"))
    else:
        parts.append(f"<p>{v.t(NO_MISTAKES)}</p>")

    parts.append(f'<h2 id="look">{v.t(SECTIONS["look"])}</h2>')
    if look:
        rows = []
        for e in sorted(look, key=lambda e: (ORDER.index(e.status.split(":")[0]), e.student, e.assignment)):
            why = "; ".join(v.t(REASONS.get(s.split(":")[0], s)) for s in e.statuses)
            details = (f"<details><summary>{v.t(DETAILS)}</summary><pre>" + "\n".join(_e(ln) for ln in e.lines)
                       + "</pre></details>") if e.lines else ""
            rows.append(f'<tr class="look"><td class="learner">{learner(klass, e.student)}</td>'
                        f"<td>{_e(e.assignment)}/{_e(e.notebook)}</td><td>{v.status(e.status)}</td>"
                        f'<td>{why}{details}</td><td>{_feedback_link(v, e, out, shipped)}</td></tr>')
        parts.append(_table(v, ["learner", "notebook", "status", "why", "feedback"], rows, "look"))
    else:
        parts.append(f"<p>{v.t(NO_LOOK)}</p>")

    parts.append(f'<h2 id="totals">{v.t(SECTIONS["totals"])}</h2>')
    assignments = sorted(klass.notebooks)
    head = "".join(f'<th scope="col">{_e(a)}</th>' for a in assignments)
    rows = []
    for s in klass.students:
        cells, sum_score, sum_max = [], 0.0, 0.0
        for a in assignments:
            mine = [e for e in klass.of(a) if e.student == s]
            score = sum(e.score or 0.0 for e in mine if e.submitted)
            most = sum(e.max_score or 0.0 for e in mine)
            sum_score, sum_max = sum_score + score, sum_max + most
            worst = min((e.status for e in mine), key=lambda st: ORDER.index(st.split(":")[0]), default="graded")
            shown = v.num(score) if any(e.submitted for e in mine) else "–"
            cells.append(f'<td class="num score">{shown} / {v.num(most)}<br>'
                         f'{v.status(worst)}{"".join(_mark(v, e) for e in mine)}</td>')
        rows.append(f'<tr class="learner-total"><th scope="row" class="learner">{learner(klass, s)}</th>'
                    f'{"".join(cells)}<td class="num total">{v.num(sum_score)} / {v.num(sum_max)}</td></tr>')
    parts.append(f'<table class="totals"><thead><tr><th scope="col">{v.t(COLUMNS["learner"])}</th>{head}'
                 f'<th scope="col">{v.t(COLUMNS["total"])}</th></tr></thead><tbody>{"".join(rows)}</tbody></table>')

    if skipped:
        parts.append(f'<h2 id="refused">{v.t(SECTIONS["refused"])}</h2><ul class="refused">'
                     + "".join(f"<li>{_e(s)}</li>" for s in skipped) + "</ul>")
    body = sanitise("\n".join(parts), Links(shipped=shipped))
    return compose(body, [CSS, georgian_css() if v.language == "ka" else ""], gettext(TITLE, v.language), v.language)


def write_class_view(path: Path, klass: ClassList, skipped: list[str], **kwargs) -> None:
    """Write :func:`class_view` to ``path`` (whole, or not at all)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(class_view(klass, skipped, **kwargs), encoding="utf-8")
    os.replace(tmp, path)
