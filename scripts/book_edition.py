"""Run one Sphinx build of the course book: one language edition, or its message catalogs.

scripts/build_book.py runs this once per edition, each in its own process (Sphinx and
docutils keep global state). It is the same build as ``jupyter-book build`` (same
``_config.yml``, ``_toc.yml``, ``-W -n --keep-going``), with the language and the output
folders that ``jupyter-book build`` cannot set from the command line:

    python scripts/book_edition.py html en _build/html
    python scripts/book_edition.py html de _build/html/de
    python scripts/book_edition.py gettext en _build/gettext     (the .pot templates)

Every edition reads its notebooks' outputs from the one execution cache
(_build/.jupyter_cache): the code is the same in every language, so it runs once, and
each figure or table carries its translations with it (andrea_ref.i18n).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "_build"
LOCALES = ROOT / "book" / "locales"
# The editions: English, and every language with catalogs in book/locales (as
# andrea_ref.i18n.LANGUAGES, which tests/test_i18n_catalogs.py keeps equal).
EDITIONS = ("en",) + tuple(sorted(p.name for p in LOCALES.iterdir() if p.is_dir())) if LOCALES.is_dir() else ("en",)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builder", choices=("html", "gettext"))
    parser.add_argument("language", choices=EDITIONS)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--fresh", action="store_true", help="read every page again")
    parser.add_argument("--doctrees", type=Path, help="Sphinx's saved environment (default under _build)")
    args = parser.parse_args(argv)

    from jupyter_book.sphinx import build_sphinx

    overrides = {
        "external_toc_path": "_toc.yml",
        "nitpicky": True,
        "language": args.language,
        "latex_individualpages": False,
        # every edition reads the outputs of the one execution (the default is beside outdir)
        "nb_execution_cache_path": str(BUILD / ".jupyter_cache"),
    }
    # One saved environment per edition and builder: the translated doctrees differ.
    doctrees = args.doctrees or BUILD / (".doctrees" if (args.builder, args.language) == ("html", "en")
                        else f".doctrees-{args.builder}-{args.language}")
    result = build_sphinx(
        ROOT, args.outdir.resolve(),
        noconfig=True,
        path_config=str(ROOT / "_config.yml"),
        confoverrides=overrides,
        doctreedir=doctrees,
        builder=args.builder,
        warningiserror=True,
        keep_going=True,
        freshenv=args.fresh,
    )
    if isinstance(result, Exception):
        print(f"[book] {args.language} {args.builder} build failed: {result}", file=sys.stderr)
        return 1
    return int(result)


if __name__ == "__main__":
    sys.exit(main())
