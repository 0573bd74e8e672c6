"""What an answer server does so that code in its own process cannot quietly change
what it reports (:mod:`classroom.isolation.answer_calls`).

Everything here is a hint, not a verdict: code in the same process can in principle
reach anything. It raises the cost and leaves traces that the grader judges
(:mod:`classroom.scoring.review` holds a submission with any of them for review):

- :func:`install_audit_hook`: a CPython audit hook (PEP 578), installed before any
  learner code runs and never removable from Python, that refuses, and reports, what
  honest answer code never does: ``ctypes``; ``gc.get_referrers/get_referents/
  get_objects``; ``sys._getframe``, ``sys._current_frames``, ``inspect``'s frames, a
  traceback's, generator's or coroutine's frame and a function's code object, asked
  for by the learner's own code (the standard library asks for them too, as
  ``typing.TypeVar``, ``collections.namedtuple`` and ``enum`` do: that is left alone);
  assigning a function's code or defaults; ``sys.settrace``/``sys.setprofile`` from
  learner code; ``marshal.loads`` and new code or function objects made by hand; new
  audit hooks; sockets; starting processes; opening another process's memory or file
  descriptors. Measured with Python 3.11: starting a thread, setting a module's or a
  class's attribute and ``os.write`` raise no audit event; the grader's reading of the
  source covers those;
- :func:`other_threads`: what other Python threads run while a checked call runs (a
  learner's function or ``andrea_ref`` in a worker thread is invisible to the
  dispatch-mode recorder and the profiler, which watch the calling thread);
- :func:`private`: modules' functions copied with private copies of their globals,
  linked to one another, so that rebinding a name in one of them (``wire.pack = ...``,
  ``core.execute = ...``, ``integrity.integrity_problem = ...``) does not change what
  the server's core calls.

Standard library only, apart from what the server passes in.
"""
from __future__ import annotations

import contextlib
import os
import re
import sys
import types

# events refused when the learner's own code raises them (directly, or through a module
# that only passes its request on: ctypes, inspect, subprocess, os, socket ...); the same
# events raised by the standard library or PyTorch for their own work are left alone
_LEARNER_REFUSED = {"sys._getframe", "sys._current_frames", "gc.get_referrers", "gc.get_referents",
                    "gc.get_objects", "sys.settrace", "sys.setprofile", "marshal.loads", "code.__new__",
                    "function.__new__", "sys.excepthook", "sys.unraisablehook", "socket.__new__", "os.fork",
                    "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "subprocess.Popen",
                    "os.kill", "os.killpg", "signal.pthread_kill", "pty.spawn"}
_STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
_PASSING = tuple(_STDLIB + p for p in ("ctypes" + os.sep, "inspect.py", "subprocess.py", "os.py", "socket.py",
                                        "pty.py", "multiprocessing" + os.sep, "concurrent" + os.sep,
                                        "asyncio" + os.sep))
_FRAME_ATTRS = {"tb_frame", "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "f_code",
                "__code__"}
_CODE_SETS = {"__code__", "__defaults__", "__kwdefaults__"}
_PROC = re.compile(r"^/proc/(self|thread-self|\d+)(/task/\d+)?/(mem|fd|fdinfo|map_files|pagemap|environ|syscall)(/|$)"
                   r"|^/dev/(mem|kmem|port)$")


def is_learner_file(filename) -> bool:
    """Code compiled from a notebook cell (``<ipython-input-...>``), a magic or a string."""
    return isinstance(filename, str) and filename.startswith("<") and not filename.startswith("<frozen")


