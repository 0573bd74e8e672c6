"""The independent check: a notebook's points decided where no learner code ever ran.

nbgrader runs a submitted notebook in a kernel where the learner's code and the
checks share one process; code in an answer cell can rebind the checks, hook the
import machinery or rewrite the cells that follow, so the verdicts printed in that
notebook prove nothing. This module decides the points instead:

1. :func:`build_plan` reads, once per assignment, from the instructor's notebook and
   its release: the locked set-up cells, the answer (solution) cells, and for every
   graded cell the ``grading.check_*(fn, seed=...)`` calls it makes, hidden ones
   included (parsed with ``ast``; a graded cell with any other statement is refused).
2. :func:`answer_cells` picks, from a submitted notebook, the code the learner wrote:
   the release's set-up cells (never the submitted copies), then the learner's cells
   up to the first graded cell, leaving out graded cells and cells unchanged from the
   release.
3. :class:`AnswerHost` runs those cells in a fresh sandboxed process
   (:mod:`classroom.answer_server`) that then serves calls of the graded function.
4. :func:`check_notebook` runs the same ``andrea_ref.grading`` checks as the notebook
   -- in this process -- against a :class:`RemoteFunction` that forwards each call
   over a socket; the result, the exception, the time-out and the operations that ran
   come back as data (:mod:`classroom.wire`) and are judged here. The time limit is
   enforced from here too: an answer that does not reply is killed.

What the learner still controls is what their function returns, which is what the
checks judge. The server's own report of the ATen operations and ``andrea_ref``
functions that ran is produced in the learner's process, where the rules against
library shortcuts are enforced at PyTorch's dispatcher (see
``andrea_ref.grading._core.execute``); :func:`probe_findings` lists, for the
instructor, answer code that reaches for the machinery (``ctypes``, ``gc``, ``sys``,
dunder attributes ...) that an honest answer never needs.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import copy
import io
import json
import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from andrea_ref import grading
from andrea_ref.grading import _core

from . import sandbox, wire

SERVER = Path(__file__).resolve().with_name("answer_server.py")
GRACE = 5.0  # seconds a call may take beyond the checks' own time limit


# ----------------------------------------------------------------------------- plan
def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _nbgrader(cell) -> dict:
    meta = cell.get("metadata", {})
    nbg = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return nbg if isinstance(nbg, dict) else {}


def _graded_calls(source: str, where: str) -> tuple[str, list[tuple[str, dict]]]:
    """(function name, [(check name, keyword arguments)]) of a graded cell."""
    calls, names = [], set()
    text = source.replace("### BEGIN HIDDEN TESTS", "").replace("### END HIDDEN TESTS", "")
    for stmt in ast.parse(text).body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        ok = (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
              and isinstance(call.func.value, ast.Name) and call.func.value.id == "grading"
              and call.func.attr.startswith("check_") and len(call.args) == 1
              and isinstance(call.args[0], ast.Name))
        if not ok:
            raise ValueError(f"{where}: a graded cell may only call grading.check_*(function, seed=N); "
                             f"found {ast.unparse(stmt)!r}")
        kwargs = {}
        for kw in call.keywords:
            if not isinstance(kw.value, ast.Constant):
                raise ValueError(f"{where}: {kw.arg}= must be a literal in {ast.unparse(stmt)!r}")
            kwargs[kw.arg] = kw.value.value
        if not callable(getattr(grading, call.func.attr, None)):
            raise ValueError(f"{where}: andrea_ref.grading has no {call.func.attr}")
        calls.append((call.func.attr, kwargs))
        names.add(call.args[0].id)
    if len(names) != 1:
        raise ValueError(f"{where}: a graded cell must check exactly one function, found {sorted(names)}")
    return names.pop(), calls


def build_plan(instructor_nb: dict, release_nb: dict, where: str = "notebook") -> dict:
    """What the independent check needs to know about one notebook (JSON-able)."""
    release = {}
    for cell in release_nb["cells"]:
        gid = _nbgrader(cell).get("grade_id")
        if gid:
            release[gid] = cell
    setup, solutions, graded, unchanged, locked = [], {}, [], [], {}
    function = None
    for cell in instructor_nb["cells"]:
        meta = _nbgrader(cell)
        gid = meta.get("grade_id")
        if cell.get("cell_type") != "code":
            continue
        if meta.get("grade") and not meta.get("solution"):
            fn, calls = _graded_calls(_source(cell), f"{where}, cell {gid}")
            if function not in (None, fn):
                raise ValueError(f"{where}: graded cells check different functions ({function}, {fn})")
            function = fn
            graded.append({"grade_id": gid, "points": float(meta.get("points", 0)), "calls": calls})
            locked[gid] = _source(release.get(gid, cell))
        elif meta.get("solution"):
            solutions[gid] = _source(release[gid]) if gid in release else ""
        elif meta.get("locked"):
            setup.append(_source(release.get(gid, cell)))
            locked[gid] = _source(release.get(gid, cell))
    for cell in release_nb["cells"]:
        meta = _nbgrader(cell)
        if cell.get("cell_type") == "code" and not meta.get("locked") and not meta.get("solution"):
            unchanged.append(_source(cell))
    if function is None:
        raise ValueError(f"{where}: no graded cell")
    return {"function": function, "setup": setup, "solutions": solutions, "graded": graded,
            "unchanged": unchanged, "locked": locked}


def answer_cells(plan: dict, nb: dict) -> list[str]:
    """The code of ``nb`` the answer server runs, in order (see the module docstring)."""
    graded_ids = {g["grade_id"] for g in plan["graded"]}
    skip = set(plan["unchanged"])
    cells = list(plan["setup"])
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = _nbgrader(cell)
        gid = meta.get("grade_id")
        if gid in graded_ids:
            break
        if gid in plan["locked"]:
            continue  # a locked cell: the release's version already ran
        source = _source(cell)
        if source in skip and gid not in plan["solutions"]:
            continue
        cells.append(source)
    return cells


def untouched(plan: dict, nb: dict) -> bool:
    """True when every answer cell still holds the release's stub (or is gone)."""
    found = {}
    for cell in nb.get("cells", []):
        if isinstance(cell, dict):
            gid = _nbgrader(cell).get("grade_id")
            if gid in plan["solutions"]:
                found[gid] = _source(cell)
    return all(found.get(gid, stub).strip() == stub.strip() for gid, stub in plan["solutions"].items())


