"""References: the pybtex style "andrea" labels the bibliography "Author et al. Year", the
way ``bibtex_reference_style: author_year`` cites in the text; the entries of a
bibliography are the items of its list for assistive technology.

Docutils writes a bibliography as ``<div role="list" class="citation-list">`` holding
``<div class="citation" role="doc-biblioentry">``. DPUB-ARIA 1.1 deprecates
doc-biblioentry, so browsers and checkers (axe-core) give such an entry no role: the
list then seems to hold the entries' links and paragraphs, not items. Each entry gets
the role ``listitem`` (the role doc-biblioentry was a kind of) instead.
"""
from __future__ import annotations

import re

_ENTRY_ROLE = re.compile(r'(<div class="citation"[^>]*?\srole=")doc-biblioentry(")')


def register_bibliography_style() -> None:
    from pybtex.plugin import register_plugin
    from pybtex.style.formatting.plain import Style as PlainStyle
    from pybtex.style.labels import BaseLabelStyle

    class AuthorYearLabels(BaseLabelStyle):
        """"Vaswani et al., 2017", "Hendrycks and Gimpel, 2016": as the text cites them."""

        def format_labels(self, sorted_entries):
            seen: dict[str, int] = {}
            labels = [self._label(entry) for entry in sorted_entries]
            totals = {label: labels.count(label) for label in labels}
            for label in labels:
                if totals[label] > 1:  # two works by the same authors in one year: 2020a, 2020b
                    seen[label] = seen.get(label, 0) + 1
                    label += "abcdefghijklmnopqrstuvwxyz"[seen[label] - 1]
                yield label

        @staticmethod
        def _label(entry) -> str:
            persons = entry.persons.get("author") or entry.persons.get("editor") or []
            names = [" ".join(p.prelast_names + p.last_names) for p in persons]
            names = [n.replace("{", "").replace("}", "") for n in names]
            if not names:
                who = entry.fields.get("organization") or entry.fields.get("title", "Anon.").split(":")[0]
            elif len(names) == 1:
                who = names[0]
            elif len(names) == 2:
                who = f"{names[0]} and {names[1]}"
            else:
                who = f"{names[0]} et al."
            return f"{who}, {entry.fields.get('year', 'n.d.')}"

    class AndreaStyle(PlainStyle):
        default_label_style = AuthorYearLabels
        default_sorting_style = "author_year_title"

    register_plugin("pybtex.style.formatting", "andrea", AndreaStyle, force=True)


def entries_as_list_items(html: str) -> str:
    """``html`` with every bibliography entry's role doc-biblioentry replaced by listitem."""
    return _ENTRY_ROLE.sub(r"\1listitem\2", html)


def _on_page_context(app, pagename, templatename, context, doctree):
    if "body" in context and "doc-biblioentry" in context["body"]:
        context["body"] = entries_as_list_items(context["body"])


def setup(app):
    register_bibliography_style()
    app.connect("html-page-context", _on_page_context)
