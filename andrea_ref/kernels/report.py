"""The self-check's report: the tables of checks and timings, and the machine they ran on."""

from __future__ import annotations

import datetime as _dt
import platform
from typing import List

import torch

from .benchmark import Timing
from .reference import Check


# --------------------------------------------------------------------------- reporting


def print_checks(checks: List[Check], out) -> None:
    print(f"{'op':18s} {'dtype':9s} {'variant':8s} {'case':34s} {'max |err|':>10s} {'err/tol':>8s}  result", file=out)
    for c in checks:
        res = "ok" if c.passed else "FAIL"
        extra = f"  ({c.note})" if c.note else ""
        print(f"{c.op:18s} {c.dtype:9s} {c.variant:8s} {c.case[:34]:34s} {c.max_abs_err:10.2e} {c.worst_ratio:8.3f}  {res}{extra}", file=out)


def print_timings(timings: List[Timing], out) -> None:
    print(f"{'op':14s} {'dtype':9s} {'implementation':28s} {'ms':>8s} {'GB/s':>8s} {'/copy':>6s} {'vs torch':>8s}", file=out)
    for t in timings:
        vs = "" if t.ratio_to_torch != t.ratio_to_torch else f"{t.ratio_to_torch:7.2f}x"
        print(f"{t.op:14s} {t.dtype:9s} {t.impl:28s} {t.ms:8.3f} {t.gbps:8.1f} {t.ratio_to_copy:6.2f} {vs:>8s}", file=out)


def environment() -> dict:
    info = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": "cpu",
        "device_name": platform.processor() or platform.machine(),
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(
            device="cuda",
            device_name=props.name,
            capability=f"{props.major}.{props.minor}",
            memory_gib=round(props.total_memory / 2**30, 1),
            sm_count=props.multi_processor_count,
        )
    return info
