"""Small Sphinx adjustments for the course book.

- Thebe: the book has no live-code buttons, but Jupyter Book always loads the
  sphinx-thebe extension, whose inline configuration script ends up twice on every
  page and makes the browser report "Identifier 'THEBE_JS_URL' has already been
  declared". Its scripts are dropped from the pages.
- Layout: book/_static/andrea.css (long outputs wrap, wide math and tables scroll
  inside themselves, numbers computed at build time read as body text).
- Downloads: every chapter that is a notebook offers it as .ipynb (the notebook
  MyST-NB wrote to _build/jupyter_execute, with a first cell that installs the
  course package and what else the chapter imports when they are missing) beside its
  MyST source (.md) in the theme's download button.
- Launch buttons (JupyterHub through nbgitpuller, Colab), configured in _config.yml
  only (``repository: url:`` and ``launch_buttons:``) and off while the repository
  address is empty. The chapters are MyST-markdown files, which neither Colab nor a
  plain JupyterLab opens as notebooks, so both buttons open the chapter's
  notebook as the published book serves it, ``_sources/<page>.ipynb`` on the branch
  named by ``launch_buttons: notebooks_branch:``.
- Editions: the book is built once per language (English, German, Georgian; see
  scripts/build_book.py), the prose translated by Sphinx's gettext catalogs
  (book/locales). On top of that this extension
  * shows each edition its own figures and tables: a chapter draws them once per
    language (andrea_ref.i18n.localised) and the output carries the translations in
    its metadata, which a MyST-NB mime renderer reads;
  * translates the alt text of figures through the chapter's catalog (Sphinx does not
    extract it from notebook outputs) and the labels of Graphviz diagrams through the
    package's catalog (andrea_ref/locales, figures.po);
  * writes numbers computed at build time (glue) the edition's way: decimal comma and
    grouped thousands in German and Georgian;
  * puts a language menu in every page's header (book/_templates/andrea-language.html)
    and hreflang links in its head.
- References: the pybtex style "andrea" labels the bibliography "Author et al. Year",
  the way ``bibtex_reference_style: author_year`` cites in the text.
"""
from __future__ import annotations

import contextvars
import dataclasses
import json
import re
import sys
from pathlib import Path
from urllib.parse import urlencode

from docutils import nodes
from sphinx.transforms import SphinxTransform

STATIC = Path(__file__).resolve().parent.parent / "_static"
LAUNCH_KEYS = ("jupyterhub_url", "colab_url", "binderhub_url", "deepnote_url", "jupyterlite_url")


# --------------------------------------------------------------------------- thebe
def _is_thebe(script) -> bool:
    filename = str(getattr(script, "filename", script) or "")
    body = str(getattr(script, "attributes", {}).get("body", "") or "")
    return "THEBE_JS_URL" in body or filename.endswith("sphinx-thebe.js") or "thebe@" in filename


