"""Check the translation catalogs against the English text.

For every catalog of a language (book chapters, notebooks, the course package's
messages), each English message must have a translation that is

* present, not empty and not marked fuzzy;
* the same markup: the same roles and their targets ({term}`... <target>`,
  {cite}`key`, {glue:text}`key`), the same math ($...$, $$...$$), the same inline
  code, the same link targets and the same {placeholders} (a formula's numbers may
  be written the edition's way: $0{,}5$ for $0.5$, as the book's build writes them);
* the edition's terms: each language's term base (book/locales/<lang>/termbase.toml)
  names one term per concept and the renderings it rules out; a translation that
  uses one of those for the concept is reported, with the term to use;
* the same numbers. Numbers in prose may be written the target language's way
  (German and Georgian: decimal comma, thousands grouped by spaces, or by dots in
  German), so "0.02" may become "0,02" and "11,008" may become "11 008", but a value
  may not change, appear or disappear.

Usage: python scripts/i18n_check.py [LANG ...]         (after `make catalogs`)
       python scripts/i18n_check.py --po FILE.po ...   (only these catalogs)
Exits 1 and lists every problem when any catalog fails.
"""
from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from babel.messages.pofile import read_po

ROOT = Path(__file__).resolve().parent.parent
BOOK_LOCALES = ROOT / "book" / "locales"
PACKAGE_LOCALES = ROOT / "andrea_ref" / "locales"
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT)]
from book_edition import EDITIONS  # noqa: E402

from andrea_ref.i18n import DECIMAL_COMMA, localise_math  # noqa: E402

LANGUAGES = EDITIONS[1:]  # the translated ones

# Markup that must come through a translation unchanged: displayed and inline math,
# a role's name and its content, inline code, link targets, {placeholders} of
# str.format and HTML tags. A role's visible text may be translated when it has an
# explicit target (`text <target>`); then only the target must be kept.
_MARKUP = re.compile(
    r"\$\$.*?\$\$"                       # displayed math
    r"|(?<![\\\w])\$[^$\n]+?\$"          # inline math
    r"|\{[a-z][\w:-]*\}`[^`]*`"          # a role: {term}`...`, {glue:text}`...`
    r"|`[^`]*`"                          # inline code
    r"|\]\([^)\s]*\)"                    # a link's target: ](target)
    r"|\{[A-Za-z_]\w*(?:![rs])?(?::[^{}]*)?\}"  # a str.format placeholder
    r"|</?[a-zA-Z][^>]*>",               # an HTML tag
    re.S,
)
# a decimal fraction below one written with a point (0.5), not in code-like text
# (x.mul_(0.5), 0.5 * x): the editions with a decimal comma write 0,5
_DECIMAL_POINT = re.compile(r"(?<![\w.(])0\.\d+(?!\w|\.\d)(?!\s*\*)")
_REFERENCE_ROLES = {"term", "ref", "doc", "numref", "eq"}
_ROLE = re.compile(r"\{([a-z][\w:-]*)\}`([^`]*)`", re.S)
_NUMBER = re.compile(r"\d(?:[\d.,\u00a0\u202f\u2009 ]*\d)?")


def markup(text: str) -> Counter:
    """The markup of a message, as it must appear in its translation."""
    found = Counter()
    for m in _MARKUP.finditer(text):
        token = m.group(0)
        role = _ROLE.fullmatch(token)
        if role:
            name, content = role.groups()
            target = re.search(r"<([^<>]+)>\s*$", content)
            if target:
                token = f"{{{name}}}<{target.group(1)}>"
            elif name in _REFERENCE_ROLES:  # {term}`MLP` is {term}`MLP <MLP>`
                token = f"{{{name}}}<{content}>"
            else:
                token = f"{{{name}}}`{content}`"
        found[token] += 1
    return found


def prose(text: str) -> str:
    return _MARKUP.sub(" ", text)


def _value(token: str, language: str) -> float | None:
    """The value of a number written the way `language` writes it (None: not a number there)."""
    t = token
    if language == "en":
        if re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?|\d+(\.\d+)?", t):
            return float(t.replace(",", ""))
        return None
    grouped = r"\d{1,3}([\u00a0\u202f\u2009 ]\d{3})+" + (r"|\d{1,3}(\.\d{3})+" if language == "de" else "")
    if re.fullmatch(rf"(?:{grouped}|\d+)(,\d+)?", t):
        return float(re.sub(r"[\u00a0\u202f\u2009 .]", "", t).replace(",", "."))
    return None


