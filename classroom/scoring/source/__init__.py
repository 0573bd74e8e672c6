"""What the names in a learner's code can denote, read from its source in the grader.

:class:`Program` reads the answer cells (Python's ``ast``, after IPython's own input
transformation, :func:`read`) the way they run: top to bottom, module-level bindings in
order (:meth:`Program.boundary` keeps what every name is bound to where a graded cell
runs), and tracks what every name, attribute, container and call result can hold:

- objects the grader itself knows, by the dotted path they were reached by
  (``("k", "torch.nn.functional.gelu")``), and instances of its classes (``("i",
  "torch.nn.GELU")``: setting their attributes replaces nothing of the library's),
  followed through ``import ... as``, ``from
  ... import``, assignment, containers, default arguments, ``getattr`` with a literal
  name (exactly an attribute access), ``operator.attrgetter``, ``vars(m)[...]`` /
  ``m.__dict__[...]``, ``sys.modules[...]``, ``importlib.import_module`` and
  ``__import__``; a module reached through another module's attribute is named by its
  own name (``logging.threading`` is ``threading``); what a call is given may be stored
  in its object or its other arguments (``box.append(f)``, ``heapq.heappush(box, f)``,
  ``functools.partial(box.append)(f)``), so it flows into them (not through the builtins
  and PyTorch's compiled functions, which store nothing: ``torch.rand(n, generator=g)``);
  what a library class's method gives back is taken for an instance of that class
  (``x.flatten()``, ``torch.Generator().manual_seed(0)``), not for the method; an
  attribute the grader cannot resolve is named by a longer path below a module (a few
  names deep: ``torch.ops.aten.gelu``) and once below any other object it resolves
  (``box.pop`` where ``box`` may hold ``F.gelu``), never further, so that chains of
  methods do not make ever longer paths;
- the learner's own functions, lambdas and classes (``("f", index)``), whose bodies are
  read with the bindings of the moment they would run (:meth:`Program.reach`: what a
  function can touch, transitively through the learner's functions, classes, default
  arguments, annotations, attributes set on objects and top-level aliases), and what a
  call of one of them makes (``("p", index, given)``), read with each parameter bound to
  what that call gave it (:meth:`Program._given`: positional arguments in order, named
  ones by name, ``*xs`` and ``**kw`` to any, a default otherwise; ``def pick(m): return
  m.gelu`` kept as ``pick(F)``); a function handed to code not the learner's
  (``map(pick, [F])``, ``functools.partial(pick, F)``) may be called with anything else
  that code was given; every such call is also read once on its own
  (:meth:`Program.finish`), so what it does is recorded where no graded function reaches
  it (``patch(torch)``);
- constant strings (for computed names) and what a computed name may give: ``("w",
  path)`` is any member of ``path`` (``getattr(m, <computed>)``, the values of
  ``vars(m)`` or ``m.__dict__``), ``("w*", path)`` anything reached from such a member
  by further attributes.

Code that IPython or Python runs from a string is read as code of the cell it is in:
the code of the magics that run Python (``%time``, ``%timeit``, ``%prun``,
``%%capture``, ``%debug``: their line as IPython's own option parser splits it, and
their body), the ``{expression}`` and ``$name`` fields IPython evaluates in every other
magic's line, the value of ``%config``, literal ``exec``/``eval`` strings, literal
``timeit`` statements and string annotations.

Every object path and construct met anywhere is recorded with the cell and the line of
the cell it is on (:attr:`Program.uses`, :attr:`Program.events`), the line as the
learner sees it, before IPython's transformation (which drops leading blank lines and
joins continued magic lines); which of them matter is decided by
:mod:`classroom.scoring.shortcuts`. The analysis is conservative: a value flows into
whatever a call returns, so a name that *may* denote something is taken to. Setting an
attribute or item replaces something of a library's only where the object can be a
module, class or other library object that takes it (:func:`replaceable`): not a
function or method, a constant such as ``torch.float64``, or what a method gave back.

The reading has a hard budget (:data:`MAX_SECONDS`, :data:`MAX_WORK`, counted in
:meth:`Program._tick`): code that would take longer is not read on but raises
:class:`OverBudget`, and the notebook is held for review.

Written by hand: the kept analysers (astroid's inference, type checkers) infer from
source files and cannot see into PyTorch's C extension, where ``F.gelu`` lives; here
every path is resolved against the real objects of the trusted grader (:func:`resolve`)
without running any learner code, and without importing or running anything the
learner names: only modules the grader has already imported are looked into, by static
lookups that run no property, module ``__getattr__`` or other Python code.

One module per part of the reading:

==================  ================================================================
``text``            a cell's text as code (:func:`read`), the code a magic runs
``objects``         what a dotted path denotes in the grader (:func:`resolve`, :func:`peek`)
``bindings``        the learner's definitions, scopes, and the errors that stop a reading
``program``         :class:`Program`: the reading in order, its budget, the boundaries
``statements``      how statements are read (bindings, definitions, branches, imports)
``expressions``     how expressions and attribute look-ups are read
``calls``           how a call is read (callee, arguments stored, result)
``strings``         code run from strings (magics, ``exec``, ``timeit``, ``%config``)
==================  ================================================================
"""
from __future__ import annotations

from .bindings import Def, OverBudget, Scope, TooComplex
from .objects import MISSING, known_prefix, peek, replaceable, resolve
from .program import MAX_SECONDS, MAX_WORK, Program
from .strings import NO_VAR_EXPAND
from .text import expansions, magic_code, read, source_lines, writefile_name

__all__ = ["MAX_SECONDS", "MAX_WORK", "MISSING", "NO_VAR_EXPAND", "Def", "OverBudget", "Program", "Scope",
           "TooComplex", "expansions", "known_prefix", "magic_code", "peek", "read", "replaceable", "resolve",
           "source_lines", "writefile_name"]