def locked_changes(plan: dict, nb: dict) -> list[str]:
    """Locked or graded cells that were edited or deleted in ``nb`` (nbgrader puts the
    release's version back silently; the report should say so)."""
    seen, out = set(), []
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict):
            continue
        gid = _nbgrader(cell).get("grade_id")
        if gid in plan["locked"]:
            seen.add(gid)
            if _source(cell).strip() != plan["locked"][gid].strip():
                out.append(f"locked cell {gid!r} was edited (the release's version was graded)")
    for gid in plan["locked"]:
        if gid not in seen:
            out.append(f"locked cell {gid!r} was deleted (the release's version was graded)")
    return out


# ----------------------------------------------------------------------------- probes
_PROBE_MODULES = {
    "os", "sys", "subprocess", "socket", "ctypes", "gc", "inspect", "importlib", "builtins",
    "sqlite3", "shutil", "pathlib", "signal", "threading", "multiprocessing", "pickle", "marshal",
    "base64", "codecs", "zlib", "urllib", "http", "pty", "resource", "mmap", "fcntl", "select",
    "asyncio", "tempfile", "glob", "nbformat", "IPython", "traitlets", "atexit", "weakref", "types",
    "dis", "code", "site", "zipimport", "pkgutil", "runpy", "ipykernel", "zmq", "jupyter_client",
}
_PROBE_CALLS = {"open", "exec", "eval", "compile", "__import__", "globals", "locals", "vars", "setattr",
                "delattr", "breakpoint", "get_ipython", "input", "memoryview"}