def numbers(text: str, language: str) -> list[tuple[str, float | None]]:
    out = []
    for m in _NUMBER.finditer(prose(text)):
        token = m.group(0).rstrip(".,\u00a0\u202f\u2009 ")
        # a space-grouped number ends where a group is not three digits long
        for part in _split_groups(token, language):
            out.append((part, _value(part, language)))
    return out


def _split_groups(token: str, language: str) -> list[str]:
    if language == "en":
        return [p for p in re.split(r"[\u00a0\u202f\u2009 ]+", token) if p]
    parts = re.split(r"([\u00a0\u202f\u2009 ]+)", token)
    result, current = [], parts[0]
    for sep, nxt in zip(parts[1::2], parts[2::2]):
        if re.fullmatch(r"\d{3}(,\d+)?", nxt) and re.fullmatch(r"[\d\u00a0\u202f\u2009 ]*\d{1,3}", current):
            current += sep + nxt
        else:
            result.append(current)
            current = nxt
    result.append(current)
    return [p for p in result if p]


def number_problem(english: str, translated: str, language: str) -> str | None:
    """Say which numbers differ between a message and its translation (None: they agree)."""
    left = numbers(english, "en")
    right = numbers(translated, language)
    # the same digits written the same way always agree (versions, years, "GPT-2")
    raw = Counter(t for t, _ in left)
    rest = []
    for token, value in right:
        if raw[token]:
            raw[token] -= 1
        else:
            rest.append((token, value))
    want = Counter()
    for token, value in left:
        if raw[token]:
            raw[token] -= 1
            want[value if value is not None else token] += 1
    got = Counter(value if value is not None else token for token, value in rest)
    if want == got:
        return None
    missing = [str(k) for k in (want - got).elements()]
    extra = [str(k) for k in (got - want).elements()]
    return (f"numbers differ: English has {', '.join(missing) or 'nothing more'}, "
            f"the translation has {', '.join(extra) or 'nothing more'}")


@dataclass(frozen=True)
class Concept:
    """One entry of a term base: the term for a concept, and the renderings it rules out."""
    name: str
    term: str
    avoid: tuple[re.Pattern, ...]
    english: re.Pattern | None = None
    note: str = ""


def termbase_path(language: str) -> Path:
    return BOOK_LOCALES / language / "termbase.toml"


def read_termbase(path: Path) -> tuple[Concept, ...]:
    """The concepts of one term base file (ValueError naming the file and the entry if malformed)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: not a readable term base: {exc}") from None
    concepts = []
    for i, entry in enumerate(data.get("concept", []), 1):
        where = f"{path}: concept {i}"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not isinstance(entry.get("term"), str):
            raise ValueError(f"{where}: expected `name` and `term` strings")
        avoid = entry.get("avoid", [])
        if not isinstance(avoid, list) or not avoid or not all(isinstance(a, str) for a in avoid):
            raise ValueError(f"{where} ({entry['name']}): expected `avoid`, a list of regular expressions")
        try:
            patterns = tuple(re.compile(a) for a in avoid)
            english = re.compile(entry["english"], re.I | re.S) if entry.get("english") else None
        except re.error as exc:
            raise ValueError(f"{where} ({entry['name']}): bad regular expression: {exc}") from None
        concepts.append(Concept(entry["name"], entry["term"], patterns, english, entry.get("note", "")))
    return tuple(concepts)


@lru_cache(maxsize=None)
def termbase(language: str) -> tuple[Concept, ...]:
    """The term base of `language` (empty where it has none)."""
    path = termbase_path(language)
    return read_termbase(path) if path.is_file() else ()


def term_problems(msgid: str, msgstr: str, language: str, concepts=None) -> list[str]:
    """Every concept a translation renders with a form its language's term base rules out."""
    concepts = termbase(language) if concepts is None else concepts
    english, translated = prose(msgid), prose(msgstr)
    problems = []
    for concept in concepts:
        if concept.english is not None and not concept.english.search(english):
            continue
        found = sorted({m.group(0) for pattern in concept.avoid for m in pattern.finditer(translated)})
        if found:
            problems.append(f"term base: {', '.join(map(repr, found))} for {concept.name!r}: "
                            f"write {concept.term!r} ({termbase_path(language).relative_to(ROOT)})")
    return problems


