"""The independent check: a notebook's points decided where no learner code ever ran.

nbgrader runs a submitted notebook in a kernel where the learner's code and the
checks share one process; code in an answer cell can rebind the checks, hook the
import machinery or rewrite the cells that follow, so the verdicts printed in that
notebook prove nothing. This module decides the points instead:

1. :func:`classroom.scoring.plan.build_plan` reads, once per assignment, what to run
   and check (the set-up and answer cells, the graded cells' calls, hidden ones
   included, the rule against shortcuts); :func:`~classroom.scoring.plan.answer_runs`
   picks the learner's code from a submission, graded cell by graded cell.
2. An answer server (:mod:`classroom.isolation.answers`: a fresh sandboxed process)
   runs those cells as the notebook does, top to bottom, and before each graded cell
   serves the function as the cells above it left it (its last definition there).
3. :func:`check_notebook` runs the same ``andrea_ref.grading`` checks as the notebook
   -- in this process -- against a :class:`~classroom.scoring.remote.RemoteFunction`
   that forwards each call over a socket; the result, the exception, the time-out and
   the operations that ran come back as data (:mod:`classroom.isolation.wire`), each
   reply signed by the server's core, and are judged here. The time limit is enforced
   from here too: an answer that does not reply is killed.
4. The rules against shortcuts are decided here too, on the answer's source
   (:mod:`classroom.scoring.shortcuts`): a forbidden implementation reached from the
   graded function costs the cells the rule governs; code reaching for machinery, or
   anything the server's guards refused, holds them for review with its evidence
   (:mod:`classroom.scoring.review`: the instructor may grant them). A cell's points
   follow :mod:`andrea_ref.grading.points`.

What the learner still controls is what their function returns, which is what the
checks judge.
"""
from __future__ import annotations

import contextlib
import copy
import io
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from andrea_ref import grading
from andrea_ref.grading import core, inputs, runner
from andrea_ref.grading.points import ACCEPTED, HELD, SHORTCUT, cell_points, total
from andrea_ref.i18n import gettext

from ..isolation import wire
from ..isolation.answers import AnswerUnavailable
from ..isolation.backend import AnswerServers
from .plan import answer_runs, locked_changes, untouched
from .remote import GRACE, Channel, RemoteFunction
from .shortcuts import analyse

_ = gettext  # the messages below are marked for the catalogs (scripts/catalogs.py)


@dataclass
class CellVerdict:
    grade_id: str
    points: float
    passed: bool  # the cell earns its points (the checks passed and no rule withholds them)
    message: str = ""
    lines: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)  # a failure as the notebook shows it
    checked: bool | None = None  # the checks' own verdict (None: as ``passed``)
    rule: str | None = None  # points.SHORTCUT, HELD or ACCEPTED
    fault: str | None = None  # the check itself raised, in the grader: no verdict on the answer

    @property
    def score(self) -> float:
        return cell_points(self.points, self.passed if self.checked is None else self.checked, self.rule)

    @property
    def checked_score(self) -> float:
        """What the checks alone give (what the notebook's own graded cell is compared with)."""
        return cell_points(self.points, self.passed if self.checked is None else self.checked)


@dataclass
class NotebookVerdict:
    cells: dict[str, CellVerdict]
    answer_errors: list[dict] = field(default_factory=list)
    problem: str | None = None  # the answer could not be checked normally (time-out, memory ...)
    untouched: bool = False
    probes: list[str] = field(default_factory=list)  # notes: file access, harmless to the grade
    locked_changes: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)  # why it is held for review (evidence)
    shortcuts: dict[str, list[str]] = field(default_factory=dict)  # per graded cell: forbidden implementations
    accepted: bool = False  # held, and the instructor granted the points
    seconds: float = 0.0

    @property
    def score(self) -> float:
        return total(c.score for c in self.cells.values())

    @property
    def faults(self) -> dict[str, str]:
        """The cells whose check failed on the grader's side ({grade_id: what it raised})."""
        return {g: c.fault for g, c in self.cells.items() if c.fault}

    @property
    def held(self) -> bool:
        """Points withheld until someone looks: evidence against the answer not yet
        accepted, or a check that broke on the grader's side (never accepted: it is
        fixed and graded again)."""
        return bool(self.faults) or (bool(self.review) and not self.accepted)


