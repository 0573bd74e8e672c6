"""The uids a grading run gives learner code when it grades as root.

Worker K's kernels run as ``UID_BASE + K``, its answer servers as ``UID_BASE + 500 + K``,
the sandbox probe as ``UID_BASE + 999``: dedicated uids, so that every process of one of
them is learner code of this run (and is killed when the run ends). Standard library only.
"""
from __future__ import annotations

import os


def uid_base_default() -> int:
    """The first sandbox uid of a run (``--uid-base``). Two grading runs on one machine need
    ranges of their own (each kills every process of its uids when it ends):
    ANDREA_UID_BASE sets the default, e.g. one range per grading pod or per checkout
    running the tests."""
    text = os.environ.get("ANDREA_UID_BASE", "").strip() or "61000"
    if not text.isdigit() or not 1000 <= int(text) <= 2**31 - 2000:
        raise SystemExit(f"ANDREA_UID_BASE: expected a uid between 1000 and {2**31 - 2000}, got {text!r}")
    return int(text)


UID_BASE = uid_base_default()
ANSWER_UID_OFFSET = 500  # worker K's answer servers run as UID_BASE + 500 + K
PROBE_UID_OFFSET = 999
