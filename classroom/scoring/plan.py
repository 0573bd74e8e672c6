"""The independent check's plan of a notebook: what it needs to know, read once per
assignment from the instructor's notebook and its release.

:func:`build_plan` reads the locked set-up cells, the answer (solution) cells, for
every graded cell the ``grading.check_*(fn, seed=...)`` calls it makes, hidden ones
included (parsed with ``ast``; a graded cell with any other statement is refused), the
function each graded cell checks, and the rule against shortcuts its checks enforce
(their ``Forbidden``: ATen words and ``andrea_ref`` files; ``shortcut`` marks the graded
cells a rule governs).
:func:`answer_runs` picks, from a submitted notebook, the code the learner wrote, as
the notebook runs it: for each graded cell, in the notebook's order, the learner's
cells since the previous one (the release's set-up cells run first, never the
submitted copies; graded cells and cells unchanged from the release are left out).
Each graded cell is so judged on the learner's last definition above it, as in the
kernel.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

from andrea_ref import grading
from andrea_ref.grading import watch

from ..markers import cell_source as _source
from ..markers import without_markers


def _nbgrader(cell) -> dict:
    meta = cell.get("metadata", {})
    nbg = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return nbg if isinstance(nbg, dict) else {}


def _graded_calls(source: str, where: str) -> tuple[str, list[tuple[str, dict]]]:
    """(function name, [(check name, keyword arguments)]) of a graded cell."""
    calls, names = [], set()
    for stmt in ast.parse(without_markers(source)).body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        ok = (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
              and isinstance(call.func.value, ast.Name) and call.func.value.id == "grading"
              and call.func.attr.startswith("check_") and len(call.args) == 1
              and isinstance(call.args[0], ast.Name))
        if not ok:
            raise ValueError(f"{where}: a graded cell may only call grading.check_*(function, seed=N); "
                             f"found {ast.unparse(stmt)!r}")
        kwargs = {}
        for kw in call.keywords:
            if not isinstance(kw.value, ast.Constant):
                raise ValueError(f"{where}: {kw.arg}= must be a literal in {ast.unparse(stmt)!r}")
            kwargs[kw.arg] = kw.value.value
        if not callable(getattr(grading, call.func.attr, None)):
            raise ValueError(f"{where}: andrea_ref.grading has no {call.func.attr}")
        calls.append((call.func.attr, kwargs))
        names.add(call.args[0].id)
    if len(names) != 1:
        raise ValueError(f"{where}: a graded cell must check exactly one function, found {sorted(names)}")
    return names.pop(), calls


def build_plan(instructor_nb: dict, release_nb: dict, where: str = "notebook") -> dict:
    """What the independent check needs to know about one notebook (JSON-able).

    Each graded cell names the function it checks (``function``: a notebook may have
    several, as the capstone does) and the rule against shortcuts its checks enforce
    (``forbidden``: ``andrea_ref.grading.watch.rule_of``; ``shortcut`` says whether there
    is one); ``kernel_compared`` is False where every check of the cell is left to the
    grader (``andrea_ref.grading.runner.left_to_grader``: the kernel does not run it);
    ``functions`` lists the notebook's functions in the order they are checked."""
    release = {}
    for cell in release_nb["cells"]:
        gid = _nbgrader(cell).get("grade_id")
        if gid:
            release[gid] = cell
    setup, solutions, graded, unchanged, locked = [], {}, [], [], {}
    for cell in instructor_nb["cells"]:
        meta = _nbgrader(cell)
        gid = meta.get("grade_id")
        if cell.get("cell_type") != "code":
            continue
        if meta.get("grade") and not meta.get("solution"):
            fn, calls = _graded_calls(_source(cell), f"{where}, cell {gid}")
            rules = [r for r in (_rule_of(check) for check, _ in calls) if r is not None]
            if any(r != rules[0] for r in rules):
                raise ValueError(f"{where}, cell {gid}: its checks enforce different rules against shortcuts")
            # a cell whose checks are all left to the grader has no verdict in the kernel to compare
            compared = not all(getattr(getattr(grading, check), "left_to_grader", False) for check, _ in calls)
            graded.append({"grade_id": gid, "points": float(meta.get("points", 0)), "calls": calls,
                           "function": fn, "forbidden": rules[0] if rules else {}, "shortcut": bool(rules),
                           "kernel_compared": compared})
            locked[gid] = _source(release.get(gid, cell))
        elif meta.get("solution"):
            solutions[gid] = _source(release[gid]) if gid in release else ""
        elif meta.get("locked"):
            setup.append(_source(release.get(gid, cell)))
            locked[gid] = _source(release.get(gid, cell))
    for cell in release_nb["cells"]:
        meta = _nbgrader(cell)
        if cell.get("cell_type") == "code" and not meta.get("locked") and not meta.get("solution"):
            unchanged.append(_source(cell))
    if not graded:
        raise ValueError(f"{where}: no graded cell")
    functions = list(dict.fromkeys(g["function"] for g in graded))
    return {"functions": functions, "setup": setup, "solutions": solutions, "graded": graded,
            "unchanged": unchanged, "locked": locked}


