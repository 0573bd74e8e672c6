"""Math typeset when a page is built: TeX to SVG with MathJax 3 in Node, no script in the page.

:func:`typeset` hands an HTML fragment to ``classroom/reporting/mathsvg.js`` (one Node
process per grading process, serving page after page, each with a TeX input of its own)
and gets the fragment back with every formula as inline SVG (plus its MathML
for screen readers), and the stylesheet the SVG needs. What counts as math is what
MathJax finds in a browser with the notebooks' settings: ``$...$``, ``$$...$$``,
``\\(...\\)``, ``\\[...\\]`` and LaTeX environments, outside ``pre``, ``code`` and
``script``. MathJax is the same release the book uses, ``mathjax-full`` (its Node
modules), vendored once by :func:`vendor` with the book's npm helper into
``book/_vendor/node`` (``make book`` does it; nothing is fetched while grading).

The caller sanitises what comes back: TeX is text from a learner, and its SVG is
learner content like any other (``classroom.feedback``).
"""
from __future__ import annotations

import atexit
import importlib.util
import json
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "book" / "_vendor" / "node" / "node_modules"
SCRIPT = Path(__file__).with_name("mathsvg.js")
STAMP = NODE_MODULES / ".andrea-mathjax-version"
# mathjax-full's modules and the one package they need for what mathsvg.js loads (mhchem);
# the speech engine and the context menu serve the browser only.
DEPENDENCIES = {"mhchemparser": ("package.json", "LICENSE.txt", "dist")}
TIMEOUT = 120.0  # seconds for one page; a page over it keeps its TeX as text
MEMORY_MB = 1024  # the Node typesetter's heap cap


class TypesetError(RuntimeError):
    """The math of a page could not be typeset (the reason is the message)."""


def _build_book():
    """scripts/build_book.py: the one place that pins MathJax and installs npm packages."""
    spec = importlib.util.spec_from_file_location("_andrea_build_book", ROOT / "scripts" / "build_book.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def vendored_version() -> str | None:
    try:
        return STAMP.read_text().strip() or None
    except OSError:
        return None


def vendor(npm_install=None, version: str | None = None) -> None:
    """Install mathjax-full (the book's MathJax version) into book/_vendor/node once, with
    the book's npm helper (``scripts/build_book.py`` passes its own; else it is loaded).

    The book's npm folder keeps only the package installed last (npm prunes what no
    package.json lists), so the modules are copied out of it, as the book's other
    vendored files are."""
    if npm_install is None or version is None:
        book = _build_book()
        npm_install, version = book.npm_install, book.MATHJAX_VERSION
    if vendored_version() == version and (NODE_MODULES / "mathjax-full" / "js").is_dir():
        return
    package = npm_install("mathjax-full", version, "MathJax 3 for Node (math in feedback pages)")
    tmp = NODE_MODULES.with_name("node_modules.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(package / "js", tmp / "mathjax-full" / "js",
                    ignore=lambda d, names: [n for n in names if n.endswith((".map", ".d.ts"))])
    for name in ("package.json", "LICENSE"):
        shutil.copy2(package / name, tmp / "mathjax-full" / name)
    for dep, parts in DEPENDENCIES.items():
        for part in parts:
            src, dst = package.parent / dep / part, tmp / dep / part
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(src, dst) if src.is_dir() else shutil.copy2(src, dst)
    (tmp / STAMP.name).write_text(version + "\n")
    shutil.rmtree(NODE_MODULES, ignore_errors=True)
    tmp.rename(NODE_MODULES)


def unavailable() -> str | None:
    """Why math cannot be typeset on this machine (None when it can)."""
    if shutil.which("node") is None:
        return "Node.js is not installed (Debian: apt-get install nodejs)"
    if vendored_version() is None or not (NODE_MODULES / "mathjax-full" / "js" / "mathjax.js").is_file():
        return "MathJax for Node is not vendored (`make mathdeps` vendors it; `make book`, `make grade` and `make demo` do too)"
    return None


OPTIONS = ("processHtmlClass", "ignoreHtmlClass")  # what a caller may set (MathJax's document options)


class _Typesetter:
    """One Node process with MathJax loaded, serving page after page (``mathsvg.js``):
    loading MathJax costs several times what typesetting a page does. Pages are sent
    one at a time; a page that runs past its time or makes Node fail ends the process
    (the next page starts a fresh one), and so does every :data:`PAGES_PER_PROCESS`-th
    page, so that no process grows without bound."""

    def __init__(self, node: str, modules: Path):
        self.key = (node, str(modules))
        self.pages = 0
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([node, f"--max-old-space-size={MEMORY_MB}", str(SCRIPT), str(modules)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr)
        self.buffer = b""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def ask(self, request: bytes, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        self.pages += 1
        try:
            self.proc.stdin.write(request + b"\n")
            self.proc.stdin.flush()
        except OSError:
            raise TypesetError(self.failure()) from None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TypesetError(f"typesetting ran past {timeout:.0f} s")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise TypesetError(self.failure())
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            raise TypesetError("MathJax's answer could not be read") from None

    def failure(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self.stderr.seek(0)
        last = self.stderr.read()[-4096:].decode("utf-8", "replace").strip().splitlines()[-1:]
        return f"MathJax failed: {(last or [f'exit status {code}'])[0][:300]}"

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)  # Node ends when its input is closed
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.stderr.close()


PAGES_PER_PROCESS = 200
_lock = threading.Lock()
_server: _Typesetter | None = None


def close() -> None:
    """End this process's Node typesetter, if one runs (the next page starts another)."""
    global _server
    with _lock:
        if _server is not None:
            _server.close()
            _server = None


atexit.register(close)


def typeset(html: str, timeout: float = TIMEOUT, options: dict | None = None) -> tuple[str, str, dict]:
    """``(html, css, stats)``: the fragment ``html`` with its TeX as SVG, the stylesheet the
    SVG needs, and ``{"math": formulas typeset, "seconds": wall time, "cpu_seconds": Node's
    CPU time for this page}``. ``options``: the classes that MathJax processes or ignores
    (:data:`OPTIONS`; the defaults are MathJax's, as in nbconvert's pages). Raises
    :class:`TypesetError` when Node or MathJax is missing, fails or runs past ``timeout``.

    The pages of a process are typeset by one Node process (:class:`_Typesetter`),
    started with the first page."""
    global _server
    why = unavailable()
    if why:
        raise TypesetError(why)
    request = json.dumps({"html": html, "options": {k: str(v) for k, v in (options or {}).items()
                                                     if k in OPTIONS}}).encode()
    t0 = time.monotonic()
    with _lock:
        key = (shutil.which("node"), str(NODE_MODULES))
        if _server is not None and (_server.key != key or not _server.alive()
                                    or _server.pages >= PAGES_PER_PROCESS):
            _server.close()
            _server = None
        try:
            if _server is None:
                _server = _Typesetter(*key)
            out = _server.ask(request, timeout)
        except OSError as exc:
            _server = None
            raise TypesetError(f"Node.js could not be started ({exc.strerror or exc})") from None
        except TypesetError:
            if _server is not None:
                _server.proc.kill()
                _server.close()
                _server = None
            raise
    if "error" in out:
        raise TypesetError(f"MathJax failed: {str(out['error'])[:300]}")
    try:
        return out["html"], out["css"], {"math": int(out["math"]), "seconds": time.monotonic() - t0,
                                         "cpu_seconds": float(out.get("cpu_ms", 0.0)) / 1000}
    except (ValueError, KeyError, TypeError):
        raise TypesetError("MathJax's answer could not be read") from None
