"""Serve a learner's function to the grader, from inside the sandbox.

The grader never runs a learner's code in its own process. For every notebook it
grades it asks for a fresh *answer server*: a process inside the sandbox that runs
the notebook's locked set-up cells and the learner's answer cells, then answers
calls of the graded function over a socket (:mod:`classroom.wire`: tensors as dtype,
shape and bytes). Each call runs through :func:`andrea_ref.grading._core.execute`,
exactly as in a notebook, and what happened comes back as data (the result, the
exception, time-out, the ATen operations and ``andrea_ref`` functions that ran, the
arguments after the call); the grader judges it with the same checks as the
notebook, in its own process.

Starting Python with PyTorch takes seconds, so a grading worker keeps one
**zygote**: a process in its own sandbox that has imported PyTorch, ``andrea_ref``
and IPython and never runs learner code. For each notebook it forks a child that
first gives itself fresh namespaces -- a user namespace (no capabilities outside it),
mount (fresh, size-capped ``/tmp``, ``$HOME`` and ``/dev/shm``), PID (when the
server ends, everything it started dies with it), network (none) and IPC -- then
drops every capability, adds a system-call filter that forbids new namespaces and
mounts (:mod:`classroom.seccomp`), and only then runs the learner's cells. The
zygote is not dumpable and not visible in the child's PID namespace, so learner code
can neither signal nor read nor write it. Where nested namespaces are not available,
the grader starts one sandbox per notebook instead (``python answer_server.py job``).

Usage (by :mod:`classroom.independent`, inside bubblewrap)::

    python -I answer_server.py zygote CONTROL_FD [NEST_FILTER_FD]
    python -I answer_server.py kernel-zygote LISTENING_FD [NEST_FILTER_FD]
    python -I answer_server.py job SOCKET_FD

The same zygote, started as ``kernel-zygote`` under the kernels' uid, also forks the
kernels nbgrader runs the notebooks in: each gets the isolation
above plus its private working folder mounted at the notebook's own path, and no view
of any other job's scratch space (:func:`kernel_mounts`). The kernel launcher (``classroom.sandbox``) falls
back to one bubblewrap sandbox per kernel wherever that is not available.
"""
from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import sys

# --------------------------------------------------------------------------- imports
# The repository root (this file's parent's parent) holds andrea_ref and classroom;
# python -I does not put it on sys.path by itself.
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

import torch  # noqa: E402  (preloaded once in the zygote)

import andrea_ref  # noqa: E402,F401
from andrea_ref import i18n  # noqa: E402
from andrea_ref import grading  # noqa: E402
from andrea_ref.grading import _core  # noqa: E402
from classroom import wire  # noqa: E402

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 16384, 1 << 18
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 4, 24, 47, 4
HOME = os.environ.get("HOME", "/home/learner")
SCRATCH_SIZES = {"/tmp": "256m", HOME: "64m", "/dev/shm": "64m"}


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount_tmpfs(target: str, size: str) -> None:
    _check(_libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV,
                       f"size={size},mode=1777".encode()), f"mount tmpfs on {target}")


def _drop_capabilities() -> None:
    """No capability left, not even inside the fresh user namespace."""
    for cap in range(64):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # EINVAL past the last one: fine
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    _check(_libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()), "capset")


