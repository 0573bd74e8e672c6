"""The isolation stage: learner code runs where it can reach nothing of the grader's or
of another learner's.

- :mod:`.backend`: the interface the other stages call (a :class:`~.backend.Backend` per
  run, a :class:`~.backend.WorkerIsolation` per grading worker); a container or a
  Kubernetes pod per submission would be another implementation of it;
- :mod:`.bubblewrap`: the implementation on the grading machine itself, built from
  :mod:`.bwrap` (the sandbox's settings and bubblewrap command line), :mod:`.sandbox`
  (the kernel launcher nbgrader runs), :mod:`.processes`, :mod:`.zygote` (the one
  client of the zygotes that fork kernels and answer servers), :mod:`.answers` (answer
  servers for the independent check), :mod:`.cgroups`, :mod:`.cgroup_group` and
  :mod:`.cgroup_layout` (memory and process caps), :mod:`.seccomp` (system-call filters);
- inside the sandbox: :mod:`.answer_server` (the zygote and answer server process),
  :mod:`.answer_calls` (the answer server's core: a notebook's cells, then calls of its
  function), :mod:`.answer_guard` (what the core watches for), :mod:`.namespaces` (fresh
  namespaces per job, in a fork of the zygote) and :mod:`.wire` (the answer servers'
  protocol).

This package's ``__init__`` imports nothing: the launcher and the sandboxed processes
import single modules of it with interpreters that have only the standard library.
"""
