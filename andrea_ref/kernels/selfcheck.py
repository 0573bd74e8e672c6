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
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Tuple

import torch
import torch.nn.functional as F

from . import loader as _loader_mod

SQRT_2_OVER_PI = (2.0 / torch.pi) ** 0.5
KAPPA = 0.044715

# (rtol, atol) per dtype and variant; backward may differ (fp32 fast).
FWD_TOL = {
    ("float32", "precise"): (1.3e-6, 1e-5),
    ("float32", "fast"): (1e-4, 1e-4),
    ("bfloat16", "precise"): (1.6e-2, 1e-3),
    ("bfloat16", "fast"): (1.6e-2, 1e-3),
    ("float16", "precise"): (1e-3, 1e-4),
    ("float16", "fast"): (1e-3, 1e-4),
    ("float64", "precise"): (1e-12, 1e-12),
}
BWD_TOL = dict(FWD_TOL)
BWD_TOL[("float32", "fast")] = (1e-3, 1e-3)

EXIT_OK, EXIT_WRONG, EXIT_NO_GPU, EXIT_BUILD = 0, 1, 2, 3


# --------------------------------------------------------------------------- reference


def ref_forward(h: torch.Tensor) -> torch.Tensor:
    h = h.double()
    return 0.5 * h * (1.0 + torch.tanh(SQRT_2_OVER_PI * (h + KAPPA * h**3)))


def ref_derivative(h: torch.Tensor) -> torch.Tensor:
    h = h.double()
    t = torch.tanh(SQRT_2_OVER_PI * (h + KAPPA * h**3))
    return 0.5 * (1.0 + t) + 0.5 * h * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * KAPPA * h * h)


@dataclasses.dataclass
class Check:
    op: str
    dtype: str
    variant: str
    case: str
    numel: int
    max_abs_err: float
    worst_ratio: float  # max(err / (atol + rtol |ref|)); <= 1 passes
    passed: bool
    note: str = ""


def compare(got: torch.Tensor, ref: torch.Tensor, rtol: float, atol: float,
            scale: Optional[torch.Tensor] = None, terms: int = 1) -> Tuple[float, float, bool]:
    """Max abs error, worst err/bound ratio, and pass/fail of
    |got - ref| <= terms * atol + rtol * scale   (scale defaults to |ref|).

    For a sum of ``terms`` values each held to atol + rtol |v| (the bias gradient), the bound
    of the sum is terms * atol + rtol * sum |v|: pass ``scale = sum |v|`` and ``terms``."""
    if got.shape != ref.shape:
        return float("inf"), float("inf"), False
    if got.numel() == 0:
        return 0.0, 0.0, True
    g = got.detach().double()
    scale = ref.abs() if scale is None else scale
    err = (g - ref).abs()
    bound = terms * atol + rtol * scale
    finite = bool(torch.isfinite(g).all())
    ratio = float((err / bound).max())
    return float(err.max()), ratio, finite and ratio <= 1.0


# --------------------------------------------------------------------------- inputs


def _randn(shape, dtype, device, gen, scale: float = 2.5) -> torch.Tensor:
    # Inputs: scale 2.5 spreads them over roughly [-7.5, 7.5] (the tanh is interesting up to
    # |x| ~ 6). Upstream gradients dy: scale 1.
    return (torch.randn(*shape, generator=gen, device=device, dtype=torch.float32) * scale).to(dtype)


def _with_specials(x: torch.Tensor) -> torch.Tensor:
    specials = torch.tensor([0.0, 2.7, -2.7, 6.0, -6.0, 1e-3, -1e-3, 20.0, -20.0])
    k = min(x.numel(), specials.numel())
    x.view(-1)[:k] = specials[:k].to(x.dtype)
    return x


def unary_cases(dtype, device, big: int, gen) -> Iterator[Tuple[str, torch.Tensor, torch.Tensor]]:
    r = lambda *s: _randn(s, dtype, device, gen)  # noqa: E731
    g = lambda *s: _randn(s, dtype, device, gen, 1.0)  # noqa: E731
    yield "n=0", r(0), g(0)
    yield "n=1", r(1), g(1)
    yield "n=7", r(7), g(7)
    yield f"n={big}", _with_specials(r(big)), g(big)
    xb, db = r(big + 8), g(big + 8)
    yield "misaligned (storage offset 1)", xb[1 : big + 1], db[1 : big + 1]
    yield "transposed 1029x1023 view", r(1023, 1029).t(), g(1029, 1023)
    yield "strided view [::3]", r(3 * 4099)[::3], g(4099)


