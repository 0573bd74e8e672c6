#!/usr/bin/env bash
# cuda/gpu_check.sh OUTDIR: the whole GPU check of the handwritten GELU kernel, in one run.
#
# Needs only what a bare CUDA machine has: a system `python3` with a CUDA build of torch
# (2.1 or newer; not necessarily the course's 2.13), nvcc of the same CUDA major version,
# and this checkout. No virtual environment, no package registry.
#
#   1. versions: device, driver, torch, CUDA, nvcc, compute-sanitizer  -> OUTDIR/versions.txt
#   2. the self-check: build, correctness, > 2^31 elements, benchmark  -> OUTDIR/selfcheck.json
#   3. the GPU tests (tests/test_kernel_gpu.py, the GPU cases of tests/test_grading_checks.py)
#      with that python3, if it has pytest                             -> OUTDIR/gpu-tests.log
#   4. compute-sanitizer memcheck over cuda/memcheck_pass.py (odd sizes, misaligned views),
#      where compute-sanitizer is installed; any reported error fails  -> OUTDIR/memcheck.log
#
# Every step's log is in OUTDIR; OUTDIR/summary.txt lists the outcomes. Exit status: 0 when
# every step that ran passed, 1 when one failed, 2 when no GPU is visible (nothing is run),
# 64 for a usage error. A few minutes on an H100/H200; each step has a time limit.
# Environment: PYTHON (default python3), ANDREA_KERNEL_CACHE (default OUTDIR/kernel-cache,
# so the build is proven from nothing), TORCH_CUDA_ARCH_LIST (default: the visible GPUs).
set -uo pipefail

if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: cuda/gpu_check.sh OUTDIR" >&2
  exit 64
fi
mkdir -p "$1" || exit 64
OUT=$(cd "$1" && pwd)
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 64
PY=${PYTHON:-python3}

export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
export ANDREA_KERNEL=require
export ANDREA_KERNEL_CACHE=${ANDREA_KERNEL_CACHE:-$OUT/kernel-cache}
unset ANDREA_KERNEL_BUILD_ONLY

: > "$OUT/summary.txt"
failed=0
note() { echo "$*" | tee -a "$OUT/summary.txt"; }

# step NAME LIMIT_S COMMAND...: run COMMAND with its output in OUTDIR/NAME.log
step() {
  local name=$1 limit=$2 start rc
  shift 2
  echo "== $name (limit ${limit} s; log: $OUT/$name.log)"
  start=$(date +%s)
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    note "ok      $name ($(( $(date +%s) - start )) s)"
  else
    [ $rc -eq 124 ] && echo "   (stopped after ${limit} s)" >> "$OUT/$name.log"
    note "FAILED  $name (exit $rc, $(( $(date +%s) - start )) s): $OUT/$name.log"
    tail -n 25 "$OUT/$name.log" | sed 's/^/    | /'
    failed=1
  fi
}

# --------------------------------------------------------------------------- 1. versions
NVCC=$(command -v nvcc || true)
if [ -z "$NVCC" ] && [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]; then
  NVCC="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc"
fi
if ! command -v "$PY" > /dev/null; then
  note "FAILED  $PY was not found (set PYTHON to a python with a CUDA build of torch)"
  exit 1
fi
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -srm)"
  echo "checkout: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv,noheader \
      | sed 's/^/gpu: /'
  else
    echo "gpu: nvidia-smi not found"
  fi
  "$PY" - <<'EOF'
import platform, sys
print(f"python: {platform.python_version()} ({sys.executable})")
try:
    import torch
except Exception as exc:  # noqa: BLE001
    print(f"torch: not importable: {type(exc).__name__}: {exc}")
    sys.exit(0)
print(f"torch: {torch.__version__}, built for CUDA {torch.version.cuda}")
if torch.cuda.is_available():
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        print(f"device {i}: {p.name}, sm_{p.major}{p.minor}, {p.total_memory / 2**30:.1f} GiB, "
              f"{p.multi_processor_count} SMs")
    try:
        import ctypes
        v = ctypes.c_int()
        ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
        driver = f"{v.value // 1000}.{v.value % 1000 // 10}"
    except (OSError, AttributeError):
        driver = "unknown"
    print(f"CUDA: torch built for {torch.version.cuda}, the driver supports up to {driver}")
else:
    print("device: no CUDA GPU visible to torch")
EOF
  if [ -n "$NVCC" ]; then
    echo "nvcc: $NVCC: $("$NVCC" --version | grep -o 'release [0-9.]*, V[0-9.]*')"
  else
    echo "nvcc: not found (on PATH or in \$CUDA_HOME/bin)"
  fi
} 2>&1 | tee "$OUT/versions.txt"

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  note "FAILED  no CUDA GPU is visible to $PY (torch: $("$PY" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not importable')): this script runs on a GPU machine; without one, use make test-cuda-build"
  exit 2
fi

# --------------------------------------------------------------------------- 2. self-check
step selfcheck 300 "$PY" -m andrea_ref.kernels.selfcheck --require-gpu --json "$OUT/selfcheck.json"
grep -E "^  target|self-check|BUILD FAILED" "$OUT/selfcheck.log" | sed 's/^/    /'

# --------------------------------------------------------------------------- 3. GPU tests
if "$PY" -c "import pytest" 2>/dev/null; then
  step gpu-tests 200 "$PY" -m pytest -q -p no:cacheprovider -m gpu -rs \
    --junitxml="$OUT/gpu-tests.xml" tests/test_kernel_gpu.py tests/test_grading_checks.py
  tail -n 1 "$OUT/gpu-tests.log" | sed 's/^/    /'
else
  note "SKIPPED gpu-tests: $PY has no pytest (the self-check above covers the kernels' correctness)"
fi

# --------------------------------------------------------------------------- 4. memcheck
SANITIZER=$(command -v compute-sanitizer || true)
NVCC_TOP=""
[ -n "$NVCC" ] && NVCC_TOP=$("$NVCC" --dryrun -E -x cu /dev/null 2>&1 | sed -n 's/^#\$ TOP=//p')
for dir in "${CUDA_HOME:-}" "$NVCC_TOP" /usr/local/cuda; do
  if [ -z "$SANITIZER" ] && [ -n "$dir" ] && [ -x "$dir/bin/compute-sanitizer" ]; then
    SANITIZER="$dir/bin/compute-sanitizer"
  fi
done
if [ -n "$SANITIZER" ]; then
  # Without torch's caching allocator each tensor is its own allocation, so memcheck sees an
  # access past a tensor's end; an error exit code makes any reported error fail the step.
  step memcheck 240 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 "$SANITIZER" --tool memcheck \
    --error-exitcode 86 --leak-check no "$PY" cuda/memcheck_pass.py
  grep -E "ERROR SUMMARY|memcheck pass" "$OUT/memcheck.log" | sed 's/^/    /'
  if grep -qE "ERROR SUMMARY: [1-9]" "$OUT/memcheck.log"; then
    note "FAILED  memcheck reported errors: $OUT/memcheck.log"
    failed=1
  fi
else
  note "SKIPPED memcheck: compute-sanitizer not found (on PATH, in \$CUDA_HOME/bin or /usr/local/cuda/bin)"
fi

echo
if [ $failed -eq 0 ]; then
  note "gpu_check: passed; logs and selfcheck.json in $OUT"
else
  note "gpu_check: FAILED; logs in $OUT"
fi
exit $failed
