"""The orchestration stage: a grading run from start to end.

- :mod:`.run`: :func:`~.run.run`, the whole run (course copy, template, intake,
  isolation check, workers, merge, reports);
- :mod:`.options`: how a run grades (limits and time limits), one typed value;
- :mod:`.workqueue`: the work queue in the course gradebook, which any number of graders
  share (claims with a lease, ``SELECT ... FOR UPDATE SKIP LOCKED``);
- :mod:`.jobs`: one grader's side of it: claims handed to the supervisor, results
  written to the gradebook as they come;
- :mod:`.supervisor`: the worker processes, started, fed and replaced when they die;
- :mod:`.worker`: one worker process; :mod:`.pipeline`: one submission through the
  execution, scoring and reporting stages in it;
- :mod:`.state`: the resume state and the progress bar;
- :mod:`.locks`: what two runs on one machine must not share (sandbox uids, a SQLite
  gradebook).

``run`` is imported when first asked for: the run loads nbgrader and PyTorch, which
the command line's checks of its options (:mod:`.options`) and ``--help`` do not wait for.
"""
import sys
import types

__all__ = ["run"]


class _Package(types.ModuleType):
    def __setattr__(self, name, value):
        # the import system binds each submodule to its package's attribute; this
        # package's `run` is the function of the module .run (as an eager
        # `from .run import run` would leave it), whoever imports that module first
        if name == "run" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name):
    if name == "run":
        from .run import run as function
        globals()["run"] = function
        return function
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
