"""The process that serves a learner's function to the grader, inside the sandbox.

The grader never runs a learner's code in its own process. For every notebook it
grades it asks for a fresh *answer server*: a process inside the sandbox that runs
the notebook's locked set-up cells and the learner's answer cells, then answers
calls of the graded function over a socket (:func:`classroom.isolation.answer_calls.serve`,
the server's core); the grader judges what comes back with the same checks as the
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

import torch  # noqa: E402,F401  (preloaded once in the zygote, for every child)

import andrea_ref  # noqa: E402,F401
from andrea_ref import i18n  # noqa: E402
from classroom.isolation import wire  # noqa: E402
from classroom.isolation.answer_calls import serve  # noqa: E402  (IPython, preloaded too)
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
