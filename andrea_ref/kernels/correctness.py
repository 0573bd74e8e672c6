"""The self-check's correctness checks: the kernels against the float64 reference.

:func:`check_correctness` runs forward, backward and the fused bias + GELU (forward, dx and
db) through the public API (``kernels.gelu`` / ``kernels.bias_gelu``, so through the autograd
functions) on the inputs of :func:`unary_cases` and :func:`bias_cases` (sizes 0, 1, 7 and
large, misaligned and non-contiguous views, special values); :func:`check_huge` calls the
operators on tensors of more than 2^31 elements when the GPU has the memory.
"""

from __future__ import annotations

from typing import Iterator, List, Tuple

import torch

from .reference import BWD_TOL, FWD_TOL, Check, compare, ref_derivative, ref_forward


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
