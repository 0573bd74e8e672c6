"""Answer servers for the independent check: a fresh sandboxed process per notebook that
runs the learner's answer cells and serves their function (the zygote's children, or
one sandbox each; :mod:`classroom.isolation.answer_server` is the process itself)."""
from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from . import wire
from .bwrap import SandboxSpec, bwrap_argv, prepare_dir
from .processes import popen_confined, stop
from .zygote import ANSWERS, Zygote

SERVER = Path(__file__).resolve().with_name("answer_server.py")


class AnswerUnavailable(RuntimeError):
    """No answer server could be started (the sandbox is broken)."""


class AnswerHost:
    """Starts answer servers for one grading worker, one notebook at a time (an
    :class:`classroom.isolation.backend.AnswerServers`).

    With ``zygote=True`` (default) one sandboxed zygote is started once and forks a
    fresh, isolated server per notebook (milliseconds); where that cannot work (no
    nested user namespaces) or is turned off, every notebook gets a sandbox of its own
    (seconds: PyTorch is imported each time). ``mode`` says which is in use and
    ``why_not_zygote`` why the faster one is not.
    """

    def __init__(self, spec: SandboxSpec, workdir: Path, *, nest_filter: str | None = None,
                 zygote: bool = True):
        self.spec = spec
        self.workdir = Path(workdir)
        self.nest_filter = nest_filter
        self.want_zygote = zygote
        self.mode = None
        self.why_not_zygote = None if zygote else "turned off"
        self._zygote: Zygote | None = None
        self._job_proc = None

    def _popen(self, command: list[str], pass_fds: tuple[int, ...]) -> subprocess.Popen:
        self.workdir.mkdir(parents=True, exist_ok=True)
        prepare_dir(self.workdir, self.spec.uid, 0o755)
        sfd = os.open(self.spec.seccomp_file, os.O_RDONLY) if self.spec.seccomp_file else None
        argv = bwrap_argv(self.spec, self.workdir, self.workdir, command, seccomp_fd=sfd)
        try:
            return popen_confined(argv, self.spec.cgroup_procs, pass_fds + (() if sfd is None else (sfd,)))
        finally:
            if sfd is not None:
                os.close(sfd)

    def _start_zygote(self) -> None:
        # the zygote's own filter is the sandbox's: it must still make namespaces
        self._zygote = Zygote(self.spec, self.workdir.parent / "zygote", mode=ANSWERS, nest_filter=self.nest_filter,
                              server=SERVER)
        self._zygote.launch()
        try:
            self._zygote.wait_ready()
        except Exception as exc:  # noqa: BLE001 - SandboxUnavailable, OSError: the same to the caller
            self._zygote = None
            raise AnswerUnavailable("the answer zygote did not start") from exc

    def start(self) -> None:
        if self.mode is not None:
            return
        if self.want_zygote:
            try:
                self._start_zygote()
                sock = self._zygote.spawn()
                header, _ = wire.recv(sock, timeout=60)
                sock.close()
                if header.get("op") != "ready":
                    raise AnswerUnavailable(str(header.get("message") or "no answer server")[:300])
                self.mode = "zygote"
                return
            except (AnswerUnavailable, OSError, wire.WireError, TimeoutError) as exc:
                self.why_not_zygote = str(exc)[:300]
                self._kill_zygote()
        self.mode = "sandbox per notebook"

    def open(self) -> socket.socket:
        """A socket to a fresh answer server (its first frame is ``ready`` or ``error``)."""
        self.start()
        if self.mode == "zygote":
            try:
                return self._zygote.spawn()
            except OSError:
                self._kill_zygote()
                self._start_zygote()
                return self._zygote.spawn()
        ours, theirs = socket.socketpair()
        try:
            self._job_proc = self._popen([self.spec.python, "-I", str(SERVER), "job", str(theirs.fileno())],
                                         (theirs.fileno(),))
        finally:
            theirs.close()
        return ours

    def reset(self) -> None:
        """Kill every answer server (and whatever it started); the zygote stays."""
        stop(self._job_proc)
        self._job_proc = None
        if self._zygote is not None and not self._zygote.reset():
            self._kill_zygote()  # a zygote that does not answer is replaced
            self.mode = None

    def _kill_zygote(self) -> None:
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None

    def close(self) -> None:
        self.reset()
        self._kill_zygote()
        self.mode = None
