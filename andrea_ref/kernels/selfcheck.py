"""Self-check of the handwritten GELU kernel: correctness against a float64 reference, then speed.

    python -m andrea_ref.kernels.selfcheck [--json PATH] [--quick] [--require-gpu]
                                           [--no-bench] [--big auto|on|off]

On a CUDA machine it builds the kernel (``ANDREA_KERNEL=require`` semantics: a build failure is
an error), then checks forward, backward and the fused bias + GELU (forward, dx and db) for
fp32, fp16 and bf16 and both tanh variants on: sizes 0, 1, 7 and 2^20 + 3, a misaligned view
(storage offset 1), non-contiguous views (transposed, strided) and, when the GPU has the
memory, tensors of more than 2^31 elements. Every result is compared with the tanh formula
evaluated in float64 on the same (rounded) inputs, with the tolerances of the design notes:

    fp32 precise 1.3e-6 / 1e-5   fp32 fast 1e-4 / 1e-4 (backward 1e-3 / 1e-3)
    bf16 1.6e-2 / 1e-3           fp16 1e-3 / 1e-4      (rtol / atol)

The bias gradient, a sum over R rows, is held to R * atol + rtol * sum(|dx|): the bound that
the per-element tolerance of dx implies for the sum. Then it times the kernels at 2^27
elements (2^26 with --quick; both far larger than the L2 cache) with CUDA events (warm-up, median of several runs) against
``F.gelu(approximate="tanh")``, eager ``F.gelu(x + b)``, torch's GELU backward and a
device-to-device copy of the same bytes, prints a table and, with --json, writes the figures.

Without a GPU it checks the CPU twin the same way, says plainly that no GPU was visible and
exits 0 (exit 2 with --require-gpu). Exit 1 means a correctness failure, 3 a build failure.
Speed targets are reported (met / missed) but do not change the exit code.

The parts: :mod:`~andrea_ref.kernels.reference` (the float64 formula, the tolerances, the
comparison), :mod:`~andrea_ref.kernels.correctness` (the checks and their inputs),
:mod:`~andrea_ref.kernels.benchmark` (timers and timings), :mod:`~andrea_ref.kernels.report`
(tables, the machine); this module is the command line and re-exports their names.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import List, Optional

import torch

from . import loader as _loader_mod
from .benchmark import Timing, benchmark, time_cpu, time_cuda
from .correctness import bias_cases, check_correctness, check_huge, unary_cases
from .reference import BWD_TOL, FWD_TOL, KAPPA, SQRT_2_OVER_PI, Check, compare, ref_derivative, ref_forward
from .report import environment, print_checks, print_timings

__all__ = [
    "BWD_TOL",
    "EXIT_BUILD",
    "EXIT_NO_GPU",
    "EXIT_OK",
    "EXIT_WRONG",
    "FWD_TOL",
    "KAPPA",
    "SQRT_2_OVER_PI",
    "Check",
    "Timing",
    "benchmark",
    "bias_cases",
    "check_correctness",
    "check_huge",
    "compare",
    "environment",
    "main",
    "print_checks",
    "print_timings",
    "ref_derivative",
    "ref_forward",
    "time_cpu",
    "time_cuda",
    "unary_cases",
]

EXIT_OK, EXIT_WRONG, EXIT_NO_GPU, EXIT_BUILD = 0, 1, 2, 3


# --------------------------------------------------------------------------- command line


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m andrea_ref.kernels.selfcheck", description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", type=Path, help="write the results to this JSON file")
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer timing runs")
    parser.add_argument("--require-gpu", action="store_true", help="exit 2 when no CUDA GPU is visible")
    parser.add_argument("--no-bench", action="store_true", help="correctness only")
    parser.add_argument("--big", choices=("auto", "on", "off"), default="auto",
                        help="the >2^31-element checks: when memory allows (auto), always, never")
    args = parser.parse_args(argv)
    out = sys.stdout
    log = lambda msg: print(msg, file=out, flush=True)  # noqa: E731

    from .. import kernels

    env = environment()
    gpu = env["device"] == "cuda"
    log(f"andrea_ref.kernels self-check, {env['date']}: torch {env['torch']} (CUDA {env['torch_cuda']}), "
        f"{'GPU ' + env['device_name'] if gpu else 'no GPU'}")
    if not gpu:
        log("No CUDA GPU is visible: checking the CPU twin only (the CUDA kernels are not run).")

    t0 = time.perf_counter()
    try:
        loader = _loader_mod.KernelLoader(mode="require", variant="auto")
        st = loader.load()
    except _loader_mod.KernelBuildError as exc:
        log(f"BUILD FAILED: {exc}")
        _write_json(args.json, {"environment": env, "build_error": str(exc), "passed": False})
        return EXIT_BUILD
    kernels.use_loader(loader)
    log(f"kernel: backend={st.backend} ({st.reason}); load took {time.perf_counter() - t0:.1f} s")

    result = {"environment": env, "kernel": dataclasses.asdict(st)}
    if gpu:
        big = 2**16 + 3 if args.quick else 2**20 + 3
        log("correctness (vs the tanh formula in float64):")
        checks = check_correctness(kernels, (torch.float32, torch.bfloat16, torch.float16),
                                   ("precise", "fast"), "cuda", big, log)
        if args.big == "on" or (args.big == "auto" and not args.quick):
            log("more than 2^31 elements:")
            checks += check_huge(kernels, "cuda", log)
    else:
        big = 2**16 + 3 if args.quick else 2**20 + 3
        log("correctness of the CPU twin (vs the tanh formula in float64):")
        checks = check_correctness(kernels, (torch.float32, torch.float64, torch.bfloat16, torch.float16),
                                   ("precise",), "cpu", big, log)
    print_checks(checks, out)
    ok = all(c.passed for c in checks)
    result["correctness"] = [dataclasses.asdict(c) for c in checks]

    if gpu and not args.no_bench:
        n = 2**26 if args.quick else 2**27
        warmup, reps = (3, 10) if args.quick else (10, 50)
        log(f"benchmark: {n} elements (2^{n.bit_length() - 1}), median of {reps} runs after {warmup} warm-up runs")
        timings, targets = benchmark(kernels, n, warmup, reps, log)
        print_timings(timings, out)
        for t in targets:
            log(f"  target {t['target']}: {t['value']:.3f} ({'met' if t['met'] else 'MISSED'})")
        result["benchmark"] = {"n_elements": n, "warmup": warmup, "reps": reps,
                               "timings": [dataclasses.asdict(t) for t in timings], "targets": targets}
    result["passed"] = ok
    _write_json(args.json, result)
    if not gpu:
        log("No GPU: the CPU twin is correct, the CUDA kernels were not exercised." if ok
            else "No GPU: the CPU twin FAILED.")
    log("self-check " + ("passed" if ok else "FAILED"))
    if not ok:
        return EXIT_WRONG
    if not gpu and args.require_gpu:
        log("--require-gpu: no CUDA GPU is visible.")
        return EXIT_NO_GPU
    return EXIT_OK


def _write_json(path: Optional[Path], data: dict) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, default=str) + "\n")
    print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