def bias_cases(dtype, device, gen) -> Iterator[Tuple[str, torch.Tensor, torch.Tensor, torch.Tensor]]:
    r = lambda *s: _randn(s, dtype, device, gen)  # noqa: E731
    g = lambda *s: _randn(s, dtype, device, gen, 1.0)  # noqa: E731
    yield "0x16", r(0, 16), r(16), g(0, 16)
    yield "1x1", r(1, 1), r(1), g(1, 1)
    yield "1x7", r(1, 7), r(7), g(1, 7)
    yield "3x8", r(3, 8), r(8), g(3, 8)
    yield "5x12", r(5, 12), r(12), g(5, 12)
    yield "1024x1536", _with_specials(r(1024, 1536)), r(1536), g(1024, 1536)
    yield "1021x1027 (odd width)", r(1021, 1027), r(1027), g(1021, 1027)
    yield "8x128x384 (3-d)", r(8, 128, 384), r(384), g(8, 128, 384)
    xb = r(512 * 1536 + 8)
    yield "misaligned x (offset 1) 512x1536", xb[1 : 1 + 512 * 1536].view(512, 1536), r(1536), g(512, 1536)
    bb = r(1536 + 8)
    yield "misaligned b (offset 1)", r(512, 1536), bb[1:1537], g(512, 1536)
    yield "transposed x 1024x1536 view", r(1536, 1024).t(), r(1536), g(1024, 1536)


# --------------------------------------------------------------------------- correctness


def _on_kernel(y: torch.Tensor) -> bool:
    """The result came out of the kernel's autograd Function (not a torch fallback)."""
    return y.grad_fn is not None and "GeluFunction" in type(y.grad_fn).__name__


def check_correctness(kernels, dtypes, variants, device, big: int, log) -> List[Check]:
    checks: List[Check] = []
    gen = torch.Generator(device=device).manual_seed(1234)
    for dtype in dtypes:
        dname = str(dtype).replace("torch.", "")
        for variant in variants:
            ftol = FWD_TOL[(dname, variant)]
            btol = BWD_TOL[(dname, variant)]
            for case, x0, dy in unary_cases(dtype, device, big, gen):
                x = x0.detach().requires_grad_(True)
                y = kernels.gelu(x, variant=variant)
                (dx,) = torch.autograd.grad(y, x, dy) if x.numel() else (torch.zeros_like(x),)
                note = "" if (x.numel() == 0 or _on_kernel(y)) else "NOT ON THE KERNEL PATH"
                for op, got, ref, tol in (
                    ("gelu fwd", y, ref_forward(x0), ftol),
                    ("gelu bwd", dx, dy.double() * ref_derivative(x0), btol),
                ):
                    err, ratio, ok = compare(got, ref, *tol)
                    checks.append(Check(op, dname, variant, case, x0.numel(), err, ratio, ok and not note, note))
            for case, x0, b0, dy in bias_cases(dtype, device, gen):
                x = x0.detach().requires_grad_(True)
                b = b0.detach().requires_grad_(True)
                y = kernels.bias_gelu(x, b, variant=variant)
                if x.numel():
                    dx, db = torch.autograd.grad(y, (x, b), dy)
                else:
                    dx, db = torch.zeros_like(x), torch.zeros_like(b)
                note = "" if (x.numel() == 0 or _on_kernel(y)) else "NOT ON THE KERNEL PATH"
                h = x0.double() + b0.double()
                dx_ref = dy.double() * ref_derivative(h)
                lead = tuple(range(dx_ref.dim() - 1))
                db_ref = dx_ref.sum(dim=lead)
                db_scale = dx_ref.abs().sum(dim=lead)
                rows = x0.numel() // max(b0.numel(), 1)
                for op, got, ref, tol, scale, terms in (
                    ("bias+gelu fwd", y, ref_forward(h), ftol, None, 1),
                    ("bias+gelu bwd dx", dx, dx_ref, btol, None, 1),
                    ("bias+gelu bwd db", db, db_ref, btol, db_scale, max(rows, 1)),
                ):
                    err, ratio, ok = compare(got, ref, *tol, scale=scale, terms=terms)
                    checks.append(Check(op, dname, variant, case, x0.numel(), err, ratio, ok and not note, note))
            failed = [c for c in checks if c.dtype == dname and c.variant == variant and not c.passed]
            log(f"  {dname:9s} {variant:8s} {'ok' if not failed else f'{len(failed)} FAILED'}")
    return checks


