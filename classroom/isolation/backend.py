"""The isolation stage's interface: what the grader asks of whatever keeps learner code
away from it and from every other learner.

Two objects, one per process:

- a :class:`Backend` lives in the grading command's process for the whole run: it says
  whether the machine can isolate at all (:meth:`Backend.check`), prepares each grading
  worker (:meth:`Backend.prepare_worker`, a picklable description handed to the worker
  process), puts each worker process under its caps (:meth:`Backend.confine_worker`)
  and, at the end, leaves nothing of the learners' code running (:meth:`Backend.close`);
- a :class:`WorkerIsolation` lives in one grading worker (made from that description
  by ``setup.isolation(setup)``): it starts a kernel for every notebook nbgrader runs
  (nbgrader starts it from :attr:`WorkerIsolation.kernel_name`, configured by
  :meth:`WorkerIsolation.kernel_settings`), serves answer servers to the independent
  check (:attr:`WorkerIsolation.answers`, an :class:`AnswerServers`), stops a kernel
  at a deadline, resets what a job left behind, reports the caps it hit, and closes.

This package implements it with bubblewrap, cgroups and seccomp on the grading machine
(:mod:`classroom.isolation.bubblewrap`). A backend that starts a container or a
Kubernetes pod per submission implements the same two classes: the execution and
scoring stages call nothing else of the isolation stage.

Standard library only (the kernel launcher imports :class:`SandboxUnavailable`).
"""
from __future__ import annotations

import socket
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class SandboxUnavailable(RuntimeError):
    """The grading machine cannot isolate learner code; the message says why and what to do."""


class AnswerServers(Protocol):
    """Fresh processes that run a learner's answer cells and serve their function
    (``classroom.isolation.answer_server``), one notebook at a time."""

    mode: str | None  # how they are started (for the run's log), once started
    why_not_zygote: str | None  # why the faster way is not in use, if it is not

    def open(self) -> socket.socket:
        """A socket to a fresh answer server; its first frame is ``ready`` or ``error``."""

    def reset(self) -> None:
        """Kill every answer server and whatever it started."""

    def close(self) -> None:
        """Stop for good."""


@dataclass
class WorkerSetup:
    """What a grading worker needs to isolate its jobs, made in the grading command's
    process and sent to the worker's (so: picklable). ``isolation`` is the
    :class:`WorkerIsolation` class to make from it; ``settings`` its own data."""
    index: int
    wdir: Path
    isolation: type
    settings: dict = field(default_factory=dict)


class WorkerIsolation(ABC):
    """One grading worker's side of the isolation (see the module docstring)."""

    kernel_name: str  # the kernel spec nbgrader starts every notebook's kernel from
    answers: AnswerServers | None  # None where no answer server could be started

    @abstractmethod
    def start(self) -> dict:
        """Get ready for jobs (in the worker process, before the first); returns what to
        tell the grading command: ``{"answer_mode": ..., "why": ...}``."""

    @abstractmethod
    def kernel_settings(self) -> dict[str, object]:
        """nbgrader settings (``"Class.trait": value``) that make it start kernels here."""

    @abstractmethod
    def begin_job(self) -> None:
        """Before a submission: fresh scratch space; remember the caps' counters."""

    @abstractmethod
    def stop_kernel(self) -> None:
        """Kill the running kernel and all it started (safe from any thread; called at
        the deadline and when nbgrader is done with the submission)."""

    @abstractmethod
    def end_job(self) -> None:
        """After nbgrader's run: nothing the kernel started is left; a broken helper is
        replaced."""

    @abstractmethod
    def limits_hit(self) -> list[str]:
        """The caps the current job ran into (for the report), e.g. a kernel killed at
        its memory cap."""

    @abstractmethod
    def reset(self) -> None:
        """After a grader error in the middle of a job: kill whatever is still running."""

    @abstractmethod
    def close(self) -> None:
        """The worker is done: stop everything it started."""


class Backend(ABC):
    """The grading run's side of the isolation (see the module docstring)."""

    @abstractmethod
    def check(self) -> None:
        """Try the isolation once, exactly as the jobs will get it; raise
        :class:`SandboxUnavailable` with what the machine lacks."""

    @abstractmethod
    def open(self) -> None:
        """Before the first worker starts: set up what the workers share (caps)."""

    @abstractmethod
    def prepare_worker(self, index: int, wdir: Path) -> WorkerSetup:
        """Prepare worker ``index``, whose folder is ``wdir``."""

    @abstractmethod
    def confine_worker(self, setup: WorkerSetup, pid: int) -> None:
        """Put the worker process ``pid`` under its own caps, from its start."""

    @abstractmethod
    def close(self) -> None:
        """The run is over: nothing of the learners' code may outlive it."""
