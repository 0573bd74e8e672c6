"""The course book's own Sphinx extension, one module per concern:

- ``editions``: the German and Georgian editions on top of Sphinx's gettext catalogs
  (Graphviz labels, numbers the edition's way, the language menu, hreflang links); the
  figures and tables drawn per language are picked by ``andrea_ref.book_outputs``, a
  MyST-NB mime renderer registered through MyST-NB's entry point (pyproject.toml);
- ``glue``: ``{glue:...}`` inside translated messages (a guarded patch of MyST-NB);
- ``figures``: alt text of figures and diagrams translated like the prose;
- ``launch``: every notebook chapter's .ipynb download and the launch buttons;
- ``exercises``: exercises numbered per chapter, unique ids inside exercises and solutions;
- ``bibliography``: the pybtex style "andrea" ("Author et al., Year");
- ``layout``: book/_static/andrea.css on every page (code scrolls instead of wrapping,
  wide math and tables scroll inside themselves with a visible cue, figures with panels
  side by side stay legible on a phone, long names break only between their parts);
- ``thebe``: the unused live-code scripts dropped from the pages.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # andrea_ref from this checkout
    sys.path.insert(0, str(ROOT))

from andrea_ref.book_outputs import edition_language, localise_html_numbers, localise_number  # noqa: E402

from . import bibliography, editions, exercises, figures, glue, launch, layout, thebe  # noqa: E402
from .editions import edition_url  # noqa: E402
from .launch import SETUP_MARK, github_parts, launch_links, setup_cell  # noqa: E402

__all__ = ["SETUP_MARK", "edition_language", "edition_url", "github_parts", "launch_links",
           "localise_html_numbers", "localise_number", "setup_cell"]


def setup(app):
    for module in (bibliography, launch, editions, glue, figures, exercises, layout, thebe):
        module.setup(app)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
