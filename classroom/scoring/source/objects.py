"""What a dotted path in the learner's source denotes in the trusted grader: the real
object, found by static lookups that import and run nothing (:func:`resolve`, :func:`peek`)."""
from __future__ import annotations

import functools
import inspect
import sys
import types


MISSING = object()
# attribute names under which a module the grader does not know is taken to hold the one
# it does (``somepackage.torch`` is ``torch``)
REROOT = {"torch", "andrea_ref", "classroom", "sys", "builtins", "importlib", "threading", "_thread",
          "subprocess", "multiprocessing", "concurrent", "ctypes", "gc", "inspect", "pickle", "marshal"}
# a dotted path built from attribute names the grader cannot resolve grows at most this many
# names past the deepest module it resolves (``torch.ops.aten.gelu.default`` is 3)
MAX_UNRESOLVED = 4
# what a library class's methods, functions and slots are: calling one does not give itself
# back, and setting an attribute on one replaces nothing that other code looks up
ROUTINES = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.MethodDescriptorType,
            types.WrapperDescriptorType, types.MethodWrapperType, types.ClassMethodDescriptorType,
            types.GetSetDescriptorType, types.MemberDescriptorType)
# a library class's methods and slot wrappers (calling one may give back its object)
DESCRIPTORS = (types.MethodDescriptorType, types.WrapperDescriptorType, types.MethodWrapperType,
               types.ClassMethodDescriptorType)


def _module(name: str):
    """The module ``name`` if the grader has already imported it, else MISSING: learner
    source never makes the grader import (or run) anything."""
    mod = sys.modules.get(name, MISSING)
    return mod if isinstance(mod, types.ModuleType) else MISSING


def _module_name(mod) -> str | None:
    name = vars(mod).get("__name__")
    return name if isinstance(name, str) else None


@functools.lru_cache(maxsize=65536)
def resolve(path: str):
    """(canonical path, object) for a dotted ``path``, or (path, MISSING) when the
    grader cannot resolve it from the modules it has imported. A module met on the way
    is named by its own name. Nothing is imported and no Python code runs: attributes are
    read statically (no property, no module ``__getattr__``)."""
    parts = path.split(".")
    obj = _module(parts[0])
    if obj is MISSING:
        return path, MISSING
    canon = [parts[0]]
    for k, part in enumerate(parts[1:], start=1):
        try:
            value = _static_attr(obj, part)
            if value is MISSING and isinstance(obj, types.ModuleType) and _module_name(obj):
                value = _module(f"{_module_name(obj)}.{part}")
        except Exception:  # noqa: BLE001 - a path that does not resolve stays a name
            value = MISSING
        if value is MISSING:
            return _from_module_prefix(parts) or (".".join(canon + parts[k:]), MISSING)
        obj = value
        own = _module_name(obj) if isinstance(obj, types.ModuleType) else None
        canon = own.split(".") if own else canon + [part]
    return ".".join(canon), obj




@functools.lru_cache(maxsize=65536)
def known_prefix(path: str):
    """``(object, unresolved)``: the deepest prefix of ``path`` the grader resolves (None
    where not even its root is an imported module) and how many names of ``path`` follow it."""
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        obj = resolve(".".join(parts[:n]))[1]
        if obj is not MISSING:
            return obj, len(parts) - n
    return None, len(parts) - 1


@functools.lru_cache(maxsize=65536)
def replaceable(path: str, item: bool = False) -> bool:
    """Whether an object reached by ``path`` can be one whose attributes (``item``: items)
    other code looks up and the learner's code can set: a module, a class, another object
    of a library that takes them (``os.environ``, ``sys.stdout``), or a name below a module
    the grader has not imported; not a function or method, a constant such as
    ``torch.float64``, nor a value it cannot resolve below a function, class or instance
    (what a method or an instance's own attribute gives)."""
    obj = resolve(path)[1]
    if obj is MISSING:
        obj, _ = known_prefix(path)
        return obj is None or isinstance(obj, types.ModuleType)
    if isinstance(obj, (types.ModuleType, type)):
        return True
    if isinstance(obj, ROUTINES):
        return False
    if isinstance(peek(obj, "__dict__"), dict):
        return True
    kind = type(obj)
    if item:
        return _static_attr(kind, "__setitem__") is not MISSING
    setter = _static_attr(kind, "__setattr__")
    return setter is not MISSING and setter is not object.__setattr__


def extensible(path: str) -> bool:
    """Whether an attribute the grader cannot resolve on ``path`` is still named by a
    longer path: on an object it resolves (once: ``box.pop`` where ``box`` may hold
    ``F.gelu`` is ``F.gelu.pop``), and below a module (``torch.ops.aten.gelu``), a few
    names deep; never on an unresolved name below a function, class or instance, so that
    chains of methods (``x.flatten().detach().flatten()``) do not make ever longer paths."""
    if resolve(path)[1] is not MISSING:
        return True
    obj, unresolved = known_prefix(path)
    return (obj is None or isinstance(obj, types.ModuleType)) and unresolved < MAX_UNRESOLVED


def _from_module_prefix(parts: list[str]):
    """``from andrea_ref.block import pre_norm_block`` names the module ``andrea_ref.block``
    even where the package's attribute ``block`` is a function: a path that does not
    resolve attribute by attribute is read from the longest prefix that is an imported
    module."""
    for n in range(len(parts) - 1, 1, -1):
        mod = _module(".".join(parts[:n]))
        if mod is MISSING:
            continue
        obj, canon = mod, (_module_name(mod) or ".".join(parts[:n])).split(".")
        for part in parts[n:]:
            try:
                value = _static_attr(obj, part)
            except Exception:  # noqa: BLE001
                value = MISSING
            if value is MISSING:
                return None
            obj = value
            own = _module_name(obj) if isinstance(obj, types.ModuleType) else None
            canon = own.split(".") if own else canon + [part]
        return ".".join(canon), obj
    return None


def _static_attr(obj, name):
    try:
        value = inspect.getattr_static(obj, name)
    except AttributeError:
        return MISSING
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    return value


def peek(obj, name: str, default=None):
    """``obj.name`` where reading it runs no Python code (a value in the object's or its
    class's namespace, a slot, a C-level getset such as a function's ``__code__``), else
    ``default``: the grader reads its own objects, reached by learner-named paths, without
    running a property or ``__getattr__``."""
    try:
        value = inspect.getattr_static(obj, name)
    except Exception:  # noqa: BLE001
        return default
    if isinstance(value, (types.GetSetDescriptorType, types.MemberDescriptorType)):
        try:
            return value.__get__(obj, type(obj))
        except Exception:  # noqa: BLE001
            return default
    if isinstance(value, (staticmethod, classmethod)):
        return value.__func__
    if isinstance(value, property):
        return default
    return value
