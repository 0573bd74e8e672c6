"""The Jupyter server extension: the course book at ``{base_url}andrea-book/``.

Enable it with ``"andrea_lab": true`` in ``ServerApp.jpserver_extensions`` (``lab/learner/``
and ``lab/instructor/`` do; so does the kit's ``jupyter-config/``). The book's folder is
``c.AndreaBook.directory`` or the environment variable ``ANDREA_BOOK_DIR``: the built
``_build/html`` (``make lab`` sets it), or the kit's ``book/`` (``andrea-lab`` sets it).

The pages are served like the server's own: only to a logged-in user, hidden files
refused; the files they load (style sheets, scripts, fonts, figures) to any request, as a
hub's browser fetches some of them without the credentials JupyterHub asks for. Unlike ``/files/`` they are not put in a CSP sandbox: the book is the course's
own build, and its scripts (MathJax, the theme) must run and load their style sheets,
fonts and images from the same origin. Without a book, ``andrea-book/`` answers 404
with a page that says how to get one.
"""
from __future__ import annotations

import os
from pathlib import Path

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import JupyterHandler
from jupyter_server.utils import url_path_join
from tornado import web
from traitlets import Unicode, default
from traitlets.config import Configurable

from . import BOOK_PATH, LINK_PREFIX

try:  # jupyter_server 2.13 and later: a handler open to everyone says so
    from jupyter_server.auth.decorator import allow_unauthenticated
except ImportError:  # pragma: no cover
    def allow_unauthenticated(method):
        return method

ASSIGNMENT_LIST_PLUGIN = "@jupyter/nbgrader:assignment-list"
ENV_VAR = "ANDREA_BOOK_DIR"


class AndreaBook(Configurable):
    directory = Unicode(help="The built course book (the folder holding index.html); "
                             f"default: ${ENV_VAR}").tag(config=True)

    @default("directory")
    def _default_directory(self):
        return os.environ.get(ENV_VAR, "")


def is_page(path: str) -> bool:
    """Whether ``path`` (inside the book) is one of its pages, or a folder (its index page)."""
    name = path.rsplit("/", 1)[-1]
    return not name or name.endswith((".html", ".htm")) or "." not in name


class BookHandler(JupyterHandler, web.StaticFileHandler):
    """The book: its pages for a logged-in user (``auth_resource``: reading files); the
    files a page loads (style sheets, scripts, fonts, figures) for any request. On a hub,
    a browser fetches fonts and MathJax's parts in CORS mode without the hub's XSRF token,
    and JupyterHub then ignores the login cookie: those requests would be sent to log in
    again, and the page would show without its fonts, math and diagrams. They are the
    published course's own files, the same for everyone."""

    auth_resource = "contents"

    @property
    def content_security_policy(self) -> str:
        # The book's pages embed their own diagrams (an <object> of an SVG file): a
        # frame of the same origin. JupyterHub's servers send frame-ancestors 'none' for
        # everything, which would leave each diagram an empty box.
        return "frame-ancestors 'self'"

    @allow_unauthenticated
    def head(self, path: str):
        return self.get(path, include_body=False)

    @allow_unauthenticated
    def get(self, path: str, include_body: bool = True):
        if is_page(path):
            return self._page(path, include_body)
        return web.StaticFileHandler.get(self, path, include_body=include_body)

    @web.authenticated
    @authorized
    def _page(self, path: str, include_body: bool):
        return web.StaticFileHandler.get(self, path, include_body=include_body)

    def set_extra_headers(self, path: str) -> None:
        # a rebuilt book is seen at once; 304 replies keep it cheap
        self.set_header("Cache-Control", "no-cache")

    def validate_absolute_path(self, root: str, absolute_path: str):
        path = super().validate_absolute_path(root, absolute_path)
        rel = os.path.relpath(path, os.path.abspath(root))
        if any(part.startswith(".") for part in Path(rel).parts):
            raise web.HTTPError(404)
        return path


MISSING = {
    "en": "The course book is not on this server. Build it with <code>make book</code> (in the "
          "repository), or start the learner's kit with <code>andrea-lab</code> in the kit's folder.",
    "de": "Das Kursbuch liegt nicht auf diesem Server. Baue es mit <code>make book</code> (im "
          "Repository), oder starte das Lernpaket mit <code>andrea-lab</code> in seinem Ordner.",
    "ka": "კურსის წიგნი ამ სერვერზე არ არის. ააგეთ იგი <code>make book</code> ბრძანებით (რეპოზიტორიაში), "
          "ან გაუშვით სასწავლო ნაკრები <code>andrea-lab</code> ბრძანებით ნაკრების საქაღალდეში.",
}