def check_huge(kernels, device, log) -> List[Check]:
    """Tensors of more than 2^31 elements (64-bit indexing), bf16, when the GPU has room."""
    checks: List[Check] = []
    dtype = torch.bfloat16
    n = 2**31 + 4099
    cols = 6144  # bias rows cross the 2^31 boundary
    rows = (2**31) // cols + 1
    free, _total = torch.cuda.mem_get_info()
    need = 4 * n * 2 + 2**30  # x, y, dy, dx in bf16 plus slack
    if free < need:
        log(f"  skipped: {free / 2**30:.1f} GiB free, {need / 2**30:.1f} GiB needed")
        return [Check("huge tensors", "bfloat16", "auto", ">2^31 elements", n, 0.0, 0.0, True,
                      f"skipped: {free / 2**30:.1f} GiB free < {need / 2**30:.1f} GiB")]
    gen = torch.Generator(device=device).manual_seed(99)
    ops = kernels.ops()
    fast = kernels.use_fast_tanh(dtype)
    tol = FWD_TOL[("bfloat16", "fast" if fast else "precise")]

    def windows(total: int):
        mid = 2**31
        return [(0, 2**16), (mid - 2**16, mid + 2**16), (total - 2**16, total)]

    def check_windows(op, case, got_fn, ref_fn, total):
        worst_err, worst_ratio, ok = 0.0, 0.0, True
        for lo, hi in windows(total):
            err, ratio, good = compare(got_fn(lo, hi), ref_fn(lo, hi), *tol)
            worst_err, worst_ratio, ok = max(worst_err, err), max(worst_ratio, ratio), ok and good
        checks.append(Check(op, "bfloat16", "auto", case, total, worst_err, worst_ratio, ok,
                            "checked at the start, across 2^31 and at the end"))

    x = torch.randn(n, generator=gen, device=device, dtype=dtype)
    y = ops.gelu_fwd(x, fast)
    check_windows("gelu fwd", "n=2^31+4099", lambda a, b: y[a:b], lambda a, b: ref_forward(x[a:b]), n)
    del y
    dy = torch.randn(n, generator=gen, device=device, dtype=dtype)
    dx = ops.gelu_bwd(dy, x, fast)
    check_windows("gelu bwd", "n=2^31+4099", lambda a, b: dx[a:b],
                  lambda a, b: dy[a:b].double() * ref_derivative(x[a:b]), n)
    del dx, dy
    xm = x[1:]  # misaligned: the scalar path with 64-bit element indices
    ym = ops.gelu_fwd(xm, fast)
    check_windows("gelu fwd", "misaligned n=2^31+4098", lambda a, b: ym[a:b],
                  lambda a, b: ref_forward(xm[a:b]), n - 1)
    del ym, xm, x
    torch.cuda.empty_cache()
    xb = torch.randn(rows, cols, generator=gen, device=device, dtype=dtype)
    bb = torch.randn(cols, generator=gen, device=device, dtype=dtype)
    yb = ops.bias_gelu_fwd(xb, bb, fast).view(-1)
    xf = xb.view(-1)
    total = rows * cols

    def bias_ref(a, b):
        idx = torch.arange(a, b, device=device) % cols
        return ref_forward(xf[a:b].double() + bb.double()[idx])

    check_windows("bias+gelu fwd", f"{rows}x{cols} (>2^31)", lambda a, b: yb[a:b], bias_ref, total)
    del xb, yb, xf
    torch.cuda.empty_cache()
    log(f"  {'ok' if all(c.passed for c in checks) else 'FAILED'}")
    return checks


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
    kernels._install_loader(loader)
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