def install_audit_hook(evidence: list, busy: list) -> None:
    """Refuse and report (append to ``evidence``) what is described in the module
    docstring. ``busy[0]`` set by the server's own code makes the hook ignore it (the
    server samples threads itself)."""
    getframe = sys._getframe
    learner = is_learner_file
    passing = _PASSING
    own = [False]
    proc = _PROC.match
    strtypes = (str, bytes)

    def charged(f):
        """The frame an event raised in ``f`` is charged to: the nearest one outside
        the modules that pass requests on."""
        while f is not None and f.f_code.co_filename.startswith(passing):
            f = f.f_back
        return f

    def where(f):
        if f is None:
            return ""
        import linecache
        line = linecache.getline(f.f_code.co_filename, f.f_lineno).strip()[:160]
        return f" in {f.f_code.co_name}: `{line}`" if line else f" in {f.f_code.co_name}"

    def refuse(what, f):
        evidence.append(f"refused {what}{where(f)}"[:400])
        raise RuntimeError(f"{what} is not allowed in the answer server")

    def hook(event, args):
        if own[0] or busy[0]:
            return
        if event in ("compile", "exec", "import", "builtins.id", "os.listdir", "os.scandir"):
            return  # the common events first: honest code raises them all the time
        own[0] = True
        raised_in = getframe(1)  # the code whose call raised the event

        def caller():
            return charged(raised_in)

        def by_learner():
            f = charged(raised_in)
            return f if f is not None and learner(f.f_code.co_filename) else None

        try:
            if event == "sys.addaudithook":
                refuse(event, caller())
            elif event in _LEARNER_REFUSED or event.startswith("ctypes."):
                f = by_learner()
                if f is not None:
                    refuse(event, f)
            elif event == "object.__getattr__" and len(args) > 1 and args[1] in _FRAME_ATTRS:
                f = by_learner()
                if f is not None:
                    refuse(f"reading .{args[1]}", f)
            elif event == "object.__setattr__" and len(args) > 1 and args[1] in _CODE_SETS:
                f = caller() if args[1] == "__code__" else by_learner()
                if f is not None or args[1] == "__code__":
                    refuse(f"setting .{args[1]}", f)
            elif event == "open" and args:
                path = args[0]
                if isinstance(path, strtypes):
                    text = os.fsdecode(path)
                    if proc(os.path.normpath(text)):
                        refuse(f"opening {text[:80]}", caller())
                elif isinstance(path, int):
                    f = by_learner()
                    if f is not None:
                        refuse(f"opening file descriptor {path}", f)
        finally:
            own[0] = False

    sys.addaudithook(hook)


def other_threads(current_frames, busy: list, watched: tuple[str, ...]) -> list[str]:
    """What Python threads other than the caller's run that is learner code or lies
    under ``watched`` (directories): one line each. ``current_frames``: the server's
    captured ``sys._current_frames``."""
    import threading
    me = threading.get_ident()
    busy[0] = True
    try:
        frames = current_frames()
    finally:
        busy[0] = False
    found = []
    for ident, frame in frames.items():
        if ident == me:
            continue
        f, depth = frame, 0
        while f is not None and depth < 200:
            name = f.f_code.co_filename
            if is_learner_file(name) or name.startswith(watched):
                found.append(f"another thread runs {f.f_code.co_name} ({'learner code' if is_learner_file(name) else os.path.basename(name)})")
                break
            f, depth = f.f_back, depth + 1
    return found


# the code of every function ``contextlib.contextmanager`` makes (one code object for all)
_CONTEXT_HELPER = contextlib.contextmanager(lambda: iter(())).__code__


def _copy(value: types.FunctionType, space: dict) -> types.FunctionType:
    copy = types.FunctionType(value.__code__, space, value.__name__, value.__defaults__, value.__closure__)
    copy.__kwdefaults__ = value.__kwdefaults__
    copy.__dict__.update(value.__dict__)
    return copy


def private(*modules: types.ModuleType) -> list[dict]:
    """Each module's namespace with every function defined in it copied, the copies
    sharing a private copy of that namespace (a ``@contextlib.contextmanager`` function
    is copied inside its wrapper); a name one of ``modules`` binds to a function of
    another (``from .watch import time_limit``), or that a default argument holds, is bound
    to that function's copy. Rebinding a name of any of the modules afterwards changes nothing these copies call,
    from one module into another included."""
    spaces = [dict(vars(module)) for module in modules]
    copies: dict[int, types.FunctionType] = {}  # id of an original (each module keeps it alive) -> its copy
    for module, space in zip(modules, spaces):
        for name, value in list(space.items()):
            if not isinstance(value, types.FunctionType):
                continue
            inner = getattr(value, "__wrapped__", None)
            if value.__globals__ is vars(module):
                copies[id(value)] = space[name] = _copy(value, space)
            elif (value.__code__ is _CONTEXT_HELPER and isinstance(inner, types.FunctionType)
                    and inner.__globals__ is vars(module)):
                copies[id(value)] = space[name] = contextlib.contextmanager(_copy(inner, space))
    for space in spaces:
        for name, value in list(space.items()):
            if isinstance(value, types.FunctionType) and id(value) in copies:
                space[name] = copies[id(value)]
    for copy in copies.values():  # default arguments bound to a function of the group, too
        own = copy.__wrapped__ if copy.__code__ is _CONTEXT_HELPER else copy  # a copy, never an original
        if own.__defaults__:
            own.__defaults__ = tuple(copies.get(id(d), d) for d in own.__defaults__)
    return spaces
