"""Serve a learner's function to the grader, from inside the sandbox.

The grader never runs a learner's code in its own process. For every notebook it
grades it asks for a fresh *answer server*: a process inside the sandbox that runs
the notebook's locked set-up cells and the learner's answer cells, then answers
calls of the graded function over a socket (:mod:`classroom.isolation.wire`: tensors as dtype,
shape and bytes). Each call runs through :func:`andrea_ref.grading._core.execute`,
exactly as in a notebook, and what happened comes back as data (the result, the
exception, time-out, the ATen operations and ``andrea_ref`` functions that ran, the
arguments after the call); the grader judges it with the same checks as the
notebook, in its own process.

Starting Python with PyTorch takes seconds, so a grading worker keeps one
**zygote**: a process in its own sandbox that has imported PyTorch, ``andrea_ref``
and IPython and never runs learner code. For each notebook it forks a child that
first gives itself fresh namespaces (:func:`classroom.isolation.namespaces.isolate_child`)
and only then runs the learner's cells. The zygote is not dumpable and not visible in
the child's PID namespace, so learner code can neither signal nor read nor write it.
Where nested namespaces are not available, the grader starts one sandbox per notebook
instead (``python answer_server.py job``). The grader's side of a zygote is
:class:`classroom.isolation.zygote.Zygote`.

Usage (inside bubblewrap)::

    python -I answer_server.py zygote LISTENING_FD [NEST_FILTER_FD]
    python -I answer_server.py kernel-zygote LISTENING_FD [NEST_FILTER_FD]
    python -I answer_server.py job SOCKET_FD

The same zygote, started as ``kernel-zygote`` under the kernels' uid, also forks the
kernels nbgrader runs the notebooks in: each gets the isolation above plus its private
working folder mounted at the notebook's own path, and no view of any other job's
scratch space (:func:`classroom.isolation.namespaces.kernel_mounts`). The kernel
launcher (:mod:`classroom.isolation.sandbox`) falls back to one bubblewrap sandbox per
kernel wherever that is not available.
"""
from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import sys
from pathlib import Path

# --------------------------------------------------------------------------- imports
if __name__ == "__main__":
    # python -I puts nothing on sys.path and ignores PYTHONPATH: the sandbox's PYTHONPATH
    # (the grading run's copy of the course, then the grader's code) first, then the root
    # of this file's package.
    for _entry in reversed([*os.environ.get("PYTHONPATH", "").split(os.pathsep),
                            str(Path(__file__).resolve().parents[2])]):
        if _entry and _entry not in sys.path:
            sys.path.insert(0, _entry)

import torch  # noqa: E402  (preloaded once in the zygote)
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from traitlets.config import Config  # noqa: E402

import andrea_ref  # noqa: E402,F401
from andrea_ref import i18n  # noqa: E402
from andrea_ref import grading  # noqa: E402
from andrea_ref.grading import _core, watch  # noqa: E402
from classroom.isolation import answer_guard, wire  # noqa: E402
from classroom.isolation.namespaces import isolate_child, kernel_mounts, set_dumpable  # noqa: E402


def _become_kernel(request: dict, out_fd: int) -> None:
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    os.close(out_fd)
    for key, value in (request.get("env") or {}).items():
        if isinstance(key, str) and isinstance(value, str) and key.startswith("NBGRADER_"):
            os.environ[key] = value
        elif key == "ANDREA_LANG" and value in i18n.LANGUAGES:  # the checks' language
            os.environ[key] = value
    os.chdir(request["workdir"])
    sys.argv = ["ipykernel_launcher", "-f", request["connection_file"], "--IPKernelApp.ignore_cwd=True",
                *[str(a) for a in request.get("args", [])]]
    from ipykernel.kernelapp import IPKernelApp  # only kernels need it (the kernel zygote preloads it)
    IPKernelApp.launch_instance()


# --------------------------------------------------------------------------- serving
def _noop(*args, **kwargs):
    return None


