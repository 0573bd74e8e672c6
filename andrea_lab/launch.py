"""Start the learner's JupyterLab: the kit's one command, and what ``make lab`` shares with it.

    andrea-lab                       # in the kit's folder (or python -m andrea_lab)
    andrea-lab --lang de             # the German notebooks (ka: Georgian); default $ANDREA_LANG or English
    andrea-lab -- --port 8890        # anything after -- goes to JupyterLab
    andrea-lab validate notebooks/02_layernorm/layernorm.ipynb

The kit is found from the working folder (or one above it), or as the folder that holds
the environment this runs in (``<kit>/.venv``); ``--kit DIR`` names it. JupyterLab serves
the notebooks of the chosen language (``notebooks/``, ``notebooks-de/``, ``notebooks-ka/``)
and opens the first one; the chapter links open the kit's ``book/`` in a browser tab
(``andrea_lab.server``). Its configuration is the kit's ``jupyter-config/``, its settings
and open tabs are kept in ``<kit>/.lab-state/``, Jupyter's news pop-up is off (the setting
is the learner's to change), and a run as root says so and goes on (``--allow-root``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .server import ENV_VAR as BOOK_ENV

# JupyterLab's notification settings: no "Would you like to receive official Jupyter
# news?" toast over the notebook on the first start, and no update check (offline).
NEWS_SETTINGS = ("@jupyterlab/apputils-extension", "notification",
                 {"fetchNews": "false", "checkForUpdates": False})
ROOT_WARNING = ("warning: running as root: JupyterLab is started with --allow-root, and the "
                "notebooks' code runs as root too; use an ordinary account where you can")


def quiet_settings(settings_dir: Path) -> None:
    """Write JupyterLab's notification settings (news off) unless the user has their own."""
    package, plugin, values = NEWS_SETTINGS
    path = settings_dir / package / f"{plugin}.jupyterlab-settings"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values, indent=2) + "\n", encoding="utf-8")


def root_arguments() -> list[str]:
    """``--allow-root`` with a warning when running as root (JupyterLab refuses otherwise)."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        print(ROOT_WARNING, file=sys.stderr)
        return ["--allow-root"]
    return []


def lab_env(config_dir: Path, state: Path, book: Path | None = None,
            exchange: Path | None = None) -> dict[str, str]:
    """The environment of the learner's JupyterLab: its configuration folder, a folder of
    its own for settings and workspaces (news off), the book to serve, nbgrader's exchange."""
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["JUPYTER_CONFIG_DIR"] = str(config_dir)
    env["JUPYTERLAB_SETTINGS_DIR"] = str(state / "settings")
    env["JUPYTERLAB_WORKSPACES_DIR"] = str(state / "workspaces")
    quiet_settings(state / "settings")
    if book is not None:
        env[BOOK_ENV] = str(book)
    if exchange is not None:
        env["ANDREA_EXCHANGE"] = str(exchange)
    return env


def lab_command(root_dir: Path, default_url: str, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={root_dir}",
            f"--LabApp.default_url={default_url}", *root_arguments(), *extra]


def start(cmd: list[str], env: dict[str, str], cwd: Path):
    """Replace this process by JupyterLab, started in ``cwd``: nbgrader's Assignment List
    and Validate resolve their folder against the server's working folder, not its root."""
    os.chdir(cwd)
    os.execve(cmd[0], cmd, env)


# ----------------------------------------------------------------------------- the kit

def _is_kit(folder: Path) -> bool:
    return (folder / "notebooks").is_dir() and (folder / "jupyter-config").is_dir()


def find_kit(start_at: Path) -> Path | None:
    for folder in (start_at, *start_at.parents, Path(sys.prefix).parent):
        if _is_kit(folder):
            return folder
    return None


def kit_languages(kit: Path) -> list[str]:
    """``en`` and every language the kit has notebooks for (``notebooks-<lang>/``)."""
    return ["en", *sorted(p.name.split("-", 1)[1] for p in kit.glob("notebooks-*") if p.is_dir())]


def _first_notebook(folder: Path) -> Path | None:
    found = sorted(folder.glob("*/*.ipynb"))
    return found[0] if found else None


def ensure_kernel(notebook: Path) -> None:
    """Give this environment's kernel the name the notebooks carry, so that JupyterLab
    does not mark a notebook changed the moment its kernel starts (once; a read-only
    environment keeps the default name)."""
    try:
        spec = json.loads(notebook.read_text(encoding="utf-8"))["metadata"]["kernelspec"]
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
        try:
            current = KernelSpecManager().get_kernel_spec(spec["name"]).display_name
        except NoSuchKernel:
            current = None
        if current != spec["display_name"]:
            from ipykernel.kernelspec import install
            install(prefix=sys.prefix, kernel_name=spec["name"], display_name=spec["display_name"])
    except (OSError, KeyError, ValueError, ImportError):
        pass


def _fail(message: str) -> int:
    print(f"andrea-lab: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["validate"]:
        from .validate import main as validate
        return validate(argv[1:])
    ap = argparse.ArgumentParser(
        prog="andrea-lab", description="Start JupyterLab on the learner's kit (andrea-lab validate NOTEBOOK: check a notebook).",
        epilog="Arguments after -- go to JupyterLab, e.g. andrea-lab -- --port 8890 --no-browser")
    ap.add_argument("--kit", type=Path, help="the kit's folder (default: the working folder or one above it, "
                                             "or the folder holding this environment)")
    ap.add_argument("--lang", help="the notebooks' language: en, or one the kit has (de, ka); "
                                   "default: $ANDREA_LANG, else en")
    ours, extra = [], []
    if "--" in argv:
        at = argv.index("--")
        ours, extra = argv[:at], argv[at + 1:]
    else:
        ours = argv
    a = ap.parse_args(ours)

    if a.kit is not None:
        kit = a.kit.expanduser().resolve()
        if not _is_kit(kit):
            return _fail(f"--kit: {kit} is not a learner's kit (expected notebooks/ and jupyter-config/ in it)")
    else:
        kit = find_kit(Path.cwd().resolve())
        if kit is None:
            return _fail("no learner's kit here: run andrea-lab in the kit's folder "
                         "(the one holding notebooks/ and jupyter-config/), or pass --kit DIR")
    languages = kit_languages(kit)
    lang = (a.lang or os.environ.get("ANDREA_LANG", "")).strip() or "en"
    if lang not in languages:
        name = "--lang" if a.lang else "ANDREA_LANG"
        return _fail(f"{name} must be one of {', '.join(languages)}, got {lang!r}")
    try:
        import jupyterlab  # noqa: F401
        import nbgrader  # noqa: F401
    except ImportError as exc:
        return _fail(f"{exc.name} is not installed in this environment ({sys.prefix}): "
                     "install the kit's requirements.txt as its README says")

    notebooks = kit / ("notebooks" if lang == "en" else f"notebooks-{lang}")
    first = _first_notebook(notebooks)
    if first is None:
        return _fail(f"{notebooks} holds no notebooks")
    ensure_kernel(first)
    book = kit / "book"
    if not (book / "index.html").is_file():
        print(f"note: {book}/index.html is missing: the chapter links will not open", file=sys.stderr)
    env = lab_env(kit / "jupyter-config", kit / ".lab-state", book=book)
    if lang != "en" or "ANDREA_LANG" in env:
        env["ANDREA_LANG"] = lang  # also for Validate, whose kernel runs no open notebook
    url = "/lab/tree/" + first.relative_to(notebooks).as_posix()
    start(lab_command(notebooks, url, extra), env, notebooks)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
