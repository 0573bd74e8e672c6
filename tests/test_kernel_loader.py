"""The kernel loader: cache keys, modes, fallbacks, stale locks, cheap import.

Most tests run the loader in-process on a fresh KernelLoader with a temporary cache
(ANDREA_KERNEL_CACHE) and a simulated fault (a compiler that does not exist, a fake nvcc
version, a source that does not compile); none of them compiles for real except
test_stale_lock_is_removed_not_waited_on, which does one cold build of the CPU twin in a
subprocess with a timeout (a hang fails the test instead of freezing the suite).
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from andrea_ref import kernels
from andrea_ref.kernels import buildlock as kbuildlock
from andrea_ref.kernels import buildplan as kbuildplan
from andrea_ref.kernels import loader as kloader

REPO = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv(kloader.ENV_CACHE, str(root))
    return root


def _use_sources(monkeypatch, folder):
    """Point the build at other kernel sources: the planner reads SOURCE_DIR (the sources,
    their include folder, the cache key), and the compiler builds what the plan says."""
    monkeypatch.setattr(kbuildplan, "SOURCE_DIR", folder)


def _subprocess_env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


# ----------------------------------------------------------------- import and status


def test_import_is_cheap_and_builds_nothing(tmp_path):
    code = (
        "import sys, andrea_ref.kernels as k\n"
        "assert 'torch.utils.cpp_extension' not in sys.modules, 'cpp_extension imported eagerly'\n"
        "st = k.status(load=False)\n"
        "print(st.backend, '|', st.reason)\n"
    )
    cache = tmp_path / "never"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=REPO, env=_subprocess_env(ANDREA_KERNEL_CACHE=str(cache)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("torch | not loaded yet")
    assert not cache.exists()
    assert out.stderr == ""


def test_peek_does_not_load(cache):
    st = kloader.KernelLoader(mode="auto").peek()
    assert st.backend == "torch" and "not loaded yet" in st.reason
    assert not cache.exists()


def test_off_mode_never_builds(cache, monkeypatch):
    monkeypatch.setenv(kloader.ENV_MODE, "off")
    monkeypatch.setenv("CXX", "/nonexistent/c++")  # would fail loudly if a build were tried
    kernels.reset()
    try:
        st = kernels.status()
        assert (st.backend, st.mode) == ("torch", "off")
        assert "off" in st.reason
        x = torch.randn(5, 3, requires_grad=True)
        assert not kernels.fast_path_ready(x)
        y = kernels.gelu(x)
        torch.testing.assert_close(y, F.gelu(x, approximate="tanh"), rtol=0, atol=0)
        b = torch.randn(3)
        torch.testing.assert_close(kernels.bias_gelu(x, b), F.gelu(x + b, approximate="tanh"), rtol=0, atol=0)
        assert not cache.exists()
    finally:
        kernels.reset()


def test_mode_env_var_is_validated(monkeypatch):
    monkeypatch.setenv(kloader.ENV_MODE, "sometimes")
    with pytest.raises(ValueError, match="ANDREA_KERNEL"):
        kloader.KernelLoader()
    with pytest.raises(ValueError, match="mode"):
        kloader.KernelLoader(mode="always")


# ----------------------------------------------------------------- fallbacks


def test_require_mode_without_compiler_raises_clearly(cache, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    with pytest.raises(kloader.KernelBuildError, match=r"require.*compiler '/nonexistent/c\+\+' was not found"):
        kloader.KernelLoader(mode="require", backend="cpu-twin").load()


def test_auto_mode_without_compiler_warns_once_and_falls_back(cache, monkeypatch):
    monkeypatch.setenv("CXX", "/nonexistent/c++")
    loader = kloader.KernelLoader(mode="auto", backend="cpu-twin")
    with pytest.warns(kloader.KernelFallbackWarning, match="pure-PyTorch.*compiler"):
        st = loader.load()
    assert st.backend == "torch"
    assert "compiler" in st.reason
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert loader.load() is st  # remembered: no second warning, no second attempt


def test_fallback_end_to_end_in_a_fresh_process(tmp_path):
    """Public API, auto mode, no compiler: one warning, correct numbers, status says why."""
    code = (
        "import torch, torch.nn.functional as F\n"
        "from andrea_ref import kernels\n"
        "x = torch.randn(4, 8, dtype=torch.float64)\n"
        "for _ in range(3):\n"
        "    y = kernels.gelu(x)\n"
        "    kernels.bias_gelu(x, torch.zeros(8, dtype=torch.float64))\n"
        "assert torch.equal(y, F.gelu(x, approximate='tanh'))\n"
        "st = kernels.status()\n"
        "print('STATUS', st.backend, '|', st.reason)\n"
    )
    out = subprocess.run(
        [sys.executable, "-W", "always", "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO,
        env=_subprocess_env(ANDREA_KERNEL="auto", CXX="/nonexistent/c++", CUDA_VISIBLE_DEVICES="",
                            ANDREA_KERNEL_CACHE=str(tmp_path / "c")),
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("KernelFallbackWarning") == 1, out.stderr
    assert "STATUS torch | cpu-twin kernel unavailable: the C++ compiler" in out.stdout


def test_failed_compile_gives_the_compiler_error(cache, tmp_path, monkeypatch):
    broken = tmp_path / "src"
    shutil.copytree(kloader.SOURCE_DIR, broken)
    text = (broken / "gelu_cpu.cpp").read_text()
    (broken / "gelu_cpu.cpp").write_text("#error this source is broken on purpose\n" + text)
    _use_sources(monkeypatch, broken)
    loader = kloader.KernelLoader(mode="auto", backend="cpu-twin", out=io.StringIO())
    with pytest.warns(kloader.KernelFallbackWarning, match="build failed.*broken on purpose"):
        st = loader.load()
    assert st.backend == "torch"
    assert "build_error.log" in st.reason
    log = Path(st.build_dir) / "build_error.log"
    assert "broken on purpose" in log.read_text()


def test_cuda_build_on_cpu_only_torch_is_explained(cache, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.raises(kloader.KernelBuildError, match="CPU-only build"):
        kloader.plan("cuda")
    loader = kloader.KernelLoader(mode="auto", backend="cuda")
    with pytest.warns(kloader.KernelFallbackWarning, match="CPU-only"):
        assert loader.load().backend == "torch"


def test_nvcc_missing_is_explained(cache, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(kbuildplan, "nvcc_path", lambda: None)
    with pytest.raises(kloader.KernelBuildError, match="nvcc was not found"):
        kloader.plan("cuda")


def test_nvcc_major_version_mismatch_is_reported(cache, monkeypatch):
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(kbuildplan, "nvcc_path", lambda: "/opt/fake/bin/nvcc")
    monkeypatch.setattr(kbuildplan, "nvcc_version", lambda path: "13.0")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0")
    with pytest.raises(kloader.KernelBuildError, match=r"nvcc is CUDA 13\.0 but this torch was built with CUDA 12\.4"):
        kloader.plan("cuda")
    # same major version: accepted, and the arch list and nvcc version enter the key
    monkeypatch.setattr(torch.version, "cuda", "13.1")
    p = kloader.plan("cuda")
    assert p.arch_list == "9.0" and p.nvcc_version == "13.0"
    assert "arch-9.0" in p.build_dir.name and "cuda-13.1" in p.build_dir.name
    assert p.sources[-1].endswith("gelu_kernels.cu")


@pytest.mark.nvcc
def test_real_nvcc_version_is_read():
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc not installed")
    version = kloader.nvcc_version(nvcc)
    major, minor = version.split(".")
    assert major.isdigit() and minor.isdigit()


def test_arch_list_comes_from_the_visible_gpus(monkeypatch):
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    caps = {0: (9, 0), 1: (8, 0), 2: (9, 0)}
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: caps[i])
    assert kloader.visible_arch_list() == "8.0;9.0"
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0+PTX")
    assert kloader.visible_arch_list() == "9.0+PTX"
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert kloader.visible_arch_list() is None


# ----------------------------------------------------------------- the cache key


def test_build_dir_is_keyed_on_torch_sources_and_cache(cache, tmp_path, monkeypatch):
    p1 = kloader.plan("cpu-twin")
    assert p1.build_dir.parent == cache
    name = p1.build_dir.name
    assert name.startswith("cpu-twin_torch-") and "arch-cpu" in name
    assert "cuda-" + kbuildplan._slug(torch.version.cuda or "none") in name
    assert p1.name.startswith("andrea_gelu_") and p1.name.isidentifier()
    assert kloader.plan("cpu-twin") == p1  # deterministic

    monkeypatch.setattr(torch, "__version__", "9.9.9+test")
    p2 = kloader.plan("cpu-twin")
    assert p2.build_dir != p1.build_dir and p2.name != p1.name
    assert "torch-9.9.9-test" in p2.build_dir.name
    monkeypatch.undo()
    monkeypatch.setenv(kloader.ENV_CACHE, str(cache))

    edited = tmp_path / "src"
    shutil.copytree(kloader.SOURCE_DIR, edited)
    (edited / "gelu_math.h").write_text((edited / "gelu_math.h").read_text() + "\n// edit\n")
    _use_sources(monkeypatch, edited)
    p3 = kloader.plan("cpu-twin")
    assert p3.name != p1.name  # a header edit is a new build

    monkeypatch.setenv(kloader.ENV_CACHE, str(tmp_path / "elsewhere"))
    assert kloader.plan("cpu-twin").build_dir.parent == tmp_path / "elsewhere"


def test_default_cache_location(monkeypatch, tmp_path):
    monkeypatch.delenv(kloader.ENV_CACHE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert kloader.cache_root() == tmp_path / "andrea_ref"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert kloader.cache_root() == Path.home() / ".cache" / "andrea_ref"


def test_missing_sources_are_reported(cache, tmp_path, monkeypatch):
    _use_sources(monkeypatch, tmp_path / "nowhere")
    with pytest.raises(kloader.KernelBuildError, match="kernel sources not found.*gelu_cpu.cpp"):
        kloader.plan("cpu-twin")


# ----------------------------------------------------------------- locks


def test_stale_lock_rule(tmp_path):
    messages = []
    lock = tmp_path / "lock"
    lock.write_text("")
    # holding the OS lock: any cpp_extension lock is a leftover
    assert kloader.remove_stale_torch_lock(tmp_path, True, messages.append)
    assert not lock.exists() and "stale build lock" in messages[0]
    # without the OS lock, only an old one is stale
    lock.write_text("")
    assert not kloader.remove_stale_torch_lock(tmp_path, False, messages.append)
    assert lock.exists()
    old = time.time() - kloader.STALE_LOCK_AGE_S - 60
    os.utime(lock, (old, old))
    assert kloader.remove_stale_torch_lock(tmp_path, False, messages.append)
    assert not lock.exists()


def test_a_live_builder_is_waited_for_with_a_message(tmp_path):
    messages = []
    holder_in = threading.Event()
    release = threading.Event()

    def hold():
        with kbuildlock.BuildLock(tmp_path, messages.append, 5.0):
            holder_in.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert holder_in.wait(5)
        with pytest.raises(kloader.KernelBuildError, match="gave up after"):
            with kbuildlock.BuildLock(tmp_path, messages.append, 0.5):
                pass
        assert any("another process is building" in m for m in messages)
    finally:
        release.set()
        t.join()
    with kbuildlock.BuildLock(tmp_path, messages.append, 0.5) as lock:  # free again
        assert lock.exclusive


def _torch_lock_is_a_baton() -> bool:
    """True where cpp_extension guards its ``lock`` file with a FileBaton (torch up to 2.13
    at least): the file then exists only during a build, and a leftover one hangs the next
    load. Newer torch takes an flock on it instead (the ``filelock`` package) and leaves
    the empty file behind after every build, which is harmless."""
    import inspect

    from torch.utils import cpp_extension

    return "FileBaton" in inspect.getsource(cpp_extension._jit_compile)


@pytest.mark.slow  # one cold build and one rebuild of the CPU twin: in `make test`, not the quick loop
def test_stale_lock_is_removed_not_waited_on(tmp_path, monkeypatch):
    """A `lock` left by a killed build: the next load removes it, says so, and builds.
    Then: a warm load is silent; a truncated library is rebuilt."""
    cache = tmp_path / "cache"
    monkeypatch.setenv(kloader.ENV_CACHE, str(cache))
    p = kloader.plan("cpu-twin")
    p.build_dir.mkdir(parents=True)
    (p.build_dir / "lock").write_text("")  # what cpp_extension leaves when killed mid-build
    code = "from andrea_ref import kernels\nst = kernels.load()\nprint('STATUS', st.backend, st.compiled_now)\n"
    env = _subprocess_env(ANDREA_KERNEL="require", ANDREA_KERNEL_CACHE=str(cache), CUDA_VISIBLE_DEVICES="")
    try:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                             cwd=REPO, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail("the loader hung on a stale lock file")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "removed a stale build lock" in out.stdout
    assert out.stdout.count("compiling the GELU CPU twin (once; cached in") == 1
    assert "STATUS cpu-twin True" in out.stdout
    if _torch_lock_is_a_baton():
        assert not (p.build_dir / "lock").exists()
    assert p.library_path.exists()

    # warm: a new process loads the cached library without compiling or printing
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=REPO, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "STATUS cpu-twin False"

    # a library cut short (a build killed while linking) is rebuilt, not a permanent failure
    p.library_path.write_bytes(b"not an ELF file")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                         cwd=REPO, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "does not load" in out.stdout and "rebuilding" in out.stdout
    assert "STATUS cpu-twin True" in out.stdout
