"""How fast the kernel loader is, and how fast the CPU twin runs.

    .venv/bin/python bench/bench_loader.py [--cold N] [--warm N]

* cold build: a new process, an empty cache directory (ANDREA_KERNEL_CACHE), the CPU twin
  built through the real loader; timed around ``kernels.load()`` (the build itself, after
  ``import andrea_ref``) and around the whole process (interpreter start and the torch import
  included). Target: 12 s.
* warm load: a new process, the library already in the cache; timed around ``load()``.
  Target: 0.2 s.
* throughput: the twin's GELU against torch's on 2^24 float32 values (median of 5).

The GPU kernels have their own benchmark: ``python -m andrea_ref.kernels.selfcheck``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLD_TARGET_S = 12.0
WARM_TARGET_S = 0.2

PROBE = """
import time
from andrea_ref import kernels
t0 = time.perf_counter()
st = kernels.load()
t1 = time.perf_counter()
assert st.backend == "cpu-twin", st
print("LOAD_S", t1 - t0, st.compiled_now)
"""


def run_probe(cache: Path) -> tuple:
    env = dict(os.environ, ANDREA_KERNEL="require", ANDREA_KERNEL_CACHE=str(cache), CUDA_VISIBLE_DEVICES="")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise SystemExit(f"probe failed:\n{out.stdout}\n{out.stderr}")
    line = next(l for l in out.stdout.splitlines() if l.startswith("LOAD_S"))
    _, seconds, compiled = line.split()
    return float(seconds), wall, compiled == "True"


def throughput() -> tuple:
    import torch
    import torch.nn.functional as F

    from andrea_ref import kernels

    ops = kernels.ops()
    x = torch.randn(2**24)

    def median_time(fn, reps=5):
        fn()
        samples = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - t)
        return statistics.median(samples)

    ours = median_time(lambda: ops.gelu_fwd(x, False))
    theirs = median_time(lambda: F.gelu(x, approximate="tanh"))
    return ours, theirs, torch.get_num_threads()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cold", type=int, default=3, help="cold builds (default 3)")
    parser.add_argument("--warm", type=int, default=5, help="warm loads (default 5)")
    args = parser.parse_args()

    cold_load, cold_wall, warm_load, warm_wall = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="andrea-bench-") as tmp:
        last = None
        for i in range(args.cold):
            last = Path(tmp) / f"cold{i}"
            seconds, wall, compiled = run_probe(last)
            assert compiled, "a fresh cache must compile"
            cold_load.append(seconds)
            cold_wall.append(wall)
        if last is None:
            last = Path(tmp) / "cold"
            run_probe(last)
        for _ in range(args.warm):
            seconds, wall, compiled = run_probe(last)
            assert not compiled, "a warm cache must not compile"
            warm_load.append(seconds)
            warm_wall.append(wall)

        os.environ["ANDREA_KERNEL_CACHE"] = str(last)
        os.environ["ANDREA_KERNEL"] = "require"
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        sys.path.insert(0, str(REPO))
        ours, theirs, threads = throughput()

    def fmt(values):
        return f"{statistics.median(values):7.3f} s" if values else "    n/a"

    print(f"{'kernel loader (CPU twin)':34s} {'median':>9s}  {'target':>8s}  {'process wall':>12s}  runs")
    if cold_load:
        ok = "met" if statistics.median(cold_load) <= COLD_TARGET_S else "MISSED"
        print(f"{'cold build (empty cache)':34s} {fmt(cold_load)}  {COLD_TARGET_S:6.1f} s  {fmt(cold_wall):>12s}  {len(cold_load)}  {ok}")
    if warm_load:
        ok = "met" if statistics.median(warm_load) <= WARM_TARGET_S else "MISSED"
        print(f"{'warm load (cached library)':34s} {fmt(warm_load)}  {WARM_TARGET_S:6.1f} s  {fmt(warm_wall):>12s}  {len(warm_load)}  {ok}")
    n = 2**24
    print(f"CPU GELU on 2^24 float32 ({threads} threads, median of 5): twin {ours * 1e3:.1f} ms "
          f"({n / ours / 1e6:.0f} M/s), torch {theirs * 1e3:.1f} ms ({n / theirs / 1e6:.0f} M/s), "
          f"twin/torch time {ours / theirs:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
