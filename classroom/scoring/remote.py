"""The learner's function as the checks see it in the grader: a stand-in that forwards
every call to an answer server and turns the reply (:mod:`classroom.isolation.wire`)
back into what a local call would have given -- the result, the exception, the time-out
and the operations that ran; arguments changed in place are changed here too.

:class:`Channel` is the grader's end of the connection: it gives the server a fresh
key first, and accepts only replies that carry the right HMAC of their frame and
sequence number under it (a frame the server's core did not write is
:class:`ForgedReply`). :class:`RemoteFunction` runs the learner's cells in the server,
binds the graded function and forwards the checks' calls; what the server's guards saw
collects in ``evidence``."""
from __future__ import annotations

import builtins
import hmac
import os
import re
import socket
import time

import torch

from andrea_ref.grading import core, watch

from ..isolation import wire
from ..isolation.backend import AnswerServers

GRACE = 5.0  # seconds a call may take beyond the checks' own time limit


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
    exc = _rebuilt_error(desc)
    where = desc.get("where")
    # the learner's lines it came from, shown as the notebook shows them (grading.failure_lines)
    exc.learner_where = [str(w)[:300] for w in where[:3]] if isinstance(where, list) else []
    return exc


def _rebuilt_error(desc: dict) -> BaseException:
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


def apply_back(local, remote) -> None:
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
                apply_back(local[k], v)
            else:
                local[k] = v


class ForgedReply(wire.WireError):
    """A reply without the HMAC the answer server's core gives its own replies."""


class Channel:
    """The grader's end of one answer server's socket (see the module docstring)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.key: bytes | None = None
        self.seq = 0

    def send(self, header: dict, values=None) -> None:
        wire.send(self.sock, header, values)

    def recv(self, timeout: float | None = None):
        header, values = wire.recv(self.sock, timeout=timeout)
        seq, self.seq = self.seq, self.seq + 1
        if self.key is None:
            return header, values
        mac = header.pop("mac", None)
        want = hmac.digest(self.key, seq.to_bytes(8, "big") + wire.pack(header, values), "sha256").hex()
        if not isinstance(mac, str) or not hmac.compare_digest(mac, want):
            raise ForgedReply("a reply the answer server's core did not write (forged or garbled on its socket)")
        return header, values

    def start(self, timeout: float) -> dict:
        """Wait for ``ready``, then hand the server its key (before any learner code runs)."""
        header, _ = self.recv(timeout=timeout)
        if header.get("op") != "ready":
            return header
        key = os.urandom(32)
        self.send({"op": "key", "key": key.hex()})
        self.key = key
        reply, _ = self.recv(timeout=timeout)
        if reply.get("op") != "key":
            raise wire.WireError("the answer server did not take its key")
        return header

    def close(self) -> None:
        self.sock.close()


class RemoteFunction(core.RemoteAnswer):
    """The learner's function, served by an answer server (see
    :func:`classroom.scoring.verdicts.check_notebook`)."""

    def __init__(self, channel: Channel, host: AnswerServers, call_limit: float):
        self.channel = channel
        self.sock = channel.sock
        self.host = host
        self.call_limit = call_limit
        self.lost: str | None = None
        self.calls = 0
        self.cell_deadline: float | None = None
        self.over_budget = False
        self.results: dict[int, torch.Tensor] = {}  # what earlier calls returned, by call index
        self.evidence: list[str] = []  # what the server's guards saw
        self.forged = False

    def note(self, header: dict) -> None:
        """Keep what a reply says the server's guards saw."""
        ev = header.get("evidence")
        if isinstance(ev, list):
            self.evidence += [str(e)[:400] for e in ev[:50] if isinstance(e, str)][:max(0, 200 - len(self.evidence))]

    def exchange(self, header: dict, values=None, timeout: float | None = None):
        """Send one request and read its reply (evidence kept)."""
        self.channel.send(header, values)
        try:
            reply, out = self.channel.recv(timeout=timeout)
        except ForgedReply as exc:
            self.forged = True
            self.evidence.append(str(exc))
            raise
        self.note(reply)
        return reply, out

    def remote_call(self, args, forbidden, work=1.0):
        if self.lost is not None:
            return core.Outcome(error=RemoteError("AnswerStopped", self.lost))
        spec = {"what": forbidden.what, "aten_words": list(forbidden.aten_words),
                "ref_files": list(forbidden.ref_files)}
        limit = self.call_limit * work  # a check that hands over more work allows more time
        wait = limit + GRACE
        budget = None if self.cell_deadline is None else self.cell_deadline - time.monotonic()
        if budget is not None and budget <= 0:
            self.over_budget = True
            return core.Outcome(error=RemoteError("CellTimeout", "the cell ran out of time"))
        try:
            sent = [wire.Ref(watch.provided_name(a)) if watch.provided_name(a) else a for a in args]
            header, values = self.exchange({"op": "call"}, {"args": sent, "forbidden": spec,
                                                            "time_limit": limit},
                                           timeout=wait if budget is None else min(wait, budget))
        except TimeoutError:
            self.host.reset()
            if budget is not None and budget < wait:
                self.over_budget = True
                self.lost = "the cell ran out of time"
                return core.Outcome(error=RemoteError("CellTimeout", self.lost))
            self.timed_out, self.timed_out_after = True, limit
            self.lost = f"did not finish within {limit:g} s"
            return core.Outcome(timed_out=True)
        except (wire.WireError, OSError) as exc:
            self.lost = ("the process running this code stopped (killed: over the memory limit, "
                         f"or it ended itself): {exc}")
            return core.Outcome(error=RemoteError("AnswerStopped", self.lost))
        self.calls += 1
        values = values if isinstance(values, dict) else {}
        remote_args = values.get("args")
        if isinstance(remote_args, list) and len(remote_args) == len(args):
            for local, remote in zip(args, remote_args):
                apply_back(local, remote)
        ops = header.get("ops") if isinstance(header.get("ops"), list) else []
        hits = header.get("ref_hits") if isinstance(header.get("ref_hits"), list) else []
        integrity = header.get("integrity")
        changed = values.get("changed")
        if isinstance(changed, dict):
            for key, now in changed.items():
                if str(key).isdigit() and int(key) in self.results:
                    apply_back(self.results[int(key)], now)
        result = _stand_in(header.get("result"), values)
        if type(result) is torch.Tensor and isinstance(header.get("index"), int):
            self.results[header["index"]] = result
            if len(self.results) > 64:
                self.results.pop(min(self.results))
        outcome = core.Outcome(
            result=result,
            error=_error(header.get("error")),
            timed_out=bool(header.get("timed_out")),
            ops=[str(o)[:80] for o in ops if isinstance(o, str)],
            ref_hits=[_name(h) for h in hits],
            integrity=str(integrity)[:500] if integrity else None,
        )
        if outcome.timed_out:
            self.timed_out, self.timed_out_after = True, limit
        return outcome