_PROBE_ATTRS = {("torch", "_C"), ("torch", "library"), ("torch", "ops"), ("torch", "_dynamo"),
                ("sys", "modules"), ("andrea_ref", "grading"), ("grading", "_core")}


def probe_findings(sources: list[str]) -> list[str]:
    """What in ``sources`` reaches for machinery no answer to these exercises needs."""
    found: list[str] = []

    def note(what):
        if what not in found:
            found.append(what)

    for src in sources:
        for line in src.splitlines():
            if line.lstrip().startswith(("!", "%")):
                note("an IPython shell command or magic")
        try:
            from IPython.core.inputtransformer2 import TransformerManager
            tree = ast.parse(TransformerManager().transform_cell(src))
        except Exception:  # noqa: BLE001 - code that does not parse runs nowhere
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in _PROBE_MODULES:
                        note(f"import {alias.name}")
            elif isinstance(node, ast.ImportFrom) and node.module:
                if node.module.split(".")[0] in _PROBE_MODULES or node.module.startswith("andrea_ref.grading"):
                    note(f"from {node.module} import ...")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _PROBE_CALLS:
                note(f"{node.func.id}()")
            elif isinstance(node, ast.Attribute):
                if node.attr.startswith("__") and node.attr.endswith("__") and node.attr not in (
                        "__init__", "__name__", "__doc__"):
                    note(f".{node.attr}")
                if isinstance(node.value, ast.Name) and (node.value.id, node.attr) in _PROBE_ATTRS:
                    note(f"{node.value.id}.{node.attr}")
                if isinstance(node.value, ast.Name) and node.value.id == "grading":
                    note(f"grading.{node.attr}")
            elif isinstance(node, ast.Name) and node.id in ("__builtins__", "__loader__", "__spec__"):
                note(node.id)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                pass
    return found


# ----------------------------------------------------------------------------- hosts
class AnswerUnavailable(RuntimeError):
    """No answer server could be started (the sandbox is broken)."""


