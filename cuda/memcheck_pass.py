"""A short correctness pass of every CUDA kernel, made for ``compute-sanitizer --tool memcheck``.

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool memcheck python3 cuda/memcheck_pass.py

Every operator (forward, backward, fused bias forward and backward) in fp32, fp16 and bf16,
both tanh variants, on odd sizes (1 to 65537 elements: the vectorised body plus every tail
length) and on misaligned views (storage offset 1, so the scalar path runs). Each tensor ends
exactly where its allocation ends (a misaligned view is ``buffer[1:]``), so an access past the
end is outside the allocation, which memcheck reports; with torch's caching allocator switched
off (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``, set by ``cuda/gpu_check.sh``) each tensor is its own
``cudaMalloc``. Values are compared with the tanh formula in float64, with the self-check's
tolerances. Exit 0: all correct; 1: a wrong value; 2: no GPU; 3: the kernel did not build.
Build the kernel first (the self-check does): compiling under the sanitizer is slow.
``--cpu`` runs the same pass on the CPU twin (to try the script on a machine without a GPU).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from andrea_ref.kernels import loader as kloader  # noqa: E402
from andrea_ref.kernels.selfcheck import BWD_TOL, FWD_TOL, compare, ref_derivative, ref_forward  # noqa: E402

SIZES = (1, 3, 7, 8, 9, 31, 33, 1023, 4097, 65537)
BIAS_SHAPES = ((1, 1), (3, 5), (7, 9), (33, 31), (65, 1027))
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def exact(n: int, dtype, gen, scale: float = 2.5, misaligned: bool = False) -> torch.Tensor:
    """n values that end exactly at the end of their allocation (offset 1 if misaligned)."""
    extra = 1 if misaligned else 0
    buf = (torch.randn(n + extra, generator=gen, device=gen.device) * scale).to(dtype)
    return buf[extra:]


def main(argv=None) -> int:
    cpu = "--cpu" in (sys.argv[1:] if argv is None else argv)
    if not cpu and not torch.cuda.is_available():
        print(f"memcheck pass: no CUDA GPU is visible to torch {torch.__version__}")
        return 2
    try:
        ops, _ = kloader.build_and_load(kloader.plan("cpu-twin" if cpu else "cuda"))
    except kloader.KernelBuildError as exc:
        print(f"memcheck pass: the kernel is unavailable: {exc}")
        return 3
    gen = torch.Generator(device="cpu" if cpu else "cuda").manual_seed(5)
    failures, runs = [], 0

    def check(what, got, ref, tol):
        nonlocal runs
        runs += 1
        _err, _ratio, ok = compare(got, ref, *tol)
        if not ok:
            failures.append(what)

    for dtype in DTYPES:
        dname = str(dtype).replace("torch.", "")
        for fast in (False, True):
            variant = "fast" if fast else "precise"
            ftol, btol = FWD_TOL[(dname, variant)], BWD_TOL[(dname, variant)]
            for n in SIZES:
                for mis in (False, True):
                    x, dy = exact(n, dtype, gen, misaligned=mis), exact(n, dtype, gen, 1.0, misaligned=mis)
                    what = f"{dname} {variant} n={n}{' misaligned' if mis else ''}"
                    check(f"gelu_fwd {what}", ops.gelu_fwd(x, fast), ref_forward(x), ftol)
                    check(f"gelu_bwd {what}", ops.gelu_bwd(dy, x, fast), dy.double() * ref_derivative(x), btol)
            for rows, cols in BIAS_SHAPES:
                for mis in (False, True):
                    x = exact(rows * cols, dtype, gen, misaligned=mis).view(rows, cols)
                    b = exact(cols, dtype, gen, misaligned=mis)
                    dy = exact(rows * cols, dtype, gen, 1.0, misaligned=mis).view(rows, cols)
                    h = x.double() + b.double()
                    what = f"{dname} {variant} {rows}x{cols}{' misaligned' if mis else ''}"
                    check(f"bias_gelu_fwd {what}", ops.bias_gelu_fwd(x, b, fast), ref_forward(h), ftol)
                    check(f"bias_gelu_bwd {what}", ops.bias_gelu_bwd(dy, x, b, fast),
                          dy.double() * ref_derivative(h), btol)
    if not cpu:
        torch.cuda.synchronize()
    for what in failures:
        print(f"WRONG: {what}")
    print(f"memcheck pass: {runs} kernel results, {len(failures)} wrong")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
