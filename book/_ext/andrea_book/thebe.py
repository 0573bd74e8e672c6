"""Thebe: the book has no live-code buttons, but Jupyter Book always loads the sphinx-thebe
extension, whose inline configuration script ends up twice on every page and makes the
browser report "Identifier 'THEBE_JS_URL' has already been declared". Its scripts are
dropped from the pages."""
from __future__ import annotations


def _is_thebe(script) -> bool:
    filename = str(getattr(script, "filename", script) or "")
    body = str(getattr(script, "attributes", {}).get("body", "") or "")
    return "THEBE_JS_URL" in body or filename.endswith("sphinx-thebe.js") or "thebe@" in filename


def drop_thebe(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if scripts:
        context["script_files"] = [s for s in scripts if not _is_thebe(s)]


def setup(app):
    app.connect("html-page-context", drop_thebe, priority=900)
