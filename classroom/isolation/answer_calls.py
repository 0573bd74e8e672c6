"""The answer server's core: one notebook's cells in an IPython shell, then calls of its
graded function, served over a socket (:mod:`classroom.isolation.wire`).

:func:`serve` runs inside the sandbox, in a child the zygote forked
(:mod:`classroom.isolation.answer_server`) or in a sandbox of its own. Each call runs
through :func:`andrea_ref.grading.core.execute`, exactly as in a notebook, and what
happened comes back as data: the result, the exception, a time-out, the ATen operations
and ``andrea_ref`` functions that ran, the arguments after the call. The grader judges
it with the same checks as the notebook, in its own process.
"""
from __future__ import annotations

import os
import socket
import sys

import torch
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

import andrea_ref
from andrea_ref import grading
from andrea_ref.grading import core, watch
from classroom.isolation import answer_guard, wire


def _noop(*args, **kwargs):
    return None


def serve(sock: socket.socket) -> None:
    """Serve one notebook on ``sock``: run the cells it is sent in an IPython shell and
    serve calls of one function, until ``bye`` or the connection ends.

    Everything the server's core uses is captured here, before any learner code runs:
    private copies of the functions of :mod:`~classroom.isolation.wire`, this module and
    the modules a checked call runs through (``andrea_ref.grading.core.CALL_MODULES``:
    :func:`answer_guard.private`), the
    socket's ``sendall``, and the key the grader sends first, which only this
    function's locals hold. Every reply carries an HMAC of its frame and its sequence
    number under that key, so a frame written on the socket by anything but this core
    (``os.write`` on its descriptor) is told apart by the grader. A call's reply is
    built from that call's own outcome while the notebook's forbidden operations are
    still refused at the dispatcher (the block stays from the first call until the next
    learner cell runs). The audit hook (:func:`answer_guard.install_audit_hook`) and
    the thread sample after each call (:func:`answer_guard.other_threads`) add what
    they saw to the next reply as ``evidence``."""
    wire_, here, core_, *_ = answer_guard.private(wire, sys.modules[__name__],
                                                  *(sys.modules[name] for name in core.CALL_MODULES))
    pack, recv, WireError, dtype_name = wire_["pack"], wire_["recv"], wire.WireError, wire_["dtype_name"]
    execute, Forbidden, Outcome, Blocker = core_["execute"], watch.Forbidden, core.Outcome, watch.Blocker
    provided, Ref = dict(watch.PROVIDED), wire.Ref
    call_limit, sendable, text_of, plain = core.CALL_TIME_LIMIT, here["_sendable"], here["_text"], here["_plain"]
    sendall, digest, current_frames, Tensor = sock.sendall, _hmac_digest(), sys._current_frames, torch.Tensor
    clone, detach, equal = torch._C.TensorBase.clone, torch._C.TensorBase.detach, torch._C._VariableFunctions.equal
    watched = tuple(watch.ALWAYS_FORBIDDEN_DIRS) + (os.path.dirname(os.path.abspath(andrea_ref.__file__)) + os.sep,)
    evidence, busy = [], [False]
    st = {"key": None, "seq": 0, "shell": None, "fn": None, "returned": [], "calls": 0, "blocker": None}
    answer_guard.install_audit_hook(evidence, busy)

    def reply(head: dict, values=None) -> None:
        frame = pack(head, values)
        if st["key"] is not None:
            mac = digest(st["key"], st["seq"].to_bytes(8, "big") + frame, "sha256").hex()
            frame = pack({**head, "mac": mac}, values)
        st["seq"] += 1
        sendall(frame)

    def drained() -> list:
        out = evidence[:50]
        del evidence[:]
        return out

    def unblock() -> None:
        if st["blocker"] is not None:
            st["blocker"].remove()
            st["blocker"] = None

    def run_cells(cells: list) -> dict:
        unblock()  # learner cells run with the library as it is (their own tests may use it)
        for name in list(vars(grading)):  # the checks run in the grader, not here
            if name.startswith(("check_", "report_")):
                setattr(grading, name, _noop)
        if st["shell"] is None:
            cfg = Config()
            cfg.HistoryManager.enabled = False
            cfg.InteractiveShell.colors = "nocolor"
            st["shell"] = InteractiveShell.instance(config=cfg)
        errors = []
        for i, source in enumerate(cells):
            if not isinstance(source, str):
                continue
            result = st["shell"].run_cell(source, store_history=False)
            err = result.error_in_exec or result.error_before_exec
            if err is not None:
                errors.append({"cell": i, "ename": type(err).__name__, "evalue": text_of(err, 300)})
        evidence.extend(answer_guard.other_threads(current_frames, busy, watched))
        return {"errors": errors, "evidence": drained()}

    def bind(name) -> dict:
        value = st["shell"].user_ns.get(name) if isinstance(name, str) and st["shell"] is not None else None
        st["fn"] = value
        return {"found": value is not None, "callable": callable(value), "type": type(value).__name__,
                "evidence": drained()}

    def call(values: dict) -> tuple[dict, dict]:
        # a function a check hands over comes by name: this process's own copy is passed
        args = [provided.get(str(a), a) if isinstance(a, Ref) else a for a in values.get("args") or []]
        spec = values.get("forbidden") or {}
        forbidden = Forbidden(str(spec.get("what", "")), tuple(spec.get("aten_words") or ()))
        forbidden.ref_files = tuple(str(f) for f in spec.get("ref_files") or ())
        limit = float(values.get("time_limit") or call_limit)
        if forbidden.aten_words and (st["blocker"] is None or st["blocker"].words != forbidden.aten_words):
            unblock()
            st["blocker"] = Blocker(forbidden.aten_words).install()
        if not callable(st["fn"]):
            outcome = Outcome(error=NameError("the function is not defined"))
        else:
            outcome = execute(st["fn"], tuple(args), forbidden, time_limit=limit, blocker=st["blocker"])
        evidence.extend(answer_guard.other_threads(current_frames, busy, watched))
        if outcome.integrity:
            evidence.append(f"PyTorch or the builtins were found replaced: {outcome.integrity[:200]}")
        head = {"timed_out": outcome.timed_out, "ops": sorted(outcome.ops)[:500],
                "ref_hits": list(outcome.ref_hits)[:20], "integrity": outcome.integrity,
                "error": None, "result": {"kind": "none"}}
        out_values: dict = {}
        if outcome.error is not None:
            err = outcome.error
            head["error"] = {"type": type(err).__name__, "message": text_of(err, 2000), "where": list(outcome.where),
                             "builtin": type(err).__module__ == "builtins",
                             "not_implemented": isinstance(err, NotImplementedError)}
        res = outcome.result
        if type(res) is Tensor and dtype_name(res.dtype) is not None:
            head["result"] = {"kind": "tensor"}
            out_values["result"] = res
        elif isinstance(res, Tensor):
            head["result"] = {"kind": "subclass" if type(res) is not Tensor else "other",
                              "name": type(res).__name__ if type(res) is not Tensor else f"Tensor of dtype {res.dtype}"}
        elif res is not None:
            head["result"] = {"kind": "other", "name": type(res).__name__}
        sent = [plain(a) for a in args]
        out_values["args"] = [a if sendable(a) else None for a in sent]
        changed = {}
        for index, tensor, snapshot in st["returned"]:
            try:
                same = tensor.shape == snapshot.shape and tensor.dtype == snapshot.dtype and bool(equal(tensor, snapshot))
            except Exception:  # noqa: BLE001
                same = False
            if not same:
                changed[str(index)] = tensor if sendable(tensor) else None
        out_values["changed"] = changed
        head["index"] = st["calls"]
        if head["result"]["kind"] == "tensor":
            st["returned"] = (st["returned"] + [(st["calls"], res, clone(detach(res)))])[-64:]
        st["calls"] += 1
        head["evidence"] = drained()
        return head, out_values

    reply({"op": "ready", "pid": os.getpid()})
    try:
        while True:
            try:
                header, values = recv(sock)
            except (WireError, TimeoutError):
                return
            op = header.get("op")
            try:
                if op == "key" and st["key"] is None and isinstance(header.get("key"), str):
                    st["key"] = bytes.fromhex(header["key"])[:64]
                    reply({"op": "key"})
                elif op == "cells":
                    reply({"op": "cells", **run_cells((values or {}).get("cells") or [])})
                elif op == "bind":
                    reply({"op": "bind", **bind(header.get("name"))})
                elif op == "call":
                    head, out = call(values or {})
                    try:
                        reply({"op": "call", **head}, out)
                    except WireError as exc:  # e.g. a result too large to send
                        head["result"] = {"kind": "other", "name": f"unsendable result ({exc})"}
                        reply({"op": "call", **head}, {"args": []})
                else:
                    return
            except (OSError, WireError, ValueError):
                return
    finally:
        unblock()


