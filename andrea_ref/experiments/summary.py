"""Summaries of an experiment repeated over several seeds: mean, median, spread, per position."""
from __future__ import annotations

import statistics
from collections.abc import Sequence


def summarise_runs(runs: Sequence[Sequence[float]]) -> dict[str, list]:
    """Per position (a depth, a block, a step), the ``mean``, ``median``, ``std``
    (population), ``min`` and ``max`` over the runs, and the ``runs`` themselves."""
    if not runs:
        raise ValueError("runs must hold at least one run")
    columns = list(zip(*runs))
    mean = [sum(v) / len(v) for v in columns]
    return {
        "mean": mean,
        "median": [float(statistics.median(v)) for v in columns],
        "std": [statistics.pstdev(v) for v in columns],
        "min": [min(v) for v in columns],
        "max": [max(v) for v in columns],
        "runs": [list(r) for r in runs],
    }
