"""The self-check's benchmark: timers, and the kernels against torch and a copy of the same bytes.

:func:`benchmark` times each operator (ours, precise and fast; torch's; a device-to-device
copy) on the same tensors, as effective bandwidth, and checks the speed targets. The timer is
:func:`time_cuda` (CUDA events) on a GPU; :func:`time_cpu` (wall clock) lets the logic run,
and be tested, on the CPU twin.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from typing import Callable, List, Tuple

import torch
import torch.nn.functional as F


# --------------------------------------------------------------------------- benchmark


@dataclasses.dataclass
class Timing:
    op: str
    dtype: str
    impl: str
    ms: float
    bytes_moved: int
    gbps: float
    ratio_to_copy: float = float("nan")
    ratio_to_torch: float = float("nan")  # speed-up over the torch row of the same op


def time_cuda(fn: Callable[[], object], warmup: int, reps: int) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def time_cpu(fn: Callable[[], object], warmup: int, reps: int) -> float:
    """Wall-clock milliseconds (median); lets the benchmark's logic be tested without a GPU."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def benchmark(kernels, n: int, warmup: int, reps: int, log, device: str = "cuda",
              timer: Callable = time_cuda) -> Tuple[List[Timing], List[dict]]:
    ops = kernels.ops()
    cols = 4096
    rows = n // cols
    n = rows * cols
    timings: List[Timing] = []
    targets: List[dict] = []
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        dname = str(dtype).replace("torch.", "")
        es = torch.tensor([], dtype=dtype).element_size()
        gen = torch.Generator(device=device).manual_seed(7)
        x = torch.randn(rows, cols, generator=gen, device=device, dtype=dtype)
        dy = torch.randn(rows, cols, generator=gen, device=device, dtype=dtype)
        b = torch.randn(cols, generator=gen, device=device, dtype=dtype)
        dst = torch.empty_like(x)
        h = x + b
        fast_default = kernels.use_fast_tanh(dtype)
        default_name = "fast" if fast_default else "precise"
        two, three = 2 * n * es, 3 * n * es

        def run(op, impl, fn, nbytes):
            ms = timer(fn, warmup, reps)
            t = Timing(op, dname, impl, ms, nbytes, nbytes / (ms * 1e-3) / 1e9)
            timings.append(t)
            return t

        copy = run("copy", "torch copy_", lambda: dst.copy_(x), two)
        copy.ratio_to_copy = 1.0
        rows_by_op = {}
        rows_by_op["fwd"] = [
            run("gelu fwd", "torch F.gelu(tanh)", lambda: F.gelu(x, approximate="tanh"), two),
            run("gelu fwd", "ours precise", lambda: ops.gelu_fwd(x, False), two),
            run("gelu fwd", "ours fast", lambda: ops.gelu_fwd(x, True), two),
        ]
        rows_by_op["bwd"] = [
            run("gelu bwd", "torch gelu_backward", lambda: torch.ops.aten.gelu_backward(dy, x, approximate="tanh"), three),
            run("gelu bwd", "ours precise", lambda: ops.gelu_bwd(dy, x, False), three),
            run("gelu bwd", "ours fast", lambda: ops.gelu_bwd(dy, x, True), three),
        ]
        # Effective bandwidth counts the bytes the fused op must move (read x, write y), for
        # the eager pair too, so the GB/s column compares like with like.
        rows_by_op["bias fwd"] = [
            run("bias+gelu fwd", "torch eager F.gelu(x+b)", lambda: F.gelu(x + b, approximate="tanh"), two),
            run("bias+gelu fwd", "ours precise", lambda: ops.bias_gelu_fwd(x, b, False), two),
            run("bias+gelu fwd", "ours fast", lambda: ops.bias_gelu_fwd(x, b, True), two),
        ]
        rows_by_op["bias bwd"] = [
            run("bias+gelu bwd", "torch gelu_backward + sum",
                lambda: torch.ops.aten.gelu_backward(dy, h, approximate="tanh").sum(0), three),
            run("bias+gelu bwd", f"ours {default_name} + sum",
                lambda: ops.bias_gelu_bwd(dy, x, b, fast_default).sum(0), three),
        ]
        for group in rows_by_op.values():
            ref = group[0]
            for t in group:
                t.ratio_to_copy = t.gbps / copy.gbps
                t.ratio_to_torch = ref.ms / t.ms

        def pick(group, impl):
            return next(t for t in rows_by_op[group] if t.impl.startswith(impl))

        fwd = pick("fwd", f"ours {default_name}")
        bwd = pick("bwd", f"ours {default_name}")
        fused = pick("bias fwd", f"ours {default_name}")
        if dtype in (torch.float32, torch.bfloat16):
            targets.append(_target(f"{dname} forward >= 90% of copy bandwidth", fwd.ratio_to_copy, 0.90))
            targets.append(_target(f"{dname} forward at least as fast as torch", fwd.ratio_to_torch, 1.0))
        targets.append(_target(f"{dname} fused bias+GELU >= 1.6x eager F.gelu(x+b)", fused.ratio_to_torch, 1.6))
        targets.append(_target(f"{dname} backward >= 85% of copy bandwidth (3 tensors)", bwd.ratio_to_copy, 0.85))
        log(f"  {dname}: done")
        del x, dy, b, dst, h
        if device == "cuda":
            torch.cuda.empty_cache()
    return timings, targets


def _target(name: str, value: float, goal: float) -> dict:
    return {"target": name, "value": round(value, 4), "goal": goal, "met": bool(value >= goal)}