def _hmac_digest():
    try:
        from _hashlib import hmac_digest  # OpenSSL's, in C: nothing in Python to replace
        return hmac_digest
    except ImportError:  # pragma: no cover - a Python without OpenSSL
        import hmac
        return hmac.digest


def _sendable(value, depth: int = 0, _tensor=torch.Tensor, _dtype_name=wire.dtype_name) -> bool:
    if depth > 4:
        return False
    if type(value) is _tensor:
        return _dtype_name(value.dtype) is not None
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_sendable(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _sendable(v, depth + 1) for k, v in value.items())
    return False


def _plain(value, _tensor=torch.Tensor, _detach=torch._C.TensorBase.detach):
    """An argument as it is sent back: a tensor subclass (``nn.Parameter``, which a
    learner's training code may wrap a tensor in), alone or as a dict's value, as the
    plain tensor it holds; anything else as it is."""
    if isinstance(value, _tensor) and type(value) is not _tensor:
        return _detach(value)
    if isinstance(value, dict):
        return {k: _detach(v) if isinstance(v, _tensor) and type(v) is not _tensor else v
                for k, v in value.items()}
    return value


def _text(exc: BaseException, limit: int, _limit=watch.time_limit) -> str:
    """str(exc), bounded; learner exceptions may misbehave when printed."""
    try:
        with _limit(2.0):
            text = str(exc)
    except BaseException:  # noqa: BLE001 - anything an exception's __str__ may do
        text = "<the exception's message could not be printed>"
    return text[:limit] if isinstance(text, str) else "<not text>"