class AnswerHost:
    """Starts answer servers for one grading worker, one notebook at a time.

    With ``zygote=True`` (default) one sandboxed zygote is started once and forks a
    fresh, isolated server per notebook (milliseconds); where that cannot work (no
    nested user namespaces) or is turned off, every notebook gets a sandbox of its own
    (seconds: PyTorch is imported each time). ``mode`` says which is in use and
    ``why_not_zygote`` why the faster one is not.
    """

    def __init__(self, spec: sandbox.SandboxSpec, workdir: Path, *, nest_filter: str | None = None,
                 zygote: bool = True):
        self.spec = spec
        self.workdir = Path(workdir)
        self.nest_filter = nest_filter
        self.want_zygote = zygote
        self.mode = None
        self.why_not_zygote = None if zygote else "turned off"
        self._proc = None
        self._ctl = None
        self._job_proc = None

    # -- sandbox processes
    def _popen(self, command: list[str], pass_fds: tuple[int, ...]) -> subprocess.Popen:
        self.workdir.mkdir(parents=True, exist_ok=True)
        sandbox._prepare_dir(self.workdir, self.spec.uid, 0o755)
        sfd = os.open(self.spec.seccomp_file, os.O_RDONLY) if self.spec.seccomp_file else None
        argv = sandbox.bwrap_argv(self.spec, self.workdir, self.workdir, command, seccomp_fd=sfd)
        try:
            return sandbox.popen_confined(argv, self.spec.cgroup_procs, pass_fds + (() if sfd is None else (sfd,)))
        finally:
            if sfd is not None:
                os.close(sfd)

    def _start_zygote(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fds = [theirs.fileno()]
        nest_fd = None
        if self.nest_filter:
            nest_fd = os.open(self.nest_filter, os.O_RDONLY)
            fds.append(nest_fd)
        try:
            self._proc = self._popen([self.spec.python, "-I", str(SERVER), "zygote", *map(str, fds)], tuple(fds))
        finally:
            theirs.close()
            if nest_fd is not None:
                os.close(nest_fd)
        ours.settimeout(180)
        try:
            ready = ours.recv(16)
        except OSError:
            ready = b""
        if ready != b"ready":
            self._kill_proc()
            raise AnswerUnavailable("the answer zygote did not start")
        self._ctl = ours

    def start(self) -> None:
        if self.mode is not None:
            return
        if self.want_zygote:
            try:
                self._start_zygote()
                sock = self._spawn()
                header, _ = wire.recv(sock, timeout=60)
                sock.close()
                if header.get("op") != "ready":
                    raise AnswerUnavailable(str(header.get("message") or "no answer server")[:300])
                self.mode = "zygote"
                return
            except (AnswerUnavailable, OSError, wire.WireError, TimeoutError) as exc:
                self.why_not_zygote = str(exc)[:300]
                self._kill_proc()
        self.mode = "sandbox per notebook"

    def _spawn(self) -> socket.socket:
        ours, theirs = socket.socketpair()
        try:
            socket.send_fds(self._ctl, [b"spawn"], [theirs.fileno()])
            self._ctl.settimeout(30)
            if self._ctl.recv(16) != b"ok":
                raise AnswerUnavailable("the answer zygote refused to fork")
        finally:
            theirs.close()
        return ours

    def open(self) -> socket.socket:
        """A socket to a fresh answer server (its first frame is ``ready`` or ``error``)."""
        self.start()
        if self.mode == "zygote":
            try:
                return self._spawn()
            except (OSError, AnswerUnavailable):
                self._kill_proc()
                self._start_zygote()
                return self._spawn()
        ours, theirs = socket.socketpair()
        try:
            self._job_proc = self._popen([self.spec.python, "-I", str(SERVER), "job", str(theirs.fileno())],
                                         (theirs.fileno(),))
        finally:
            theirs.close()
        return ours

    def reset(self) -> None:
        """Kill every answer server (and whatever it started); the zygote stays."""
        if self._job_proc is not None:
            self._job_proc.kill()
            self._job_proc.wait()
            self._job_proc = None
        if self._ctl is not None:
            try:
                self._ctl.send(b"reset")
                self._ctl.settimeout(10)
                if self._ctl.recv(16) == b"ok":
                    return
            except OSError:
                pass
            self._kill_proc()  # a zygote that does not answer is replaced
            self.mode = None

    def _kill_proc(self) -> None:
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._proc = None

    def close(self) -> None:
        self.reset()
        self._kill_proc()
        self.mode = None


# ----------------------------------------------------------------------------- proxy
class ServerLost(Exception):
    """The process serving the learner's function stopped answering."""


class RemoteError(Exception):
    """An exception the learner's function raised in the answer server."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.remote_type = kind


_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.]")


def _name(text) -> str:
    return (_SAFE_NAME.sub("", str(text))[:60]) or "object"


def _stand_in(desc: dict, values: dict):
    kind = desc.get("kind") if isinstance(desc, dict) else None
    if kind == "tensor":
        value = values.get("result")
        return value if type(value) is torch.Tensor else None
    if kind == "subclass":
        cls = type(_name(desc.get("name")), (torch.Tensor,), {})
        return torch.Tensor._make_subclass(cls, torch.empty(0))
    if kind == "other":
        return type(_name(desc.get("name")), (), {})()
    return None


def _error(desc) -> BaseException | None:
    if not isinstance(desc, dict):
        return None
    kind, message = _name(desc.get("type")), str(desc.get("message", ""))[:2000]
    if desc.get("not_implemented"):
        return NotImplementedError(message)
    cls = getattr(builtins, kind, None)
    if desc.get("builtin") and isinstance(cls, type) and issubclass(cls, Exception):
        try:
            return cls(message)
        except Exception:  # noqa: BLE001 - builtins with other signatures
            pass
    return RemoteError(kind, message)


def _apply_back(local, remote) -> None:
    """Make ``local`` (an argument as the checks hold it) what the server reports the
    function left it as, so an in-place change is seen by the checks as it would be."""
    if isinstance(local, torch.Tensor):
        with torch.no_grad():
            if type(remote) is not torch.Tensor:
                local.fill_(float("nan")) if local.is_floating_point() else local.zero_()
                return
            if remote.shape != local.shape or remote.dtype != local.dtype:
                local.resize_(remote.shape)
                if local.is_floating_point():
                    local.fill_(float("nan"))
                if remote.dtype == local.dtype:
                    local.copy_(remote)
                return
            local.copy_(remote)
    elif isinstance(local, dict):
        if not isinstance(remote, dict):
            local.clear()
            return
        for k in list(local):
            if k not in remote:
                del local[k]
        for k, v in remote.items():
            if k in local and isinstance(local[k], torch.Tensor):
                _apply_back(local[k], v)
            else:
                local[k] = v


class RemoteFunction(_core.RemoteAnswer):
    """The learner's function, served by an answer server (see :func:`check_notebook`)."""

    def __init__(self, sock: socket.socket, host: AnswerHost, call_limit: float):
        self.sock = sock
        self.host = host
        self.call_limit = call_limit
        self.lost: str | None = None
        self.calls = 0
        self.cell_deadline: float | None = None
        self.over_budget = False
        self.results: dict[int, torch.Tensor] = {}  # what earlier calls returned, by call index

    def remote_call(self, args, forbidden):
        if self.lost is not None:
            return _core.Outcome(error=RemoteError("AnswerStopped", self.lost))
        spec = {"what": forbidden.what, "aten_words": list(forbidden.aten_words),
                "ref_files": list(forbidden.ref_files)}
        wait = self.call_limit + GRACE
        budget = None if self.cell_deadline is None else self.cell_deadline - time.monotonic()
        if budget is not None and budget <= 0:
            self.over_budget = True
            return _core.Outcome(error=RemoteError("CellTimeout", "the cell ran out of time"))
        try:
            wire.send(self.sock, {"op": "call"}, {"args": list(args), "forbidden": spec,
                                                  "time_limit": self.call_limit})
            header, values = wire.recv(self.sock, timeout=wait if budget is None else min(wait, budget))
        except TimeoutError:
            self.host.reset()
            if budget is not None and budget < wait:
                self.over_budget = True
                self.lost = "the cell ran out of time"
                return _core.Outcome(error=RemoteError("CellTimeout", self.lost))
            self.timed_out = True
            self.lost = f"did not finish within {self.call_limit:g} s"
            return _core.Outcome(timed_out=True)
        except (wire.WireError, OSError) as exc:
            self.lost = ("the process running this code stopped (killed: over the memory limit, "
                         f"or it ended itself): {exc}")
            return _core.Outcome(error=RemoteError("AnswerStopped", self.lost))
        self.calls += 1
        values = values if isinstance(values, dict) else {}
        remote_args = values.get("args")
        if isinstance(remote_args, list) and len(remote_args) == len(args):
            for local, remote in zip(args, remote_args):
                _apply_back(local, remote)
        ops = header.get("ops") if isinstance(header.get("ops"), list) else []
        hits = header.get("ref_hits") if isinstance(header.get("ref_hits"), list) else []
        integrity = header.get("integrity")
        changed = values.get("changed")
        if isinstance(changed, dict):
            for key, now in changed.items():
                if str(key).isdigit() and int(key) in self.results:
                    _apply_back(self.results[int(key)], now)
        result = _stand_in(header.get("result"), values)
        if type(result) is torch.Tensor and isinstance(header.get("index"), int):
            self.results[header["index"]] = result
            if len(self.results) > 64:
                self.results.pop(min(self.results))
        outcome = _core.Outcome(
            result=result,
            error=_error(header.get("error")),
            timed_out=bool(header.get("timed_out")),
            ops=[str(o)[:80] for o in ops if isinstance(o, str)],
            ref_hits=[_name(h) for h in hits],
            integrity=str(integrity)[:500] if integrity else None,
        )
        if outcome.timed_out:
            self.timed_out = True
        return outcome


# ----------------------------------------------------------------------------- checking
@dataclass
class CellVerdict:
    grade_id: str
    points: float
    passed: bool
    message: str = ""
    lines: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return self.points if self.passed else 0.0


@dataclass
class NotebookVerdict:
    cells: dict[str, CellVerdict]
    answer_errors: list[dict] = field(default_factory=list)
    problem: str | None = None  # the answer could not be checked normally (time-out, memory ...)
    untouched: bool = False
    probes: list[str] = field(default_factory=list)
    locked_changes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def score(self) -> float:
        return sum(c.score for c in self.cells.values())


def _fail_all(plan: dict, message: str) -> dict[str, CellVerdict]:
    return {g["grade_id"]: CellVerdict(g["grade_id"], g["points"], False, message) for g in plan["graded"]}


class _Budget(Exception):
    """A graded cell (or the whole notebook) ran out of time."""


def _connect(plan: dict, cells: list[str], host: AnswerHost, verdict: NotebookVerdict, *, cell_timeout: float,
             call_limit: float, deadline: float) -> RemoteFunction | str:
    """A server that has run ``cells`` and holds the graded function, or the reason
    why there is none (every graded cell then fails with it)."""
    fn_name = plan["function"]
    sock = host.open()
    try:
        header, _ = wire.recv(sock, timeout=max(1.0, min(120.0, deadline - time.monotonic())))
        if header.get("op") != "ready":
            raise AnswerUnavailable(str(header.get("message") or "the answer server did not start")[:300])
        wire.send(sock, {"op": "cells"}, {"cells": cells})
        try:
            header, _ = wire.recv(sock, timeout=max(1.0, min(cell_timeout * max(1, len(cells)) + GRACE,
                                                                deadline - time.monotonic())))
        except TimeoutError:
            host.reset()
            verdict.problem = "timed out"
            sock.close()
            return (f"The answer cells did not finish within {cell_timeout:g} s each (an endless loop at "
                    "the top level?).")
        except wire.WireError:
            verdict.problem = "answer stopped"
            sock.close()
            return ("The process running the answer cells stopped (it ended itself, or was killed at a "
                    "limit) before the checks could run.")
        verdict.answer_errors = [e for e in header.get("errors", []) if isinstance(e, dict)][:20]
        wire.send(sock, {"op": "bind", "name": fn_name})
        header, _ = wire.recv(sock, timeout=30)
    except (wire.WireError, TimeoutError, OSError) as exc:
        sock.close()
        host.reset()
        verdict.problem = "answer stopped"
        return f"The process running the answer stopped before the checks could run ({exc})."
    if not header.get("found"):
        sock.close()
        return (f"`{fn_name}` is not defined: the answer cell did not define it (or raised an error "
                "before it did).")
    return RemoteFunction(sock, host, call_limit)


def check_notebook(plan: dict, nb: dict, host: AnswerHost, *, cell_timeout: float = 60.0,
                   call_limit: float | None = None, deadline: float | None = None) -> NotebookVerdict:
    """Grade the submitted notebook ``nb`` (a dict) by the plan, out of process.

    Each graded cell has ``cell_timeout`` seconds, as in nbgrader; a cell that runs out
    of time fails, its server is killed and the next cell gets a fresh one (as the
    notebook's next cell would still run). ``deadline`` (``time.monotonic()``) ends it
    all: the cells not checked by then fail."""
    t0 = time.monotonic()
    call_limit = call_limit or _core.CALL_TIME_LIMIT
    deadline = deadline if deadline is not None else t0 + 600.0
    cells = answer_cells(plan, nb)
    verdict = NotebookVerdict(cells={}, untouched=untouched(plan, nb),
                              probes=probe_findings(cells[len(plan["setup"]):]),
                              locked_changes=locked_changes(plan, nb))
    proxy: RemoteFunction | str | None = None
    try:
        with _core.cpu_only(), _core.quiet():
            for g in plan["graded"]:
                if time.monotonic() >= deadline:
                    verdict.cells[g["grade_id"]] = CellVerdict(g["grade_id"], g["points"], False,
                                                               "Not checked: the grading deadline was reached.")
                    verdict.problem = verdict.problem or "timed out"
                    continue
                if proxy is None:
                    proxy = _connect(plan, cells, host, verdict, cell_timeout=cell_timeout,
                                     call_limit=call_limit, deadline=deadline)
                if isinstance(proxy, str):
                    verdict.cells[g["grade_id"]] = CellVerdict(g["grade_id"], g["points"], False, proxy)
                    continue
                proxy.cell_deadline = min(deadline, time.monotonic() + cell_timeout)
                verdict.cells[g["grade_id"]] = cv = _run_cell(g, proxy)
                if proxy.over_budget:
                    cv.message = (f"The checks of this cell did not finish within {cell_timeout:g} s; "
                                  "the cell was stopped.")
                    verdict.problem = "timed out"
                    proxy.sock.close()
                    proxy = None  # the next cell gets a fresh server, as the notebook's would run
        if isinstance(proxy, RemoteFunction):
            if proxy.lost and not proxy.timed_out:
                verdict.problem = verdict.problem or "answer stopped"
            elif proxy.timed_out:
                verdict.problem = verdict.problem or "timed out"
            try:
                wire.send(proxy.sock, {"op": "bye"})
            except (OSError, wire.WireError):
                pass
        return verdict
    finally:
        if isinstance(proxy, RemoteFunction):
            proxy.sock.close()
        host.reset()
        verdict.seconds = round(time.monotonic() - t0, 2)


def _run_cell(g: dict, proxy: RemoteFunction) -> CellVerdict:
    lines: list[str] = []
    for check, kwargs in g["calls"]:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                getattr(grading, check)(proxy, **kwargs)
        except AssertionError as exc:
            return CellVerdict(g["grade_id"], g["points"], False, str(exc), lines)
        except Exception as exc:  # noqa: BLE001 - a broken reply must not stop the class
            return CellVerdict(g["grade_id"], g["points"], False,
                               f"The check could not be completed ({type(exc).__name__}).", lines)
        finally:
            lines += [ln for ln in out.getvalue().splitlines() if ln.strip()]
        if proxy.over_budget:
            return CellVerdict(g["grade_id"], g["points"], False, "", lines)
    return CellVerdict(g["grade_id"], g["points"], True, "", lines)


def load_plans(template_dir: Path) -> dict[str, dict[str, dict]]:
    """{assignment: {notebook: plan}} written by :func:`write_plans`."""
    return json.loads((Path(template_dir) / "plans.json").read_text())


def write_plans(template_dir: Path, instructor_root: Path, release_root: Path) -> dict:
    """Build and store the plan of every notebook of every assignment."""
    plans: dict[str, dict[str, dict]] = {}
    for nb_path in sorted(Path(instructor_root).glob("*/*.ipynb")):
        assignment = nb_path.parent.name
        rel = Path(release_root) / assignment / nb_path.name
        plan = build_plan(json.loads(nb_path.read_text()), json.loads(rel.read_text()),
                          where=f"{assignment}/{nb_path.name}")
        plans.setdefault(assignment, {})[nb_path.stem] = plan
    (Path(template_dir) / "plans.json").write_text(json.dumps(plans, indent=1))
    return plans


def verdict_outputs(cv: CellVerdict) -> list[dict]:
    """nbformat outputs that show an independent verdict in a graded cell."""
    outs = []
    if cv.lines:
        outs.append({"output_type": "stream", "name": "stdout", "text": "\n".join(cv.lines) + "\n"})
    if not cv.passed:
        first, *rest = (cv.message or "The check failed.").splitlines() or ["The check failed."]
        outs.append({"output_type": "error", "ename": "AssertionError", "evalue": cv.message,
                     "traceback": [f"AssertionError: {first}", *rest]})
    return copy.deepcopy(outs)