def _rule_of(check: str) -> dict | None:
    """The ``Forbidden`` a check enforces (its own, else its module's), as data (None: no rule)."""
    rule = watch.rule_of(getattr(grading, check))
    if rule is None:
        return None
    return {"what": rule.what, "aten_words": list(rule.aten_words), "ref_files": rule.relative_ref_files()}


def answer_runs(plan: dict, nb: dict) -> list[tuple[str, list[tuple[int, str]]]]:
    """[(grade id, [(cell number, source), ...])]: for every graded cell of the plan, in
    the order ``nb`` runs them, the learner's code cells since the previous graded cell
    (cell numbers count every cell of ``nb`` from 1). A graded cell missing from ``nb``
    (nbgrader puts it back) comes last, after all of the learner's cells."""
    graded_ids = {g["grade_id"] for g in plan["graded"]}
    skip = set(plan["unchanged"])
    runs, pending = [], []
    for number, cell in enumerate(nb.get("cells", []), start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        gid = _nbgrader(cell).get("grade_id")
        if gid in graded_ids:
            if all(gid != g for g, _ in runs):
                runs.append((gid, pending))
                pending = []
            continue
        if gid in plan["locked"]:
            continue  # a locked cell: the release's version runs
        source = _source(cell)
        if source in skip and gid not in plan["solutions"]:
            continue
        pending.append((number, source))
    for g in plan["graded"]:
        if all(g["grade_id"] != gid for gid, _ in runs):
            runs.append((g["grade_id"], pending))
            pending = []
    return runs


def untouched(plan: dict, nb: dict) -> bool:
    """True when every answer cell still holds the release's stub (or is gone)."""
    found = {}
    for cell in nb.get("cells", []):
        if isinstance(cell, dict):
            gid = _nbgrader(cell).get("grade_id")
            if gid in plan["solutions"]:
                found[gid] = _source(cell)
    return all(found.get(gid, stub).strip() == stub.strip() for gid, stub in plan["solutions"].items())


def locked_changes(plan: dict, nb: dict) -> list[str]:
    """Locked or graded cells that were edited or deleted in ``nb`` (nbgrader puts the
    release's version back silently; the report should say so)."""
    seen, out = set(), []
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict):
            continue
        gid = _nbgrader(cell).get("grade_id")
        if gid in plan["locked"]:
            seen.add(gid)
            if _source(cell).strip() != plan["locked"][gid].strip():
                out.append(f"locked cell {gid!r} was edited (the release's version was graded)")
    for gid in plan["locked"]:
        if gid not in seen:
            out.append(f"locked cell {gid!r} was deleted (the release's version was graded)")
    return out


def load_plans(template_dir: Path) -> dict[str, dict[str, dict]]:
    """{assignment: {notebook: plan}} written by :func:`write_plans`."""
    return json.loads((Path(template_dir) / "plans.json").read_text())


def write_plans(template_dir: Path, instructor_root: Path, release_root: Path) -> dict:
    """Build and store the plan of every notebook of every assignment."""
    plans: dict[str, dict[str, dict]] = {}
    for nb_path in sorted(Path(instructor_root).glob("*/*.ipynb")):
        assignment = nb_path.parent.name
        rel = Path(release_root) / assignment / nb_path.name
        plan = build_plan(json.loads(nb_path.read_text()), json.loads(rel.read_text()),
                          where=f"{assignment}/{nb_path.name}")
        plans.setdefault(assignment, {})[nb_path.stem] = plan
    (Path(template_dir) / "plans.json").write_text(json.dumps(plans, indent=1))
    return plans
