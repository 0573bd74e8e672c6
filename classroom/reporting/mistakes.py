"""The likely mistakes of a class, counted: what the checks' messages name, in any language.

A failed check's message (recorded per graded cell by the independent check) may carry
one line ``Likely mistake: ...`` -- in the language the learner's notebook was graded in.
:func:`mistakes_of` reads those lines back to the message they were made from: the
grading package's own message (its English text, the catalogs' key) with its fields
(``{dim}``, ``{name}`` ...), whatever the language, so that the same mistake made in a
German and in a Georgian notebook counts once, and :func:`Mistake.text` shows it in the
instructor's language. A line no message of the package explains (an older version's
wording) counts under its own text, with its numbers set aside.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from andrea_ref.i18n import LANGUAGES, catalog, gettext

LIKELY = "Likely mistake: {likely}"  # the grading package's own message (andrea_ref.grading.messages)
_FIELD = re.compile(r"\\\{(\w+)\\\}")
MIN_FIXED = 20  # characters of a message's own words: "{where}: {mismatch}." explains nothing
_NUMBER = re.compile(r"[-+]?\d+(?:[.,]\d+)?(?:e[-+]?\d+)?")


@dataclass(frozen=True)
class Mistake:
    key: str  # the package's message (English), or the line itself with its numbers set aside
    fields: tuple[tuple[str, str], ...]  # the message's fields as this occurrence filled them in
    line: str  # the line as recorded

    def text(self, language: str) -> str:
        """The mistake in ``language`` (its fields as recorded)."""
        if not self.fields and self.key == self.line:
            return self.line
        try:
            return gettext(self.key, language).format(**dict(self.fields))
        except (KeyError, IndexError, ValueError):
            return self.line


def _pattern(template: str) -> re.Pattern | None:
    """``template`` (a message with ``{field}`` placeholders) as a regular expression."""
    names = []

    def field(m):
        if m.group(1) in names:  # a field used twice must read the same
            return f"(?P={m.group(1)})"
        names.append(m.group(1))
        return f"(?P<{m.group(1)}>.+?)"

    try:
        return re.compile(_FIELD.sub(field, re.escape(template)), re.S)
    except re.error:
        return None


@lru_cache(maxsize=None)
def _messages() -> tuple[list[tuple[str, re.Pattern, int]], list[re.Pattern]]:
    """(every message of the package as (key, pattern, its fixed length), the "Likely
    mistake" prefix in every language), longest fixed text first."""
    keys: set[str] = set()
    for language in LANGUAGES[1:]:
        keys |= set(catalog(language))
    found = []
    for key in keys:
        for language in LANGUAGES:
            text = gettext(key, language)
            fixed = len(re.sub(r"\{\w+\}", "", text))
            pattern = _pattern(text)
            if pattern is not None and fixed >= MIN_FIXED:
                found.append((key, pattern, fixed))
    found.sort(key=lambda item: -item[2])
    prefixes = []
    for language in LANGUAGES:
        before = gettext(LIKELY, language).split("{likely}")[0]
        prefixes.append(re.compile(r"^\s*" + re.escape(before.strip()) + r"\s*(.+?)\s*$", re.M))
    return found, prefixes


def identify(line: str) -> Mistake:
    """The message a likely-mistake text was made from, and its fields."""
    line = " ".join(line.split())
    for key, pattern, fixed in _messages()[0]:
        if fixed * 3 < len(line):  # the fields would say more than the message: not this one
            continue
        m = pattern.fullmatch(line)
        if m:
            return Mistake(key, tuple(sorted(m.groupdict().items())), line)
    return Mistake(_NUMBER.sub("#", line), (), line)


def mistakes_of(message: str) -> list[Mistake]:
    """The likely mistakes a failed check's ``message`` names (usually none or one)."""
    found = []
    for prefix in _messages()[1]:
        for m in prefix.finditer(message or ""):
            mistake = identify(m.group(1))
            if mistake not in found:
                found.append(mistake)
    return found
