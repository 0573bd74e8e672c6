"""The answer's text as code: IPython's own transformation of a cell (:func:`read`), the
map back to the learner's own lines, and the code a magic runs (:func:`magic_code`,
:func:`expansions`)."""
from __future__ import annotations

import ast
import re
from typing import Callable

from IPython.core import magic_arguments
from IPython.core.inputtransformer2 import TransformerManager
from IPython.core.magic import Magics
from IPython.core.magics.execution import ExecutionMagics
from IPython.core.magics.osm import OSMagics
from IPython.utils.text import DollarFormatter

_NEWLINE = re.compile(r"\r\n|\r|\n")


def source_lines(text: str) -> list[str]:
    """The lines of ``text`` as Python numbers them (``\\n``, ``\\r\\n`` and ``\\r`` end a line)."""
    lines = _NEWLINE.split(text)
    if lines and lines[-1] == "" and len(lines) > 1:
        lines.pop()
    return lines


def read(source: str):
    """``(tree, lines)``: a cell as Python, after IPython's own transformation of magics
    and shell commands, and ``lines(k)``, the cell's own line of line ``k`` of that Python
    (IPython drops leading blank lines and joins a magic continued with ``\\``); or
    ``(None, None)`` if it does not parse (it then runs nowhere)."""
    try:
        code = TransformerManager().transform_cell(source)
        tree = ast.parse(code)
    except Exception:  # noqa: BLE001 - SyntaxError, ValueError, RecursionError, MemoryError ...
        return None, None
    return tree, _as_function(_line_map(source, code))


def _line_map(source: str, code: str) -> list[int]:
    orig, new = source_lines(source), source_lines(code)
    i = 0
    while i < len(orig) and not orig[i].strip():  # IPython's leading_empty_lines
        i += 1
    out = []
    for t in new:
        out.append(min(i, len(orig) - 1) + 1 if orig else 1)
        if i < len(orig) and orig[i].strip() != t.strip() and "get_ipython()" in t:
            while i < len(orig) - 1 and orig[i].endswith("\\"):  # a magic continued on the next line
                i += 1
        i += 1
    return out


def _as_function(table: list[int]) -> Callable[[int], int]:
    table = tuple(table)

    def line(k: int) -> int:
        if not table:
            return k
        return table[min(max(k, 1), len(table)) - 1]
    return line


def same_line(k: int) -> int:
    return k


def _quietly(fn, *args, **kwargs):
    """IPython's own parsing of a magic's line; None where IPython refuses it (the magic
    then runs nothing)."""
    try:
        return fn(*args, **kwargs)
    except (Exception, SystemExit):  # noqa: BLE001 - UsageError, GetoptError ...
        return None


def _options(line: str, spec: str, **kw):
    parser = Magics.__new__(Magics)  # parse_options reads only its options_table
    parser.options_table = {}
    return parser.parse_options(line, spec, **kw)


def magic_code(name: str, line: str, body: str | None) -> list[tuple[str, int]]:
    """The Python that IPython's magic ``name`` runs, given its ``line`` and cell ``body``
    (None for a line magic), split the way IPython itself splits it: ``[(code, first)]``,
    where ``first`` is 0 when the code's first line is the magic's line and 1 when it is
    the line below (a cell's body)."""
    pieces: list[tuple[str, int]] = []
    if name == "time":
        if body is not None:
            pieces.append((body, 1))
        else:
            parsed = _quietly(magic_arguments.parse_argstring, ExecutionMagics.time, line, partial=True)
            if parsed is not None:
                pieces.append((" ".join(parsed[1]), 0))
    elif name == "timeit":
        parsed = _quietly(_options, line, "n:r:tcp:qov:", posix=False, strict=False, preserve_non_opts=True)
        if parsed is not None:
            pieces.append((parsed[1], 0))  # the statement, or a cell magic's set-up statement
            if body is not None:
                pieces.append((body, 1))
    elif name == "prun":
        parsed = _quietly(_options, line, "D:l:rs:T:q", list_all=True, posix=False)
        if parsed is not None:
            pieces.append((parsed[1] + ("\n" + body if body is not None else ""), 0))
    elif name == "capture":
        if body is not None:
            pieces.append((body, 1))
    elif name == "debug":
        pieces.append((line, 0))
        parsed = _quietly(magic_arguments.parse_argstring, ExecutionMagics.debug, line, partial=True)
        if parsed is not None:
            pieces.append((" ".join(parsed[1]) + ("\n" + body if body else ""), 0))
    return [(code, first) for code, first in pieces if isinstance(code, str) and code.strip()]


def expansions(line: str) -> list[str]:
    """The expressions IPython evaluates when it expands a magic's line
    (``{expression}`` and ``$name`` fields: ``InteractiveShell.var_expand``), in order, up
    to the first field it cannot parse."""
    out = []
    try:
        for _literal, name, spec, _conversion in DollarFormatter().parse(line):
            if name is not None:
                out.append(f"{name}:{spec}" if spec else name)
    except Exception:  # noqa: BLE001 - the fields before the error were evaluated
        pass
    return out


def writefile_name(line: str) -> str | None:
    """The file name a ``%%writefile`` line names (None: IPython refuses the line)."""
    parsed = _quietly(magic_arguments.parse_argstring, OSMagics.writefile, line)
    if parsed is None or not isinstance(parsed.filename, str):
        return None
    name = parsed.filename
    if re.match(r"^(\'.*\')|(\".*\")$", name):
        name = name[1:-1]
    return name