def check_message(msgid: str, msgstr: str, language: str, fuzzy: bool = False) -> list[str]:
    """Every problem of one translated message (empty: it is good)."""
    if fuzzy:
        return ["fuzzy (the English changed since it was translated): review it and drop the fuzzy flag"]
    if not msgstr.strip():
        return ["not translated"]
    problems = []
    want, got = markup(msgid), markup(msgstr)
    # a formula may write its numbers the edition's way ($0{,}5$ for $0.5$)
    local = {localise_math(t, language): t for t in want if t.startswith("$")}
    canonical = Counter()
    for token, n in got.items():
        canonical[token if token in want else local.get(token, token)] += n
    got = canonical
    if want != got:
        lost = ", ".join(sorted((want - got).elements()))
        added = ", ".join(sorted((got - want).elements()))
        problems.append(f"markup differs: lost [{lost}], added [{added}]")
    problem = number_problem(msgid, msgstr, language)
    if problem:
        problems.append(problem)
    problems += term_problems(msgid, msgstr, language)
    # (a displayed formula is a message of its own, TeX without $: the build writes its numbers)
    if language in DECIMAL_COMMA and not (re.search(r"\\[A-Za-z]+", msgid) and "$" not in msgid):
        points = [m.group(0) for m in _DECIMAL_POINT.finditer(prose(msgstr))]
        if points:
            problems.append(f"decimal point in {', '.join(points[:3])}: this edition writes a decimal comma "
                            f"({points[0].replace('.', ',')}); code stays in `backticks`")
    mixed = [w for w in re.findall(r"[^\W\d_]+", prose(msgstr)) if len(_scripts(w)) > 1 or "cyrillic" in _scripts(w)]
    mixed = [w for w in mixed if w not in msgid]
    if mixed:
        problems.append(f"words in a wrong or mixed script (a typing slip?): {', '.join(mixed[:5])}")
    return problems


def _scripts(word: str) -> set[str]:
    found = set()
    for ch in word:
        o = ord(ch)
        if 0x0400 <= o <= 0x052F:
            found.add("cyrillic")
        elif 0x10A0 <= o <= 0x10FF or 0x1C90 <= o <= 0x1CBF or 0x2D00 <= o <= 0x2D2F:
            found.add("georgian")
        elif ch.isalpha() and o < 0x0250:
            found.add("latin")
        elif 0x0370 <= o <= 0x03FF:
            found.add("greek")
    return found


def read_catalog(path: Path):
    with path.open("rb") as f:
        return read_po(f, abort_invalid=True)


def check_catalog(po_path: Path, language: str, template: Path | None = None) -> list[str]:
    """Problems of one catalog; with `template` (a .pot), every English message must be in it."""
    catalog = read_catalog(po_path)
    rel = po_path.relative_to(ROOT) if po_path.is_relative_to(ROOT) else po_path
    problems = []
    entries = {m.id: m for m in catalog if m.id}
    wanted = [m.id for m in read_catalog(template) if m.id] if template else list(entries)
    for msgid in wanted:
        entry = entries.get(msgid)
        if entry is None:
            problems.append(f"{rel}: missing: {msgid[:70]!r} (run the update command in README)")
            continue
        msgstr = entry.string if isinstance(entry.string, str) else "".join(entry.string)
        for p in check_message(msgid, msgstr, language, fuzzy=entry.fuzzy):
            problems.append(f"{rel}: {p}: {msgid[:70]!r}")
    return problems


def catalog_problems(pot_dir: Path, locales: Path, languages=LANGUAGES) -> list[str]:
    """Check every catalog made from the templates under `pot_dir` (``make catalogs``)."""
    problems = []
    templates = sorted(pot_dir.rglob("*.pot"))
    if not templates:
        return [f"no .pot templates under {pot_dir}: run `make catalogs` first (README)"]
    for language in languages:
        for pot in templates:
            po = locales / language / "LC_MESSAGES" / pot.relative_to(pot_dir).with_suffix(".po")
            if not po.is_file():
                problems.append(f"{po.relative_to(ROOT)}: missing catalog")
                continue
            problems += check_catalog(po, language, pot)
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pot-dir", type=Path, default=ROOT / "_build" / "gettext",
                        help="templates of the book and the notebooks (make catalogs)")
    parser.add_argument("--package-pot-dir", type=Path, default=ROOT / "_build" / "gettext-package",
                        help="templates of the course package's messages (make catalogs)")
    parser.add_argument("--po", type=Path, nargs="*", default=(), help="check only these catalogs")
    parser.add_argument("languages", nargs="*", default=list(LANGUAGES))
    args = parser.parse_args(argv)
    if args.po:
        problems = []
        for po in args.po:
            language = next((p for p in po.resolve().parts if p in LANGUAGES), None)
            if language is None:
                parser.error(f"--po: cannot tell the language of {po} (expected .../<de|ka>/LC_MESSAGES/...)")
            problems += check_catalog(po.resolve(), language)
    else:
        problems = (catalog_problems(args.pot_dir, BOOK_LOCALES, args.languages)
                    + catalog_problems(args.package_pot_dir, PACKAGE_LOCALES, args.languages))
    for p in problems:
        print(p)
    print(f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