def _drop_thebe(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if scripts:
        context["script_files"] = [s for s in scripts if not _is_thebe(s)]


# ------------------------------------------------------------------ launch buttons
def github_parts(repository_url: str) -> tuple[str, str] | None:
    """(owner, repo) of a GitHub repository address, or None if it is not one."""
    url = (repository_url or "").strip().rstrip("/")
    if url.endswith(".git"):
        url = url[:-4]
    marker = "github.com/"
    if marker not in url:
        return None
    parts = url.split(marker, 1)[1].split("/")
    if len(parts) < 2 or not parts[0] or not parts[1]:
        return None
    return parts[0], parts[1]


def launch_links(launch: dict, repository_url: str, pagename: str) -> list[dict]:
    """The launch buttons of one notebook page: [{"text", "url", ...}], empty when off.

    Off while the repository address is empty (or not a GitHub repository) or the
    branch serving the built book is not named. JupyterHub: nbgitpuller clones that
    branch into a folder named after the repository and opens the chapter's notebook
    in the chosen interface. Colab: opens the same notebook from GitHub.
    """
    parts = github_parts(repository_url)
    branch = str(launch.get("notebooks_branch") or "").strip()
    if parts is None or not branch:
        return []
    owner, repo = parts
    notebook = f"_sources/{pagename}.ipynb"
    ui = {"classic": "tree", "jupyterlab": "lab/tree"}.get(launch.get("notebook_interface", "jupyterlab"), "lab/tree")
    links = []
    hub = str(launch.get("jupyterhub_url") or "").strip().rstrip("/")
    if hub:
        query = urlencode({"repo": f"https://github.com/{owner}/{repo}", "branch": branch,
                           "urlpath": f"{ui}/{repo}/{notebook}"}, safe="/")
        links.append({"text": "JupyterHub", "tooltip": "Launch on JupyterHub",
                      "icon": "_static/images/logo_jupyterhub.svg",
                      "url": f"{hub}/hub/user-redirect/git-pull?{query}"})
    colab = str(launch.get("colab_url") or "").strip().rstrip("/")
    if colab:
        links.append({"text": "Colab", "tooltip": "Launch on Colab",
                      "icon": "_static/images/logo_colab.png",
                      "url": f"{colab}/github/{owner}/{repo}/blob/{branch}/{notebook}"})
    return links


def _take_over_launch_buttons(app, config):
    """Keep the launch settings for ourselves: the theme's own buttons would point at
    the .md files, and it fails outright when a provider is set but no repository."""
    options = dict(config.html_theme_options or {})
    app.andrea_launch = dict(options.get("launch_buttons") or {})
    app.andrea_repository_url = str(options.get("repository_url") or "")
    options["launch_buttons"] = {key: ("" if key in LAUNCH_KEYS else value)
                                 for key, value in app.andrea_launch.items() if key != "thebe"}
    options["launch_buttons"]["thebe"] = False
    config.html_theme_options = options
    # book/_static/andrea.css (added to every page in setup)
    config.html_static_path = list(config.html_static_path or []) + [str(STATIC)]


def _is_notebook(app, pagename) -> bool:
    return "kernelspec" in app.env.metadata.get(pagename, {})


def _notebook_downloads_and_launch(app, pagename, templatename, context, doctree):
    """Runs before the theme builds its header buttons (priority 501)."""
    if doctree is None or not _is_notebook(app, pagename):
        return
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if executed.is_file():
        target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        nb = json.loads(executed.read_text(encoding="utf-8"))
        nb["cells"].insert(0, setup_cell(getattr(app, "andrea_repository_url", "")))
        target.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        context["ipynb_source"] = f"{pagename}.ipynb"


SETUP_MARK = "# Set-up for running this chapter on its own"


def setup_cell(repository_url: str) -> dict:
    """The first cell of a downloaded chapter: installs what the chapter imports when it
    is missing (the course package, from the course repository when its address is set
    in _config.yml; matplotlib; myst-nb for ``glue``), so the notebook runs outside the
    repository, e.g. in Colab or on a JupyterHub."""
    url = repository_url.strip().rstrip("/")
    package = repr(f"andrea-block-lab @ git+{url}") if url else "None"
    source = f"""{SETUP_MARK} (outside the course repository): what the
# chapter imports is installed when it is missing. Inside the course's own environment
# this cell does nothing.
import importlib.util

_course_package = {package}
_missing = [pip_name for module, pip_name in (("andrea_ref", _course_package),
                                              ("matplotlib", "matplotlib"),
                                              ("myst_nb", "myst-nb"))
            if importlib.util.find_spec(module) is None]
if None in _missing:
    raise ImportError("the course package andrea_ref is not installed: install the wheel of "
                      "the learner's kit (pip install andrea_block_lab-*.whl), then run again")
if _missing:
    get_ipython().run_line_magic("pip", "install --quiet " + " ".join(repr(m) for m in _missing))
"""
    return {"cell_type": "code", "execution_count": None, "metadata": {"tags": ["course-setup"]},
            "outputs": [], "source": source.splitlines(keepends=True)}


def _add_launch_group(app, pagename, templatename, context, doctree):
    """After the theme's buttons (priority 502): the launch group, when it is on."""
    if doctree is None or not _is_notebook(app, pagename) or "header_buttons" not in context:
        return
    links = launch_links(getattr(app, "andrea_launch", {}), getattr(app, "andrea_repository_url", ""), pagename)
    if not links:
        return
    context["header_buttons"].append({
        "type": "group", "tooltip": "Launch interactive content", "icon": "fas fa-rocket",
        "label": "launch-buttons",
        "buttons": [{"type": "link", "label": f"launch-{link['text'].lower()}", **link} for link in links],
    })


# ------------------------------------------------------------------------ editions
ROOT = STATIC.parent.parent


def _i18n():
    """andrea_ref.i18n, from this checkout (the book builds with the repository on sys.path)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from andrea_ref import i18n
    return i18n


def edition_language(config) -> str:
    language = getattr(config, "language", None) or "en"
    return language if language in _i18n().LANGUAGES else "en"


class LocalisedOutputs:
    """MyST-NB mime renderer: an output drawn per language shows the edition's own.

    MyST-NB looks mime renderers up as entry points of installed distributions; the
    book's extension is not one, so setup() adds this one to the list MyST-NB reads.
    """

    @staticmethod
    def handle_mime(renderer, data, inline):
        translations = data.output_metadata.get(_i18n().OUTPUT_KEY)
        if not isinstance(translations, dict):
            return None
        # render the rest as usual: without the translations, so this is not asked again
        rest = {k: v for k, v in data.output_metadata.items() if k != _i18n().OUTPUT_KEY}
        language = edition_language(renderer.renderer.sphinx_env.config)
        content = translations.get(language, {}).get(data.mime_type, data.content) \
            if language != "en" else data.content
        if data.mime_type == "text/html" and isinstance(content, str):
            content = localise_html_numbers(content, language)
        local = dataclasses.replace(data, content=content, output_metadata=rest)
        if inline:
            return renderer.render_mime_type_inline(local)
        return renderer.render_mime_type(local)


def _register_mime_renderer() -> None:
    from myst_nb.core import render
    load = render.load_mime_renders
    if getattr(load, "andrea_wrapped", False):
        return

    def load_with_translations():
        return [LocalisedOutputs, *load()]

    load_with_translations.andrea_wrapped = True
    render.load_mime_renders = load_with_translations


# The document whose messages Sphinx is translating (set while its Locale transform runs).
_translating = contextvars.ContextVar("andrea_translating", default=None)


def _glue_in_translations() -> None:
    """Let ``{glue:...}`` roles work inside translated messages.

    Sphinx parses each translated message as a small document of its own, which has
    none of the notebook's glued values, so MyST-NB would report every key missing.
    MyST-NB drops its renderer (which holds the glued values) from a document once
    the document is parsed, so the renderer of the latest notebook that looked up a
    value is kept here, and keys a message does not find are looked up in it when that
    notebook is the document being translated.
    """
    from myst_nb.core.variables import RetrievalError
    from myst_nb.ext.glue import directives, roles, utils
    from sphinx.transforms import i18n as sphinx_i18n
    if getattr(utils.retrieve_glue_data, "andrea_wrapped", False):
        return
    original = utils.retrieve_glue_data

    kept: dict[str, object] = {}

    def retrieve_glue_data(document, key):
        if "nb_renderer" in document:
            kept.clear()
            kept[document.get("source")] = document["nb_renderer"]
        try:
            return original(document, key)
        except RetrievalError:
            outer = _translating.get()
            renderer = kept.get(outer.get("source")) if outer is not None and outer is not document else None
            if renderer is None:
                raise
            return original({"nb_renderer": renderer}, key)

    retrieve_glue_data.andrea_wrapped = True
    for module in (utils, roles, directives):
        module.retrieve_glue_data = retrieve_glue_data

    locale_apply = sphinx_i18n.Locale.apply

    def apply(self, **kwargs):
        token = _translating.set(self.document)
        try:
            return locale_apply(self, **kwargs)
        finally:
            _translating.reset(token)

    sphinx_i18n.Locale.apply = apply


ALT_CLASS = "andrea-alt-text"


def _alt_anchor(image):
    """Where a figure's alt-text message goes: after the image, or after the whole output
    when the image is one of a notebook output's formats (MyST-NB keeps one of them
    later, per builder)."""
    node = image
    while node.parent is not None and not isinstance(node.parent, nodes.document):
        if node.parent.get("nb_element") == "mime_bundle":
            return node.parent
        node = node.parent
    return image


class AltTextToMessage(SphinxTransform):
    """Before translation: a figure's alt text becomes a hidden paragraph, a message the
    gettext builder extracts and the Locale transform translates."""
    default_priority = 15  # sphinx.transforms.i18n.Locale runs at 20

    def apply(self, **kwargs):
        done = set()
        for image in list(self.document.findall(nodes.image)):
            alt = image.get("alt")
            anchor = _alt_anchor(image)
            if not alt or anchor.parent is None or (id(anchor), alt) in done:
                continue
            done.add((id(anchor), alt))
            para = nodes.paragraph(alt, alt, classes=[ALT_CLASS])
            para["andrea_alt"] = alt
            para.source = image.source or self.document["source"]
            para.line = image.line or 1
            anchor.parent.insert(anchor.parent.index(anchor) + 1, para)


class MessageToAltText(SphinxTransform):
    """After translation: the (translated) paragraph goes back into the image's alt text."""
    default_priority = 21

    def apply(self, **kwargs):
        if self.app.builder.name == "gettext":
            return  # the message catalogs are extracted from the paragraphs
        for para in list(self.document.findall(nodes.paragraph)):
            if ALT_CLASS not in para["classes"]:
                continue
            parent = para.parent
            index = parent.index(para)
            anchor = parent[index - 1] if index > 0 else None
            if anchor is not None:
                images = [anchor] if isinstance(anchor, nodes.image) else list(anchor.findall(nodes.image))
                for image in images:
                    if image.get("alt") == para.get("andrea_alt"):
                        image["alt"] = para.astext()
            parent.remove(para)


