"""Downloads and launch buttons of the notebook chapters.

- Downloads: every chapter that is a notebook offers it as .ipynb (the notebook MyST-NB
  wrote to _build/jupyter_execute, with a first cell that installs the course package
  and what else the chapter imports when they are missing) beside its MyST source (.md)
  in the theme's download button.
- Launch buttons (JupyterHub through nbgitpuller, Colab), configured in _config.yml only
  (``repository: url:`` and ``launch_buttons:``) and off while the repository address is
  empty. The chapters are MyST-markdown files, which neither Colab nor a plain JupyterLab
  opens as notebooks, so both buttons open the chapter's notebook as the published book
  serves it, ``_sources/<page>.ipynb`` on the branch named by
  ``launch_buttons: notebooks_branch:``.
"""
from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlencode

LAUNCH_KEYS = ("jupyterhub_url", "colab_url", "binderhub_url", "deepnote_url", "jupyterlite_url")

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


def setup(app):
    app.connect("config-inited", _take_over_launch_buttons)
    app.connect("html-page-context", _notebook_downloads_and_launch, priority=499)
    app.connect("html-page-context", _add_launch_group, priority=502)