def serve(sock: socket.socket) -> None:
    """Serve one notebook on ``sock``: run the cells it is sent in an IPython shell and
    serve calls of one function, until ``bye`` or the connection ends.

    Everything the server's core uses is captured here, before any learner code runs:
    private copies of the functions of :mod:`~classroom.isolation.wire`, this module and
    the modules a checked call runs through (``andrea_ref.grading._core.CALL_MODULES``:
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
    wire_, here, core, *_ = answer_guard.private(wire, sys.modules[__name__],
                                                 *(sys.modules[name] for name in _core.CALL_MODULES))
    pack, recv, WireError, dtype_name = wire_["pack"], wire_["recv"], wire.WireError, wire_["dtype_name"]
    execute, Forbidden, Outcome, Blocker = core["execute"], watch.Forbidden, _core.Outcome, watch.Blocker
    provided, Ref = dict(watch.PROVIDED), wire.Ref
    call_limit, sendable, text_of, plain = _core.CALL_TIME_LIMIT, here["_sendable"], here["_text"], here["_plain"]
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


# --------------------------------------------------------------------------- zygote
def _devnull_stdio() -> None:
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def zygote(listening_fd: int, nest_filter: bytes | None, kernels: bool = False) -> None:
    """Wait for requests and fork one isolated child per request:

    - ``spawn`` with a socket (SCM_RIGHTS): an answer server on that socket;
    - a JSON ``{"op": "kernel", ...}`` with a pipe for its output: an IPython kernel
      for nbgrader (every earlier child is killed first: one kernel at a time);
    - ``ping``: ``ready``; ``reset``: kill every process but the zygote.

    ``listening_fd`` is a listening socket; each connection carries one request (the
    grading worker and nbgrader's kernel launcher both connect). ``kernels``: preload
    what kernels need."""
    set_dumpable(False)
    if kernels:  # preloaded once here for every kernel (only kernels need it)
        from ipykernel import kernelapp  # noqa: F401
    # PyTorch imports its compiler the first time a process builds an optimizer (any
    # torch.optim class): 1.5 s, about 4 s under the checks' profiler, which would count
    # against the time limit of the first checked call of a training loop that uses one.
    # Imported once here, for every child.
    importlib.import_module("torch._dynamo")
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    listener = socket.socket(fileno=listening_fd)
    while True:
        try:
            ctl, _ = listener.accept()
        except OSError:
            return
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 4)
        except OSError:
            ctl.close()
            continue
        if msg:
            _handle(ctl, listener, msg, fds, nest_filter)
        ctl.close()


def _kill_children() -> None:
    """SIGKILL every process this uid may signal in the zygote's PID namespace, except
    the zygote itself (and the namespace's init): all of them are children's."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass  # none left


def _handle(ctl, listener, msg: bytes, fds: list[int], nest_filter) -> None:
    if msg == b"ping":
        for fd in fds:
            os.close(fd)
        ctl.sendall(b"ready")
    elif msg.startswith(b"{") and len(fds) == 1:
        request = json.loads(msg)
        _kill_children()  # one kernel at a time: the last one is over
        pid = os.fork()
        if pid == 0:
            listener.close()
            ctl.close()
            try:
                isolate_child(nest_filter, prepare=kernel_mounts(request))
                _become_kernel(request, fds[0])
            except BaseException as exc:  # noqa: BLE001 - told through the output pipe
                try:
                    os.write(fds[0], f"kernel zygote: {exc}\n".encode()[:2000])
                finally:
                    os._exit(3)
            os._exit(0)
        os.close(fds[0])
        ctl.sendall(b"ok")
    elif msg == b"spawn" and len(fds) == 1:
        pid = os.fork()
        if pid == 0:
            ctl.close()
            listener.close()
            job = socket.socket(fileno=fds[0])
            try:
                isolate_child(nest_filter)
            except OSError as exc:
                try:
                    wire.send(job, {"op": "error", "message": f"cannot isolate the answer: {exc}"})
                finally:
                    os._exit(3)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                serve(job)
            finally:
                os._exit(0)
        os.close(fds[0])
        ctl.sendall(b"ok")
    elif msg == b"reset":
        for fd in fds:
            os.close(fd)
        _kill_children()
        ctl.sendall(b"ok")
    else:
        for fd in fds:
            os.close(fd)
        ctl.sendall(b"?")


def main(argv: list[str]) -> None:
    if len(argv) >= 2 and argv[0] in ("zygote", "kernel-zygote"):
        nest = None
        if len(argv) >= 3:
            with os.fdopen(int(argv[2]), "rb") as f:
                nest = f.read() or None
        _devnull_stdio()
        zygote(int(argv[1]), nest, kernels=argv[0] == "kernel-zygote")
    elif len(argv) == 2 and argv[0] == "job":
        _devnull_stdio()
        serve(socket.socket(fileno=int(argv[1])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