_GRAPHVIZ_LABEL = re.compile(r'label="((?:[^"\\]|\\.)*)"')


class TranslateGraphviz(SphinxTransform):
    """The quoted labels of Graphviz diagrams, through the package's catalog."""
    default_priority = 21

    def apply(self, **kwargs):
        language = edition_language(self.config)
        if language == "en":
            return
        from sphinx.ext.graphviz import graphviz
        gettext = _i18n().gettext

        def swap(m):
            label = m.group(1)
            stripped = label.strip()
            translated = gettext(stripped, language) if stripped else stripped
            return 'label="' + label.replace(stripped, translated.replace('"', '\\"'), 1) + '"'

        for node in self.document.findall(graphviz):
            node["code"] = _GRAPHVIZ_LABEL.sub(swap, node["code"])


def localise_number(text: str, language: str) -> str:
    """A number as the edition writes it: German and Georgian use a decimal comma and
    group thousands with a narrow no-break space (92,331,264 -> 92 331 264, 0.02 -> 0,02)."""
    if language == "en":
        return text

    def one(m):
        whole, frac, exponent = m.group(1), m.group(2) or "", m.group(3) or ""
        return whole.replace(",", "\u202f") + ("," + frac[1:] if frac else "") + exponent

    return re.sub(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?([eE][+-]?\d+)?(?![\w.])", one, text)


_TAG = re.compile(r"(<[^>]*>)")


def localise_html_numbers(html: str, language: str) -> str:
    """localise_number on the text of an HTML table or list drawn by a chapter (not on
    its tags, nor inside <code> or <pre>)."""
    if language == "en":
        return html
    out, verbatim = [], 0
    for part in _TAG.split(html):
        if part.startswith("<"):
            name = re.match(r"</?\s*([a-zA-Z0-9]+)", part)
            if name and name.group(1).lower() in ("code", "pre", "script", "style"):
                verbatim += -1 if part.startswith("</") else (0 if part.endswith("/>") else 1)
                verbatim = max(verbatim, 0)
            out.append(part)
        else:
            out.append(part if verbatim else localise_number(part, language))
    return "".join(out)


class LocaliseGluedNumbers(SphinxTransform):
    """Numbers pasted into the prose by ``{glue:text}`` in the edition's notation."""
    default_priority = 22

    def apply(self, **kwargs):
        language = edition_language(self.config)
        if language == "en":
            return
        for node in list(self.document.findall(nodes.inline)):
            classes = node.get("classes", ())
            # {glue:text} pastes "pasted-text"; {glue:} pastes the output's text/plain
            if "pasted-text" not in classes and not {"output", "text_plain"} <= set(classes):
                continue
            for text in list(node.findall(nodes.Text)):
                new = localise_number(str(text), language)
                if new != str(text):
                    text.parent.replace(text, nodes.Text(new))


def edition_url(pagename: str, current: str, target: str) -> str:
    """The relative address of `pagename` in edition `target`, seen from edition `current`.

    English is at the root of the site (_build/html), the others in a folder each
    (_build/html/de, _build/html/ka)."""
    up = "../" * pagename.count("/") + ("../" if current != "en" else "")
    return up + ("" if target == "en" else f"{target}/") + f"{pagename}.html"


TEMPLATES = STATIC.parent / "_templates"


def _add_language_menu(app, config):
    """The language menu (book/_templates/andrea-language.html) in every page's header."""
    config.templates_path = list(config.templates_path or []) + [str(TEMPLATES)]
    options = dict(config.html_theme_options or {})
    end = options.get("article_header_end") or ["article-header-buttons.html"]
    end = [end] if isinstance(end, str) else list(end)
    if "andrea-language.html" not in end:
        end.insert(0, "andrea-language.html")
    options["article_header_end"] = end
    config.html_theme_options = options


def _language_links(app, pagename, templatename, context, doctree):
    """The menu's links, and hreflang links to the other editions in the page's head."""
    current = edition_language(app.config)
    i18n = _i18n()
    links = [{"code": lang, "name": i18n.LANGUAGE_NAMES[lang], "url": edition_url(pagename, current, lang),
              "current": lang == current} for lang in i18n.LANGUAGES]
    context["andrea_languages"] = links
    context["andrea_language_code"] = current
    context["andrea_language_label"] = {"en": "Language", "de": "Sprache", "ka": "ენა"}[current]
    context["metatags"] = context.get("metatags", "") + "".join(
        f'\n<link rel="alternate" hreflang="{link["code"]}" href="{link["url"]}" />'
        for link in links if not link["current"])


# --------------------------------------------------------------------- references
def _register_bibliography_style() -> None:
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


# -------------------------------------------------------------------------- setup
def setup(app):
    _register_bibliography_style()
    app.connect("config-inited", _take_over_launch_buttons)
    app.connect("html-page-context", _notebook_downloads_and_launch, priority=499)
    app.connect("html-page-context", _add_launch_group, priority=502)
    app.connect("config-inited", _add_language_menu)
    app.connect("html-page-context", _language_links)
    app.connect("html-page-context", _drop_thebe, priority=900)
    _register_mime_renderer()
    _glue_in_translations()
    app.add_transform(AltTextToMessage)
    app.add_transform(MessageToAltText)
    app.add_transform(TranslateGraphviz)
    app.add_transform(LocaliseGluedNumbers)
    app.add_css_file("andrea.css")
    return {"parallel_read_safe": True, "parallel_write_safe": True}
