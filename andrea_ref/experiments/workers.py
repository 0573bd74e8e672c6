"""How the experiments run: single-threaded, and the seeds of one in parallel worker processes.

``single_thread`` runs torch on one thread inside a ``with`` block (deterministic
sums). ``parallel_map`` is ``[fn(item) for item in items]`` in up to
:data:`MAX_WORKERS` worker processes, each single-threaded, so the numbers are the
same as a serial run's, only sooner. The workers (:class:`_Workers`) are fresh Pythons
started once per process and reused; each runs :func:`_serve`.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence

import torch


@contextlib.contextmanager
def single_thread() -> Iterator[None]:
    """Run torch on one thread (deterministic sums, and the book's cells stay light)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# Seeds run side by side in this many worker processes at most (the book's machine has two cores).
MAX_WORKERS = 2


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class _Workers:
    """Worker processes for the seeds of an experiment, started once per process and reused.

    Each worker is a fresh Python that imports this module and answers tasks on its
    standard input: ``(fn, item)`` pickled in, ``fn(item)`` (or the exception it
    raised) pickled out. Written by hand because both ways ``multiprocessing`` starts
    workers fail here: forking a process whose torch has already run OpenMP threads
    can hang a worker at its first parallel loop, and spawning (or a fork server)
    imports the caller's main script again, which breaks a script that runs an
    experiment at its top level.
    """

    def __init__(self, n: int):
        import subprocess
        import sys

        # the folder that holds andrea_ref/ (this file is andrea_ref/experiments/workers.py)
        package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [package_parent, os.environ.get("PYTHONPATH", "")])), OMP_NUM_THREADS="1")
        self.procs = [subprocess.Popen([sys.executable, "-c", f"import {__name__} as m; m._serve()"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
                      for _ in range(n)]
        import atexit
        atexit.register(self.close)

    def close(self) -> None:
        """End the workers: each sees its input close and returns; wait for them."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except Exception:  # pragma: no cover - a worker stuck in a task
                proc.kill()
            proc.stdout.close()

    @staticmethod
    def _send(stream, obj) -> None:
        import pickle
        import struct

        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        stream.write(struct.pack("<Q", len(data)) + data)
        stream.flush()

    @staticmethod
    def _receive(stream):
        import pickle
        import struct

        head = stream.read(8)
        if len(head) < 8:
            raise RuntimeError("an experiment worker process ended unexpectedly")
        return pickle.loads(stream.read(struct.unpack("<Q", head)[0]))

    def kill(self) -> None:
        """End the workers now (a map was interrupted: answers may be left in the pipes)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass

    def map(self, fn: Callable, items: list) -> list:
        """``[fn(item) for item in items]`` on the workers; a map that does not finish (the
        notebook interrupted) ends them, so that no later map reads its answers."""
        done = False
        try:
            results, error = self._map(fn, items)
            done = True
        finally:
            if not done:
                self.kill()
        if error is not None:  # the first exception a task raised, after every answer came back
            raise error
        return results

    def _map(self, fn: Callable, items: list) -> tuple[list, BaseException | None]:
        import selectors

        results, queue, busy, error = [None] * len(items), list(enumerate(items)), {}, None
        with selectors.DefaultSelector() as sel:
            for proc in self.procs:
                if queue:
                    index, item = queue.pop(0)
                    self._send(proc.stdin, (fn, item))
                    busy[proc.stdout.fileno()] = (proc, index)
                    sel.register(proc.stdout, selectors.EVENT_READ)
            while busy:  # every worker answers what it was sent, so no answer is left in a pipe
                for key, _ in sel.select():
                    proc, index = busy.pop(key.fd)
                    ok, value = self._receive(proc.stdout)
                    if ok:
                        results[index] = value
                    elif error is None:
                        error = value
                    if queue and error is None:
                        index, item = queue.pop(0)
                        self._send(proc.stdin, (fn, item))
                        busy[key.fd] = (proc, index)
                    else:
                        sel.unregister(key.fileobj)
        return results, error


def _serve() -> None:
    """The loop of one worker process (see :class:`_Workers`)."""
    import sys

    torch.set_num_threads(1)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    try:
        while True:
            try:
                fn, item = _Workers._receive(source)
            except RuntimeError:  # the parent closed the pipe: done
                return
            try:
                answer = (True, fn(item))
            except Exception as exc:  # sent back and raised in the parent
                answer = (False, exc)
            _Workers._send(sink, answer)
    except KeyboardInterrupt:  # the notebook's kernel was interrupted or shut down (its process group): end quietly
        return


_WORKERS: _Workers | None = None


def parallel_map(fn: Callable, items: Sequence) -> list:
    """``[fn(item) for item in items]``, in worker processes when there are cores to spare.

    ``fn`` must be picklable (a module-level function or a ``functools.partial`` of
    one). Each item runs single-threaded in a worker, and the results come back in
    the order of ``items``: the same values a serial loop gives.
    """
    global _WORKERS
    items = list(items)
    workers = max(1, min(MAX_WORKERS, _cores()))
    if workers == 1 or len(items) < 2:
        return [fn(item) for item in items]
    if _WORKERS is None or any(p.poll() is not None for p in _WORKERS.procs):
        _WORKERS = _Workers(workers)
    return _WORKERS.map(fn, items)