class _Server:
    """The answer server of one notebook, as the check goes from graded cell to graded
    cell: started with every cell that ran so far, sent the new ones after that."""

    def __init__(self, plan: dict, host: AnswerServers, verdict: NotebookVerdict, *, cell_timeout: float,
                 call_limit: float, deadline: float):
        self.plan, self.host, self.verdict = plan, host, verdict
        self.cell_timeout, self.call_limit, self.deadline = cell_timeout, call_limit, deadline
        self.proxy: RemoteFunction | None = None
        self.bound: str | None = None  # the function the proxy serves
        self.dead: str | None = None  # why no later cell can be checked either
        self.ran: list[str] = list(plan["setup"])
        self.pending: list[str] = list(plan["setup"])
        self.evidence: list[str] = []

    def left(self, cap: float) -> float:
        return max(1.0, min(cap, self.deadline - time.monotonic()))

    def function(self, name: str, new_cells: list[str]) -> RemoteFunction | str:
        """The function ``name`` as the cells so far, ``new_cells`` last, left it, or why
        there is none."""
        self.ran += new_cells
        self.pending += new_cells
        if self.dead:
            return self.dead
        if self.proxy is not None and (self.proxy.lost or self.proxy.timed_out):
            if not new_cells and name == self.bound:
                return self.proxy  # its calls fail as they did (time-out, stopped process)
            # a new definition below, or another function (in a notebook, one function
            # running out of time does not stop the next): a fresh server runs everything so far
            self.close()
        try:
            if self.proxy is None:
                channel = Channel(self.host.open())
                self.proxy = RemoteFunction(channel, self.host, self.call_limit)
                self.pending = list(self.ran)
                header = channel.start(timeout=self.left(120.0))
                if header.get("op") != "ready":
                    raise AnswerUnavailable(str(header.get("message") or "the answer server did not start")[:300])
            if self.pending:
                cells, self.pending = self.pending, []
                try:
                    header, _ = self.proxy.exchange({"op": "cells"}, {"cells": cells},
                                                    timeout=self.left(self.cell_timeout * max(1, len(cells)) + GRACE))
                except TimeoutError:
                    self.host.reset()
                    self.verdict.problem = "timed out"
                    return self._die(f"The answer cells did not finish within {self.cell_timeout:g} s each (an "
                                     "endless loop at the top level?).")
                errors = [e for e in header.get("errors", []) if isinstance(e, dict)]
                self.verdict.answer_errors = (self.verdict.answer_errors + errors)[:20]
            header, _ = self.proxy.exchange({"op": "bind", "name": name}, timeout=30)
            self.bound = name
        except (wire.WireError, TimeoutError, OSError) as exc:
            self.host.reset()
            self.verdict.problem = self.verdict.problem or "answer stopped"
            if isinstance(exc, wire.WireError) and not isinstance(exc, TimeoutError) and "closed" in str(exc):
                return self._die("The process running the answer cells stopped (it ended itself, or was killed "
                                 "at a limit) before the checks could run.")
            return self._die(f"The process running the answer stopped before the checks could run ({exc}).")
        if not header.get("found"):
            return (f"`{name}` is not defined: the answer cell did not define it (or raised an "
                    "error before it did).")
        return self.proxy

    def _die(self, why: str) -> str:
        self.close()
        self.dead = why
        return why

    def restart(self) -> None:
        """The next graded cell gets a fresh server, as the notebook's next cell would run."""
        self.close()

    def close(self) -> None:
        if self.proxy is not None:
            self.evidence += self.proxy.evidence
            if self.proxy.forged:
                self.verdict.problem = self.verdict.problem or "answer stopped"
            self.proxy.sock.close()
            self.proxy = None
            self.bound = None


def check_notebook(plan: dict, nb: dict, host: AnswerServers, *, cell_timeout: float = 60.0,
                   call_limit: float | None = None, deadline: float | None = None,
                   accepted: bool = False) -> NotebookVerdict:
    """Grade the submitted notebook ``nb`` (a dict) by the plan, out of process.

    Each graded cell has ``cell_timeout`` seconds, as in nbgrader; a cell that runs out
    of time fails, its server is killed and the next cell gets a fresh one (as the
    notebook's next cell would still run). ``deadline`` (``time.monotonic()``) ends it
    all: the cells not checked by then fail. ``accepted``: the instructor has reviewed
    this submission and grants what its checks give (see :mod:`.review`)."""
    t0 = time.monotonic()
    call_limit = call_limit or core.CALL_TIME_LIMIT
    deadline = deadline if deadline is not None else t0 + 600.0
    runs = answer_runs(plan, nb)
    found = analyse(plan, runs)
    verdict = NotebookVerdict(cells={}, untouched=untouched(plan, nb), locked_changes=locked_changes(plan, nb),
                              probes=[f.text() for f in found.notes][:20], accepted=accepted)
    graded = {g["grade_id"]: g for g in plan["graded"]}
    server = _Server(plan, host, verdict, cell_timeout=cell_timeout, call_limit=call_limit, deadline=deadline)
    try:
        with inputs.cpu_only(), runner.quiet():
            for gid, new in runs:
                g = graded[gid]
                if time.monotonic() >= deadline:
                    verdict.cells[gid] = CellVerdict(gid, g["points"], False,
                                                     "Not checked: the grading deadline was reached.")
                    verdict.problem = verdict.problem or "timed out"
                    continue
                proxy = server.function(g["function"], [src for _, src in new])
                if isinstance(proxy, str):
                    verdict.cells[gid] = CellVerdict(gid, g["points"], False, proxy)
                    continue
                proxy.cell_deadline = min(deadline, time.monotonic() + cell_timeout)
                verdict.cells[gid] = cv = run_cell(g, proxy)
                if proxy.over_budget:
                    cv.message = (f"The checks of this cell did not finish within {cell_timeout:g} s; "
                                  "the cell was stopped.")
                    verdict.problem = "timed out"
                    server.restart()
                elif proxy.lost:
                    verdict.problem = verdict.problem or ("timed out" if proxy.timed_out else "answer stopped")
        if server.proxy is not None:
            try:
                wire.send(server.proxy.sock, {"op": "bye"})
            except (OSError, wire.WireError):
                pass
    finally:
        server.close()
        host.reset()
        verdict.review = [f.text() for f in found.machinery][:30] + [
            f"the answer server's guards: {e}" for e in dict.fromkeys(server.evidence)][:30]
        _apply_rules(plan, verdict, runs, found)
        verdict.seconds = round(time.monotonic() - t0, 2)
    return verdict


