"""The course's JupyterLab: the book served by the Jupyter server, and the learner's kit started with one command.

* ``andrea_lab.server`` is a Jupyter server extension. It serves the built course book at
  ``{base_url}andrea-book/`` (all three editions: ``andrea-book/``, ``andrea-book/de/``,
  ``andrea-book/ka/``), so that a chapter opens in a browser tab of its own, styled, with
  its math and figures, from the same server as the notebooks. It also hides nbgrader's
  Assignment List where no exchange is set up (the kit on a laptop), where it could only
  say "No courses found".
* ``python -m andrea_lab`` (or ``andrea-lab``) starts the learner's kit; ``andrea-lab
  validate NOTEBOOK`` runs nbgrader's validation with every message in full and fails
  when a check fails (``andrea_lab.launch``, ``andrea_lab.validate``).

**Chapter links.** A notebook links a chapter as ``/hub/user-redirect/andrea-book/book/<page>.html``
(:func:`chapter_link`; a translated notebook ``.../andrea-book/de/book/...``). JupyterLab
opens a link that starts with ``/`` in a new browser tab instead of treating it as a file
beside the notebook (a relative link would open the page in its sandboxed HTML viewer,
where no style sheet, script or image loads). ``/hub/user-redirect/`` is JupyterHub's
address for "this path on the user's own server", whatever the user's ``base_url``
(``/user/<name>/``); on a single server (``make lab``, the kit) the extension answers it
itself with a redirect to its own ``andrea-book/``. The notebooks are the same file
everywhere, so the link cannot name a user.

This package imports neither torch nor the course package: the Jupyter server loads it.
"""
from __future__ import annotations

import re

BOOK_PATH = "andrea-book"
LINK_PREFIX = f"/hub/user-redirect/{BOOK_PATH}/"

# A chapter link as the notebooks write it: the edition's folder (none for English),
# the page (book/<name>) and an optional anchor.
CHAPTER_LINK = re.compile(
    re.escape(LINK_PREFIX) + r"(?:(?P<lang>[a-z]{2})/)?(?P<page>book/[\w.-]+?)\.html(?P<anchor>#[\w.-]*)?")


def chapter_link(page: str, language: str = "en", anchor: str = "") -> str:
    """The link a notebook writes for a chapter: ``chapter_link("book/05_mlp_and_gelu", "de")``."""
    edition = "" if language == "en" else f"{language}/"
    return f"{LINK_PREFIX}{edition}{page}.html{anchor}"


def edition_links(text: str, language: str) -> str:
    """``text`` with every chapter link moved to the book's ``language`` edition."""
    return CHAPTER_LINK.sub(
        lambda m: chapter_link(m.group("page"), language, m.group("anchor") or ""), text)


def _jupyter_server_extension_points():
    return [{"module": "andrea_lab.server"}]
