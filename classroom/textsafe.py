"""Text that came from a learner's code, made safe to show.

Exception messages, file names and outputs are written by learners. Shown raw, a
newline forges a line of the report, a terminal escape sequence rewrites or hides
what the instructor sees, a bidirectional override reorders it, and a cell starting
with ``=`` becomes a formula in a spreadsheet. Everything learner-made passes
through :func:`line` (one line of text: every control, format, separator and
private-use character written as a visible escape) before it reaches
``report.txt``, ``report.csv`` or the terminal; :func:`cell` adds the spreadsheet
guard; HTML uses :func:`html.escape` on top (or the feedback page's sanitiser).

The standard library has no function for this: ``repr()`` also escapes every
non-ASCII letter (a Georgian name becomes unreadable) and quotes the text.
"""
from __future__ import annotations

import unicodedata

# Unicode general categories that never belong in one line of plain text
_UNSAFE = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def line(text, limit: int = 300) -> str:
    """``text`` as one printable line of at most ``limit`` characters."""
    s = text if isinstance(text, str) else str(text)
    out, n = [], 0
    for ch in s:
        piece = _escape(ch) if unicodedata.category(ch) in _UNSAFE else ch
        if n + len(piece) > limit:
            out.append("…")
            break
        out.append(piece)
        n += len(piece)
    return "".join(out)


def cell(text, limit: int = 2000) -> str:
    """:func:`line`, and never the start of a spreadsheet formula."""
    s = line(text, limit)
    return "'" + s if s[:1] in ("=", "+", "-", "@") else s