class MissingBookHandler(JupyterHandler):
    auth_resource = "contents"

    @web.authenticated
    @authorized
    def get(self, path: str = ""):
        self.set_status(404)
        self.set_header("Content-Type", "text/html; charset=UTF-8")
        body = "".join(f'<p lang="{lang}">{text}</p>' for lang, text in MISSING.items())
        self.finish(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>ANDREA Block Lab</title>"
                    f"</head><body><h1>ANDREA Block Lab</h1>{body}</body></html>")


class UserRedirectHandler(JupyterHandler):
    """``/hub/user-redirect/andrea-book/...`` on a server without a hub: this server's book."""

    @allow_unauthenticated
    def get(self, path: str):
        target = url_path_join(self.base_url, BOOK_PATH, path.lstrip("/"))
        if self.request.query:
            target += "?" + self.request.query
        self.redirect(target)


def exchange_missing(root_dir: str) -> str | None:
    """Where nbgrader's file-system exchange should be but is not (``None``: there is one,
    or another kind of exchange is configured). The configuration is read as nbgrader's
    Assignment List reads it: the server's working folder first, then Jupyter's config path."""
    try:
        from jupyter_core.paths import jupyter_config_path
        from nbgrader.apps import NbGrader
        from nbgrader.exchange import ExchangeFactory
        from nbgrader.exchange.default.exchange import Exchange
    except ImportError:
        return None
    try:
        app = NbGrader()
        app.log.setLevel("ERROR")  # a learner's lab need not have an nbgrader_config.py
        app.config_file_paths.append([os.getcwd(), root_dir, *jupyter_config_path()])
        app.load_config_file()
        factory = ExchangeFactory(config=app.config)
        if not (isinstance(factory.exchange, type) and issubclass(factory.exchange, Exchange)):
            return None
        root = factory.exchange(config=app.config).root
    except Exception:  # a configuration nbgrader itself will report: leave its tools as they are
        return None
    return None if os.path.isdir(root) else root


# nbgrader's Nbgrader menu lists the tools of these plugins: with all of them off it
# would be an empty menu, and goes too.
NBGRADER_MENU = "@jupyter/nbgrader:menu"
NBGRADER_MENU_TOOLS = ("@jupyter/nbgrader:assignment-list", "@jupyter/nbgrader:course-list",
                       "@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment")


def _hide_plugin(web_app, plugin: str) -> None:
    """Add ``plugin`` to the page config's disabled extensions (after any earlier hook),
    and nbgrader's menu once every tool it lists is disabled."""
    previous = web_app.settings.get("page_config_hook")

    def hook(handler, page_config):
        if previous is not None:
            page_config = previous(handler, page_config)
        disabled = page_config.get("disabledExtensions") or []
        if isinstance(disabled, dict):
            disabled = [k for k, v in disabled.items() if v]
        disabled = [*disabled, plugin]
        if all(tool in disabled for tool in NBGRADER_MENU_TOOLS):
            disabled.append(NBGRADER_MENU)
        page_config["disabledExtensions"] = disabled
        return page_config

    web_app.settings["page_config_hook"] = hook


def _load_jupyter_server_extension(serverapp) -> None:
    web_app = serverapp.web_app
    base_url = web_app.settings["base_url"]
    directory = AndreaBook(parent=serverapp).directory
    book = Path(directory).expanduser().resolve() if directory else None
    pattern = url_path_join(base_url, BOOK_PATH, "(.*)")
    handlers = []
    if book is not None and (book / "index.html").is_file():
        handlers.append((pattern, BookHandler, {"path": str(book), "default_filename": "index.html"}))
        serverapp.log.info("ANDREA Block Lab: the course book %s at %s/", book, url_path_join(base_url, BOOK_PATH))
    else:
        handlers.append((pattern, MissingBookHandler))
        serverapp.log.warning("ANDREA Block Lab: no course book (%s is %s): chapter links answer 404",
                              ENV_VAR, repr(directory) if directory else "unset")
    handlers.append((url_path_join(base_url, BOOK_PATH), web.RedirectHandler,
                     {"url": url_path_join(base_url, BOOK_PATH) + "/"}))
    if not os.environ.get("JUPYTERHUB_SERVICE_PREFIX"):
        # Not spawned by a hub: answer the hub's user-redirect for the book ourselves. At the
        # address's root, whatever base_url is: that is where the notebooks' links point.
        handlers.append((LINK_PREFIX + "(.*)", UserRedirectHandler))
    web_app.add_handlers(".*$", handlers)

    missing = exchange_missing(serverapp.root_dir)
    if missing is not None:
        _hide_plugin(web_app, ASSIGNMENT_LIST_PLUGIN)
        serverapp.log.info("ANDREA Block Lab: no nbgrader exchange at %s: the Assignment List is hidden "
                           "(hand in the notebook file as your instructor says)", missing)
