"""``andrea-lab validate NOTEBOOK...``: nbgrader's validation, every message in full, and an exit status.

The same check as the **Validate** button and ``nbgrader validate`` (nbgrader's
``Validator``: a fresh kernel runs the notebook, then every graded cell must pass and no
locked cell may have changed), with two differences: ``nbgrader validate`` cuts every
line of a message at about 80 characters and exits 0 whatever it found; here long lines
wrap at spaces, and the exit status is 1 when a notebook fails (2 for a bad argument).
A translated notebook's checks answer in its language (``metadata.andrea.lang``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import textwrap
from pathlib import Path

FAILED = ("type_changed", "changed", "failed")


def wrap(text: str, width: int, indent: str = "") -> str:
    """Each line of ``text`` indented and wrapped at spaces to ``width`` (its own leading
    spaces kept on the lines it continues onto); nothing is cut."""
    out = []
    for line in text.split("\n"):
        body = line.rstrip()
        lead = indent + body[:len(body) - len(body.lstrip())]
        if not body.strip():
            out.append("")
            continue
        out.extend(textwrap.wrap(body.strip(), width=max(width, len(lead) + 20), initial_indent=lead,
                                 subsequent_indent=lead + "  ", break_long_words=False,
                                 break_on_hyphens=False))
    return "\n".join(out)


def _validator_class():
    from nbconvert.filters import strip_ansi
    from nbgrader.validator import Validator

    class FullValidator(Validator):
        """nbgrader's Validator, remembering its results and wrapping instead of cutting."""
        results: dict = {}

        def validate(self, filename):
            self.results = super().validate(filename)
            return self.results

        def _indent(self, val: str) -> str:
            return wrap(strip_ansi(val), self.width, self.indent)

    return FullValidator


def _notebook_language(path: Path) -> str | None:
    from andrea_ref.i18n import LANGUAGES, METADATA_KEY
    try:
        lang = json.loads(path.read_text(encoding="utf-8"))["metadata"][METADATA_KEY]["lang"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return lang if lang in LANGUAGES else None


def _config():
    """nbgrader's configuration as its own commands read it (the working folder, then
    Jupyter's configuration path)."""
    from jupyter_core.paths import jupyter_config_path
    from nbgrader.apps import NbGrader
    app = NbGrader()
    app.log.setLevel("ERROR")  # no "No nbgrader_config.py file found": a learner has none
    app.config_file_paths.append([os.getcwd(), *jupyter_config_path()])
    app.load_config_file()
    return app.config


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="andrea-lab validate", description=__doc__.splitlines()[0].strip("`"))
    ap.add_argument("notebooks", nargs="+", type=Path, metavar="NOTEBOOK", help="a notebook (.ipynb) to validate")
    ap.add_argument("--width", type=int, default=None,
                    help="wrap messages at this many columns (default: the terminal's width, at least 60)")
    a = ap.parse_args(argv)
    for nb in a.notebooks:
        if not nb.is_file() or nb.suffix != ".ipynb":
            print(f"andrea-lab validate: NOTEBOOK: {nb} is not a notebook file (.ipynb)", file=sys.stderr)
            return 2
    width = a.width or max(60, shutil.get_terminal_size((100, 24)).columns)
    if width < 40:
        print(f"andrea-lab validate: --width must be at least 40, got {width}", file=sys.stderr)
        return 2

    validator = _validator_class()(config=_config())
    validator.width = width
    status = 0
    preset = os.environ.get("ANDREA_LANG")
    for nb in a.notebooks:
        if len(a.notebooks) > 1:
            print(f"== {nb}")
        if not preset:
            lang = _notebook_language(nb)
            if lang:
                os.environ["ANDREA_LANG"] = lang  # the kernel's environment
            else:
                os.environ.pop("ANDREA_LANG", None)
        validator.results = {}
        try:
            validator.validate_and_print(str(nb))
        except Exception as exc:  # an invalid notebook, metadata from another nbgrader, a dead kernel
            first = (str(exc).strip().splitlines() or [""])[0]
            print(f"andrea-lab validate: {nb}: could not be validated ({type(exc).__name__}: {first})",
                  file=sys.stderr)
            status = 1
            continue
        if any(validator.results.get(key) for key in FAILED):
            status = 1
    sys.stdout.flush()
    return status


if __name__ == "__main__":
    sys.exit(main())