def isolate_child(nest_filter: bytes | None, prepare=None) -> None:
    """In a fork of the zygote: fresh namespaces and scratch space, then no way back.
    Forks once more; the caller continues as PID 1 of the new PID namespace.
    ``prepare()`` runs there while the process may still mount (for a kernel's
    working folder)."""
    uid, gid = os.getuid(), os.getgid()
    # the zygote is not dumpable, which makes /proc/self root's: this process must write
    # its own uid map there (no other process of this uid is alive to take advantage)
    _libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
                         | CLONE_NEWUTS), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    if prepare is not None:
        prepare = prepare()  # before the scratch mounts, which may hide what it needs
    # read-only mounts below a scratch folder (a course or Python environment that lives
    # in /tmp, say) stay visible; everything writable there is hidden
    kept = [(path, os.open(path, os.O_PATH)) for path in _readonly_mounts_below(SCRATCH_SIZES)]
    for target, size in SCRATCH_SIZES.items():
        if os.path.isdir(target):
            _mount_tmpfs(target, size)
    for path, fd in kept:
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(path, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            open(path, "a").close()
        _bind(f"/proc/self/fd/{fd}", path)  # a bind keeps the read-only flag of its source
        os.close(fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote ignores it; we wait below
    pid = os.fork()
    if pid:  # stay until the server is done, so the zygote can reap both
        try:
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
        except OSError:
            code = 1
        os._exit(code if 0 <= code < 256 else 1)
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    os.chdir("/tmp")
    if prepare is not None:
        prepare()
    _drop_capabilities()
    if nest_filter:
        from classroom.seccomp import install
        install(nest_filter)


def _readonly_mounts_below(targets) -> list[str]:
    """Read-only mount points strictly below any of ``targets``, outermost first, none
    inside another one listed (a recursive bind carries those)."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])  # \040: a space
            if "ro" in fields[5].split(",") and any(point.startswith(t.rstrip("/") + "/") for t in targets):
                found.append(point)
    found.sort(key=lambda p: (p.count("/"), p))
    top = []
    for point in found:
        if not any(point.startswith(t + "/") for t in top):
            top.append(point)
    return top


def _bind(source: str, target: str) -> None:
    _check(_libc.mount(source.encode(), target.encode(), None, 4096 | MS_REC, None), f"bind {target}")  # MS_BIND


def _under_scratch(path: str) -> bool:
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in SCRATCH_SIZES)


def kernel_mounts(request: dict):
    """Mount plan for a kernel: its private copy ``work`` (in the scratch space) seen
    at the notebook's own path ``workdir`` below ``anchor``, every other job's scratch
    space hidden. Opens ``work`` before the fresh ``/tmp`` may hide it; the returned
    step does the mounts in the new PID namespace."""
    anchor, workdir, work = request["anchor"], request["workdir"], request["work"]
    scratch = request["scratch_root"]
    if os.path.commonpath([anchor, workdir]) != anchor or os.path.commonpath([scratch, work]) != scratch:
        raise OSError(22, "the kernel's folders are not where the zygote expects them")

    runtime = request["runtime_dir"]

    def before():
        fd = os.open(work, os.O_PATH | os.O_DIRECTORY)
        rt = os.open(runtime, os.O_PATH | os.O_DIRECTORY)

        def after():
            if not _under_scratch(anchor):
                _mount_tmpfs(anchor, "16m")
            os.makedirs(workdir, exist_ok=True)
            _bind(f"/proc/self/fd/{fd}", workdir)
            os.close(fd)
            if _under_scratch(runtime):  # the fresh /tmp hid the kernel's sockets folder
                os.makedirs(runtime, exist_ok=True)
                _bind(f"/proc/self/fd/{rt}", runtime)
            os.close(rt)
            if not _under_scratch(scratch):
                _mount_tmpfs(scratch, "1m")  # no other job's copy is visible
        return after

    return before


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
    from ipykernel.kernelapp import IPKernelApp
    IPKernelApp.launch_instance()


# --------------------------------------------------------------------------- serving
def _noop(*args, **kwargs):
    return None


class Server:
    """Runs the cells it is sent in an IPython shell and serves calls of one function."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.shell = None
        self.fn = None
        # tensors returned earlier, with a copy of what they held: a function that
        # writes into a buffer it returned before shows up as a change to those
        self.returned: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        self.calls = 0

    def _shell(self):
        if self.shell is None:
            from IPython.core.interactiveshell import InteractiveShell
            from traitlets.config import Config
            cfg = Config()
            cfg.HistoryManager.enabled = False
            cfg.InteractiveShell.colors = "nocolor"
            self.shell = InteractiveShell.instance(config=cfg)
        return self.shell

    def run_cells(self, cells: list) -> dict:
        # The notebook's own checks are not needed here: the grader runs them outside.
        for name in list(vars(grading)):
            if name.startswith(("check_", "report_")):
                setattr(grading, name, _noop)
        shell = self._shell()
        errors = []
        for i, source in enumerate(cells):
            if not isinstance(source, str):
                continue
            result = shell.run_cell(source, store_history=False)
            err = result.error_in_exec or result.error_before_exec
            if err is not None:
                errors.append({"cell": i, "ename": type(err).__name__, "evalue": _text(err, 300)})
        return {"errors": errors}

    def bind(self, name: str) -> dict:
        value = self._shell().user_ns.get(name) if isinstance(name, str) else None
        self.fn = value
        return {"found": value is not None, "callable": callable(value),
                "type": type(value).__name__}

    def call(self, values: dict) -> tuple[dict, dict]:
        args = list(values.get("args") or [])
        spec = values.get("forbidden") or {}
        forbidden = _core.Forbidden(str(spec.get("what", "")), tuple(spec.get("aten_words") or ()))
        forbidden.ref_files = tuple(str(f) for f in spec.get("ref_files") or ())
        limit = float(values.get("time_limit") or _core.CALL_TIME_LIMIT)
        if not callable(self.fn):
            outcome = _core.Outcome(error=NameError("the function is not defined"))
        else:
            outcome = _core.execute(self.fn, tuple(args), forbidden, time_limit=limit)
        head = {"timed_out": outcome.timed_out, "ops": sorted(outcome.ops)[:500],
                "ref_hits": list(outcome.ref_hits)[:20], "integrity": outcome.integrity,
                "error": None, "result": {"kind": "none"}}
        out_values: dict = {}
        if outcome.error is not None:
            err = outcome.error
            head["error"] = {"type": type(err).__name__, "message": _text(err, 2000),
                             "builtin": type(err).__module__ == "builtins",
                             "not_implemented": isinstance(err, NotImplementedError)}
        res = outcome.result
        if type(res) is torch.Tensor and wire.dtype_name(res.dtype) is not None:
            head["result"] = {"kind": "tensor"}
            out_values["result"] = res
        elif isinstance(res, torch.Tensor):
            head["result"] = {"kind": "subclass" if type(res) is not torch.Tensor else "other",
                              "name": type(res).__name__ if type(res) is not torch.Tensor
                              else f"Tensor of dtype {res.dtype}"}
        elif res is not None:
            head["result"] = {"kind": "other", "name": type(res).__name__}
        out_values["args"] = [a if _sendable(a) else None for a in args]
        changed = {}
        for index, tensor, snapshot in self.returned:
            try:
                same = tensor.shape == snapshot.shape and tensor.dtype == snapshot.dtype and \
                    bool(torch.equal(tensor, snapshot))
            except Exception:  # noqa: BLE001
                same = False
            if not same:
                changed[str(index)] = tensor if _sendable(tensor) else None
        out_values["changed"] = changed
        head["index"] = self.calls
        if head["result"]["kind"] == "tensor":
            self.returned = (self.returned + [(self.calls, res, res.detach().clone())])[-64:]
        self.calls += 1
        return head, out_values

    def serve(self) -> None:
        wire.send(self.sock, {"op": "ready", "pid": os.getpid()})
        while True:
            try:
                header, values = wire.recv(self.sock)
            except (wire.WireError, TimeoutError):
                return
            op = header.get("op")
            try:
                if op == "cells":
                    wire.send(self.sock, {"op": "cells", **self.run_cells((values or {}).get("cells") or [])})
                elif op == "bind":
                    wire.send(self.sock, {"op": "bind", **self.bind(header.get("name"))})
                elif op == "call":
                    head, out = self.call(values or {})
                    try:
                        wire.send(self.sock, {"op": "call", **head}, out)
                    except wire.WireError as exc:  # e.g. a result too large to send
                        head["result"] = {"kind": "other", "name": f"unsendable result ({exc})"}
                        wire.send(self.sock, {"op": "call", **head}, {"args": []})
                else:
                    return
            except (OSError, wire.WireError):
                return


def _sendable(value, depth: int = 0) -> bool:
    if depth > 4:
        return False
    if type(value) is torch.Tensor:
        return wire.dtype_name(value.dtype) is not None
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_sendable(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _sendable(v, depth + 1) for k, v in value.items())
    return False


def _text(exc: BaseException, limit: int) -> str:
    """str(exc), bounded; learner exceptions may misbehave when printed."""
    try:
        with _core._time_limit(2.0):
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


def zygote(control_fd: int, nest_filter: bytes | None, listening: bool = False) -> None:
    """Wait for requests and fork one isolated child per request:

    - ``spawn`` with a socket (SCM_RIGHTS): an answer server on that socket;
    - a JSON ``{"op": "kernel", ...}`` with a pipe for its output: an IPython kernel
      for nbgrader (every earlier child is killed first: one kernel at a time);
    - ``reset``: kill every process but the zygote.

    With ``listening``, ``control_fd`` is a listening socket and each connection
    carries one request (the grading worker and nbgrader's kernel launcher both
    connect); otherwise it is one connected socket that carries them all."""
    _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    from IPython.core import interactiveshell  # noqa: F401  (preloaded for the servers)
    if listening:
        from ipykernel import kernelapp  # noqa: F401  (preloaded for the kernels)
    if nest_filter:
        from classroom import seccomp  # noqa: F401
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    listener = socket.socket(fileno=control_fd)
    if not listening:
        listener.sendall(b"ready")
    while True:
        if listening:
            try:
                ctl, _ = listener.accept()
            except OSError:
                return
        else:
            ctl = listener
        try:
            msg, fds, _, _ = socket.recv_fds(ctl, 1 << 16, 4)
        except OSError:
            return
        if not msg:
            if listening:
                ctl.close()
                continue
            return
        _handle(ctl, listener, msg, fds, nest_filter)
        if listening:
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
            if listener is not ctl:
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
                Server(job).serve()
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
        zygote(int(argv[1]), nest, listening=argv[0] == "kernel-zygote")
    elif len(argv) == 2 and argv[0] == "job":
        _devnull_stdio()
        Server(socket.socket(fileno=int(argv[1]))).serve()
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