def _apply_rules(plan: dict, verdict: NotebookVerdict, runs, found) -> None:
    """What the rules decided on the source make of each checked cell."""
    graded = {g["grade_id"]: g for g in plan["graded"]}
    for k, (gid, _cells) in enumerate(runs):
        cv = verdict.cells.get(gid)
        if cv is None or cv.fault or not graded[gid].get("shortcut", True):
            continue
        rule_text = gettext((graded[gid].get("forbidden") or {}).get("what") or "")
        hits = found.shortcuts.get(k) or []
        if hits:
            verdict.shortcuts[gid] = [f.text() for f in hits][:10]
        cv.checked = cv.passed
        if hits:
            cv.rule = SHORTCUT
            where = _("cell {cell}, line {line}").format(cell=hits[0].cell, line=hits[0].line)
            text = _("`{name}` reaches {what} ({where}); {rule} The checks read your code: a library "
                           "version reached from your function earns none of the points this rule governs, "
                           "whatever name it is called by. Comparing with it in a test cell of your own is fine."
                           ).format(name=graded[gid]["function"], what=hits[0].what.split(",")[0], where=where,
                                    rule=rule_text)
        elif verdict.review:
            cv.rule = ACCEPTED if verdict.accepted else HELD
            if verdict.accepted:
                continue
            text = _("Held for review: the code of this notebook reaches for machinery that no answer "
                           "here needs ({what}). Your instructor will look at it; until then this cell earns no "
                           "points.").format(what=verdict.review[0][:300])
        else:
            continue
        if cv.passed:
            cv.passed, cv.message = False, text
            cv.shown = grading.failure_lines(AssertionError(text))
        else:
            cv.message = f"{cv.message}\n{text}" if cv.message else text


def run_cell(g: dict, proxy: RemoteFunction) -> CellVerdict:
    """The verdict of graded cell ``g`` on the served function: every check of the cell
    runs here, none left to anyone (``runner.every_check_runs``)."""
    lines: list[str] = []
    for check, kwargs in g["calls"]:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), runner.every_check_runs():
                getattr(grading, check)(proxy, **kwargs)
        except AssertionError as exc:
            return CellVerdict(g["grade_id"], g["points"], False, str(exc), lines, grading.failure_lines(exc))
        except Exception as exc:  # noqa: BLE001 - a broken check must not stop the class
            return _fault(g, exc, lines)
        finally:
            lines += [ln for ln in out.getvalue().splitlines() if ln.strip()]
        if proxy.over_budget:
            return CellVerdict(g["grade_id"], g["points"], False, "", lines)
    return CellVerdict(g["grade_id"], g["points"], True, "", lines)


def _fault(g: dict, exc: Exception, lines: list[str]) -> CellVerdict:
    """A check that raised something other than its verdict (an AssertionError).

    Everything the learner's function does reaches the checks as an outcome
    (:class:`~classroom.scoring.remote.RemoteFunction` turns a stopped server, a time-out
    or a garbled reply into one; ``andrea_ref.grading`` turns outcomes into verdicts), so
    an exception here broke in the grader: a missing file, a bug in a check. It is no
    verdict on the answer: the cell's points are held, the learner is told it is not
    their code, and the instructor sees where it broke."""
    where = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    at = f" at {Path(where[0].filename).name}:{where[0].lineno}" if where else ""
    fault = f"{type(exc).__name__}{at}: {str(exc)[:300]}"
    text = _("This cell was not graded: its check stopped with an error on the grader's side ({error}), "
             "which says nothing about your code. Your instructor will see it; until it is fixed and the "
             "notebook graded again, this cell earns no points.").format(error=type(exc).__name__)
    return CellVerdict(g["grade_id"], g["points"], False, text, lines, grading.failure_lines(AssertionError(text)),
                       checked=False, rule=HELD, fault=fault)


def verdict_outputs(cv: CellVerdict) -> list[dict]:
    """nbformat outputs that show an independent verdict in a graded cell."""
    outs = []
    if cv.lines:
        outs.append({"output_type": "stream", "name": "stdout", "text": "\n".join(cv.lines) + "\n"})
    if not cv.passed:
        shown = cv.shown or grading.failure_lines(AssertionError(cv.message or "The check failed."))
        outs.append({"output_type": "error", "ename": grading.ERROR_NAME, "evalue": cv.message,
                     "traceback": list(shown)})
    return copy.deepcopy(outs)
