"""The grading worker's client of a zygote: one sandbox, started once, that has imported
PyTorch, IPython and ``andrea_ref`` and forks a fresh, isolated child for every job
(:mod:`classroom.isolation.answer_server` is the zygote's side).

A worker keeps two: one under its kernels' uid and in their cgroup that forks the
kernels nbgrader runs the notebooks in (``kernel-zygote``: it also sees the kernels'
scratch space, below ``anchor``), and one under its answer servers' uid that forks the
independent check's answer servers (``zygote``). Both have the same life cycle and the
same protocol: the zygote listens on a unix socket (in a folder of the grader's that no
sandbox sees) and answers one request per connection -- ``ping``, ``reset``, ``spawn``
with a socket to serve, or a kernel request (sent by the kernel launcher).
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
from dataclasses import replace
from pathlib import Path

from .backend import SandboxUnavailable
from .bwrap import SandboxSpec, bwrap_argv
from .processes import popen_confined, stop

SERVER = Path(__file__).resolve().with_name("answer_server.py")
KERNELS = "kernel-zygote"
ANSWERS = "zygote"


class Zygote:
    """A zygote of ``mode`` (:data:`KERNELS` or :data:`ANSWERS`) in the sandbox ``spec``,
    with its control socket in ``home``.

    ``zygote_filter``: the seccomp filter of the zygote itself, which must still make
    namespaces; every child adds ``nest_filter`` on top before any learner code runs.
    ``anchor``: for kernels, the folder below which nbgrader's working folders lie."""

    def __init__(self, spec: SandboxSpec, home: Path, *, mode: str, nest_filter: str | None,
                 zygote_filter: str | None = None, anchor: Path | None = None, server: Path | None = None):
        self.spec, self.home, self.mode = spec, Path(home), mode
        self.nest_filter, self.zygote_filter = nest_filter, zygote_filter
        self.anchor = None if anchor is None else Path(anchor)
        self.server = Path(server or SERVER)
        self.socket_path = self.home / "ctl.sock"
        self.proc: subprocess.Popen | None = None

    def launch(self) -> None:
        """Start the zygote and return at once (it imports PyTorch meanwhile).

        Its working folder is a tmpfs of its own sandbox (``private_work``), not a host
        folder: nothing the zygote or a child writes there outlives the zygote, and every
        child sees it read-only (:func:`classroom.isolation.namespaces.seal_inherited`)."""
        self.home.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(self.home / "work", ignore_errors=True)  # an older grader's host folder
        os.chmod(self.home, 0o700)
        empty = self.home / "work"
        self.socket_path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        listener.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o600)
        listener.listen(8)
        fds = [listener.fileno()]
        if self.nest_filter:
            fds.append(os.open(self.nest_filter, os.O_RDONLY))
        sfd = os.open(self.zygote_filter, os.O_RDONLY) if self.zygote_filter else None
        extra, flags = [], ["-I"]
        if self.anchor is not None:
            extra = ["--dir", str(self.anchor), "--bind", self.spec.scratch_root, self.spec.scratch_root]
            flags.append("-Xfrozen_modules=off")  # as a kernel started by ipykernel_launcher
        argv = bwrap_argv(replace(self.spec, private_work=True), empty, empty,
                          [self.spec.python, *flags, str(self.server), self.mode, *map(str, fds)],
                          seccomp_fd=sfd, extra=extra)
        try:
            self.proc = popen_confined(argv, self.spec.cgroup_procs, tuple(fds) + (() if sfd is None else (sfd,)))
        finally:
            listener.close()
            for fd in fds[1:] + ([sfd] if sfd is not None else []):
                os.close(fd)

    def wait_ready(self, timeout: float = 180) -> None:
        """Wait until the zygote answers; raises SandboxUnavailable if it does not."""
        if self.ask(b"ping", timeout=timeout) != b"ready":
            self.close()
            raise SandboxUnavailable(f"the {'kernel' if self.anchor is not None else 'answer'} zygote did not start")

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launcher_spec(self) -> SandboxSpec:
        """The kernels' sandbox spec that makes the kernel launcher ask this zygote."""
        return replace(self.spec, zygote_socket=str(self.socket_path), work_anchor=str(self.anchor))

    def ask(self, msg: bytes, fds: tuple[int, ...] = (), timeout: float = 10) -> bytes:
        """Send one request (with ``fds``, by SCM_RIGHTS); its short reply, b"" if none."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET) as s:
                s.settimeout(timeout)
                s.connect(str(self.socket_path))
                if fds:
                    socket.send_fds(s, [msg], list(fds))
                else:
                    s.send(msg)
                return s.recv(16)
        except OSError:
            return b""

    def spawn(self) -> socket.socket:
        """A socket to a fresh child serving on it (an answer server); OSError if refused."""
        ours, theirs = socket.socketpair()
        try:
            if self.ask(b"spawn", (theirs.fileno(),), timeout=30) != b"ok":
                ours.close()
                raise OSError("the zygote refused to fork")
        finally:
            theirs.close()
        return ours

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def reset(self) -> bool:
        """Kill every child (and all it started); the zygote stays. False if it is gone
        (it is stopped then)."""
        if not self.alive():
            return False
        if self.ask(b"reset", timeout=10) == b"ok":
            return True
        self.close()
        return False

    def close(self) -> None:
        stop(self.proc)
        self.proc = None
        self.socket_path.unlink(missing_ok=True)
