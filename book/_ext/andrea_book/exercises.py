"""Exercises: numbered per chapter, "Exercise 4.1" for the first of chapter 4 (the number
its file name starts with), where Sphinx would count them across the book; and each
exercise's and solution's content box has an id of its own (sphinx-exercise gives every
one the same, "exercise-content" or "solution-content")."""
from __future__ import annotations

import re

from docutils import nodes

_CHAPTER = re.compile(r"(?:^|/)(\d+)_[^/]*$")
_SHARED_IDS = ("exercise-content", "solution-content")


def _book_wide_numbers(app, env):
    """Before Sphinx numbers figures (priority 400): put back its own book-wide numbers,
    so that it compares like with like and rewrites only pages whose numbers changed."""
    saved = getattr(env, "andrea_book_wide_fignumbers", None)
    if saved is not None:
        env.toc_fignumbers = saved
    return []


def _per_chapter_exercise_numbers(app, env):
    """After Sphinx numbered them (priority 600): exercise k of chapter N becomes N.k."""
    env.andrea_book_wide_fignumbers = {doc: {kind: dict(numbers) for kind, numbers in kinds.items()}
                                       for doc, kinds in env.toc_fignumbers.items()}
    for docname, kinds in env.toc_fignumbers.items():
        chapter = _CHAPTER.search(docname)
        exercises = kinds.get("exercise")
        if not chapter or not exercises:
            continue
        order = sorted(exercises, key=lambda ident: exercises[ident])
        kinds["exercise"] = {ident: (int(chapter.group(1)), k) for k, ident in enumerate(order, 1)}
    return []


def unique_content_ids(app, doctree, docname):
    """"solution-content" inside the solution "book/04_x-solution-3" becomes
    "book/04_x-solution-3-content" (and likewise for exercises), so ids stay unique."""
    for n, section in enumerate(doctree.findall(nodes.section)):
        shared = [i for i in section["ids"] if i in _SHARED_IDS]
        if not shared:
            continue
        owner = section.parent
        while owner is not None and not owner.get("ids"):
            owner = owner.parent
        base = owner["ids"][0] if owner is not None else f"{docname}-{n}"
        section["ids"] = [f"{base}-content" if i in _SHARED_IDS else i for i in section["ids"]]


def setup(app):
    app.connect("env-get-updated", _book_wide_numbers, priority=400)
    app.connect("env-get-updated", _per_chapter_exercise_numbers, priority=600)
    app.connect("doctree-resolved", unique_content_ids)
