"""What confines a learner's kernel beyond the sandbox's namespaces: the seccomp
filters (no keyring channel between learners, no new namespaces for learner code)
and the cgroup caps (memory that RLIMIT_AS never sees, processes per job).

Every real test here is bounded: at most 512 MiB asked for (under a 256 MiB cap),
at most 60 threads or processes, and every child runs under a timeout."""
from __future__ import annotations

import errno
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from classroom.isolation import cgroup_group, cgroups, seccomp

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
MiB = 1 << 20
IS_ROOT = os.geteuid() == 0
X86_64 = platform.machine() == "x86_64" and sys.maxsize > 2**32
KEY_UID = 61997          # a dedicated uid of its own (the sandbox tests use 61990)

# ----------------------------------------------------------------------------- seccomp
# The child's preamble: install the program(s) named on the command line with the
# standard library only (pyseccomp is made unimportable first), then a tiny
# syscall() helper that returns (result, errno).
PREAMBLE = textwrap.dedent(r"""
    import ctypes, errno, os, sys, threading, json
    sys.modules["pyseccomp"] = None            # install() must not need it
    sys.path.insert(0, {root!r})
    from classroom.isolation import seccomp
    for path in sys.argv[1:]:
        seccomp.install(open(path, "rb").read())
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    def sc(nr, *args):
        ctypes.set_errno(0)
        r = libc.syscall(ctypes.c_long(nr), *[a if isinstance(a, (bytes, ctypes._SimpleCData)) else ctypes.c_long(a) for a in args])
        return r, ctypes.get_errno()
    NR = {{"x86_64": dict(keyctl=250, add_key=248, request_key=249, unshare=272, clone=56, clone3=435,
                          mount=165, setns=308, ptrace=101, bpf=321, getpid=39),
           "aarch64": dict(keyctl=219, add_key=217, request_key=218, unshare=97, clone=220, clone3=435,
                           mount=40, setns=268, ptrace=117, bpf=280, getpid=172)}}[os.uname().machine]
    res = {{}}
    def status(field):
        for line in open("/proc/self/status"):
            if line.startswith(field + ":"):
                return line.split()[1]
    res["seccomp_mode"] = status("Seccomp")
""")


def _child(code: str, *programs: Path, timeout: int = 180, env: dict | None = None) -> dict:
    src = PREAMBLE.format(root=str(ROOT)) + textwrap.dedent(code) + "\nprint('RESULT', json.dumps(res))\n"
    proc = subprocess.run([PY, "-c", src, *map(str, programs)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    if seccomp.available() is not None:
        pytest.skip(f"seccomp filters unavailable: {seccomp.available()}")
    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the probes know the call numbers of x86_64 and aarch64 only")
    d = tmp_path_factory.mktemp("bpf")
    out = {"sandbox": seccomp.write_program(d / "sandbox.bpf", seccomp.SANDBOX_DENY),
           "nest": seccomp.write_program(d / "nest.bpf", seccomp.NEST_DENY),
           "learner": seccomp.write_program(d / "learner.bpf", seccomp.LEARNER_DENY)}
    for p in out.values():
        assert p.stat().st_mode & 0o777 == 0o644
    return out


# Probes that change nothing even where they get through: unfiltered, each fails
# with its own errno (or succeeds harmlessly), never with EPERM (as root).
PROBES = r"""
res["keyctl"] = sc(NR["keyctl"], 0, -4, 0)                       # KEYCTL_GET_KEYRING_ID @u
res["add_key"] = sc(NR["add_key"], b"user", b"", b"x", 1, -4)    # empty description: EINVAL
res["request_key"] = sc(NR["request_key"], b"user", b"andrea-no-such-key", 0, 0)   # ENOKEY
res["ptrace"] = sc(NR["ptrace"], 3, os.getpid(), 0, 0)           # PTRACE_PEEKUSR, not traced: ESRCH
res["bpf"] = sc(NR["bpf"], 0, 0, 0)                              # no attr: EINVAL
"""
BLOCKED = ("keyctl", "add_key", "request_key", "ptrace", "bpf")

KEY_AND_WORK = PROBES + r"""
import torch
a = torch.randn(256, 256)
res["torch"] = float((a @ a.T).trace()) > 0 and torch.get_num_threads()
out = []
ts = [threading.Thread(target=lambda i=i: out.append(i)) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
res["threads"] = sorted(out) == list(range(8))
pid = os.fork()
if pid == 0:
    os._exit(7)
res["fork"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
res["spawn"] = __import__("subprocess").run(["true"]).returncode
"""


def test_sandbox_filter_blocks_the_keyring_and_keeps_pytorch(programs):
    res = _child(KEY_AND_WORK + r"""
if os.geteuid() == 0:
    # The trusted helper's one use of unshare must still work under SANDBOX_DENY.
    pid = os.fork()
    if pid == 0:
        os._exit(0 if sc(NR["unshare"], 0x00020000)[0] == 0 else 1)     # CLONE_NEWNS
    res["helper_unshare"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
""", programs["sandbox"])
    assert res["seccomp_mode"] == "2"
    for call in BLOCKED:
        assert res[call] == [-1, errno.EPERM], (call, res[call])
    assert res["torch"] and res["threads"] and res["fork"] == 7 and res["spawn"] == 0
    if IS_ROOT:
        assert res["helper_unshare"] == 0


def test_without_a_filter_the_probes_reach_the_kernel(programs):
    """The control: the same probe with no filter gets past seccomp (any answer but
    the filter's), so the EPERMs above are the filter's doing."""
    res = _child(PROBES)
    assert res["seccomp_mode"] == "0"
    for call in BLOCKED if IS_ROOT else ("keyctl", "add_key", "request_key", "ptrace"):
        assert res[call] != [-1, errno.EPERM], (call, res[call])


@pytest.mark.parametrize("stack", ["stacked", "combined"])
def test_nest_filter_refuses_namespaces_keeps_threads_and_fork(programs, stack):
    progs = (programs["sandbox"], programs["nest"]) if stack == "stacked" else (programs["learner"],)
    res = _child(KEY_AND_WORK + r"""
res["unshare_user"] = sc(NR["unshare"], 0x10000000)                 # CLONE_NEWUSER
res["unshare_ns"] = sc(NR["unshare"], 0x00020000)
res["setns"] = sc(NR["setns"], 0, 0)
res["mount"] = sc(NR["mount"], b"none", b"/tmp", b"tmpfs", 0, 0)
res["clone3"] = sc(NR["clone3"], 0, 0)
def clone_in_child(flags):
    # fork first: should the filter let clone through, the copy it makes exits at once.
    pid = os.fork()
    if pid == 0:
        r, e = sc(NR["clone"], flags | signal_chld, 0, 0, 0, 0)
        if r == 0:
            os._exit(100)                   # the namespaced clone itself: it got through
        if r > 0:
            os.waitpid(r, 0)
            os._exit(0)                     # clone succeeded
        os._exit(e)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
signal_chld = 17
res["clone_newns"] = clone_in_child(0x00020000)
res["clone_newuser"] = clone_in_child(0x10000000)
res["clone_newnet"] = clone_in_child(0x40000000)
res["clone_plain"] = clone_in_child(0)
""", *progs)
    assert res["seccomp_mode"] == "2"
    for call in ("unshare_user", "unshare_ns", "setns", "mount", "keyctl", "add_key"):
        assert res[call] == [-1, errno.EPERM], (call, res[call])
    assert res["clone3"] == [-1, errno.ENOSYS]
    assert res["clone_newns"] == res["clone_newuser"] == res["clone_newnet"] == errno.EPERM
    assert res["clone_plain"] == 0
    assert res["torch"] and res["threads"] and res["fork"] == 7 and res["spawn"] == 0


@pytest.mark.skipif(not X86_64, reason="x32 and int 0x80 are x86_64's foreign ABIs")
def test_foreign_abis_are_refused(programs, tmp_path):
    int80 = textwrap.dedent(r"""
        import ctypes, mmap, os, sys
        sys.path.insert(0, sys.argv[1])
        if len(sys.argv) > 2:
            from classroom.isolation import seccomp
            seccomp.install(open(sys.argv[2], "rb").read())
        m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        m.write(b"\xb8\x14\x00\x00\x00\xcd\x80\xc3")      # mov eax, 20 (i386 getpid); int 0x80; ret
        f = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))
        libc = ctypes.CDLL(None, use_errno=True)
        ctypes.set_errno(0)
        x32 = libc.syscall(ctypes.c_long(0x40000000 | 39)), ctypes.get_errno()   # x32 getpid
        print(f(), os.getpid(), *x32)
    """)
    script = tmp_path / "int80.py"
    script.write_text(int80)
    control = subprocess.run([PY, str(script), str(ROOT)], capture_output=True, text=True, timeout=60)
    filtered = subprocess.run([PY, str(script), str(ROOT), str(programs["sandbox"])],
                              capture_output=True, text=True, timeout=60)
    assert filtered.returncode == 0, filtered.stderr
    got, pid, x32, x32_errno = map(int, filtered.stdout.split())
    assert got == -errno.EPERM                              # i386 getpid refused
    assert (x32, x32_errno) == (-1, errno.EPERM)           # x32 getpid refused
    if control.returncode == 0:                             # kernel with IA32 emulation:
        c_got, c_pid, *_ = map(int, control.stdout.split())
        assert c_got == c_pid                               # the same call works unfiltered


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_through_bubblewrap(programs):
    """bwrap --seccomp FD installs SANDBOX_DENY; inside, the trusted helper may still
    unshare once, then stacks NEST_DENY (standard library only) before learner code."""
    code = PREAMBLE.format(root=str(ROOT)) + textwrap.dedent(r"""
        res["keyctl"] = sc(NR["keyctl"], 0, -4, 0)
        res["add_key"] = sc(NR["add_key"], b"user", b"", b"x", 1, -4)
        res["helper_unshare"] = sc(NR["unshare"], 0x00020000)        # CLONE_NEWNS, before learner code
        seccomp.install(open(os.environ["NEST"], "rb").read())
        res["learner_unshare"] = sc(NR["unshare"], 0x00020000)
        print("RESULT", json.dumps(res))
    """)
    fd = os.open(programs["sandbox"], os.O_RDONLY)
    try:
        argv = ["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
                "--die-with-parent"] + ([] if IS_ROOT else ["--unshare-user"]) + \
               ["--seccomp", str(fd), "--", PY, "-c", code]
        proc = subprocess.run(argv, pass_fds=(fd,), capture_output=True, text=True, timeout=120,
                              env={**os.environ, "NEST": str(programs["nest"])})
    finally:
        os.close(fd)
    if proc.returncode != 0 and proc.stderr.startswith("bwrap:"):
        pytest.skip(f"bubblewrap cannot run here: {proc.stderr.strip()[-500:]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.split("RESULT ", 1)[1])
    assert res["seccomp_mode"] == "2"
    assert res["keyctl"] == [-1, errno.EPERM] and res["add_key"] == [-1, errno.EPERM]
    assert res["helper_unshare"] == [0, 0]
    assert res["learner_unshare"] == [-1, errno.EPERM]


KEY_PROBE = textwrap.dedent(r"""
    import ctypes, sys
    sys.modules["pyseccomp"] = None
    sys.path.insert(0, sys.argv[1])
    program = sys.stdin.buffer.read()
    if program:
        from classroom.isolation import seccomp
        seccomp.install(program)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    NR = {"x86_64": (248, 250), "aarch64": (217, 219)}[__import__("os").uname().machine]
    L = ctypes.c_long
    USER_KEYRING = L(-4)
    mode = sys.argv[2]
    ctypes.set_errno(0)
    if mode == "add":
        r = libc.syscall(L(NR[0]), b"user", b"andrea-probe", b"left-by-A", ctypes.c_size_t(9), USER_KEYRING)
        print(r, ctypes.get_errno())
    elif mode == "read":
        kid = libc.syscall(L(NR[1]), L(10), USER_KEYRING, b"user", b"andrea-probe", L(0))   # KEYCTL_SEARCH
        e = ctypes.get_errno()
        buf = ctypes.create_string_buffer(64)
        n = libc.syscall(L(NR[1]), L(11), L(kid), buf, ctypes.c_size_t(64)) if kid > 0 else -1   # KEYCTL_READ
        print(kid, e, buf.raw[:max(n, 0)].decode())
    else:
        print(libc.syscall(L(NR[1]), L(7), USER_KEYRING), ctypes.get_errno())               # KEYCTL_CLEAR
""")


@pytest.mark.skipif(not IS_ROOT or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run two processes as one dedicated uid")
def test_keyring_channel_between_processes_of_one_uid(programs):
    """The attack: learner A's kernel leaves a key in its uid's keyring, learner B's
    kernel (same worker, same uid, later) reads it. It works without the filter and
    fails at A's add_key with it."""
    def as_uid(mode, program=b""):
        argv = ["setpriv", f"--reuid={KEY_UID}", f"--regid={KEY_UID}", "--clear-groups",
                PY, "-c", KEY_PROBE, str(ROOT), mode]
        proc = subprocess.run(argv, input=program, capture_output=True, timeout=60)
        assert proc.returncode == 0, proc.stderr.decode()[-2000:]
        return proc.stdout.decode().split()

    sandbox = programs["sandbox"].read_bytes()
    try:
        as_uid("clear")
        added = as_uid("add")
        if int(added[0]) < 0:
            pytest.skip(f"the kernel keyring is not usable here even unfiltered (errno {added[1]})")
        read = as_uid("read")                                  # a later process, same uid
        assert int(read[0]) == int(added[0]) and read[2] == "left-by-A"     # the channel exists
        as_uid("clear")

        added = as_uid("add", sandbox)                         # under the filter
        assert added == ["-1", str(errno.EPERM)]
        read = as_uid("read", sandbox)
        assert read[:2] == ["-1", str(errno.EPERM)]
        read = as_uid("read")                                  # nothing was left behind
        assert int(read[0]) == -1 and int(read[1]) == errno.ENOKEY
    finally:
        as_uid("clear")


def test_program_skips_calls_the_arch_lacks_and_refuses_unknown_names():
    if seccomp.available() is not None:
        pytest.skip(seccomp.available())
    if X86_64:
        assert seccomp.program(["vm86", "keyctl"]) == seccomp.program(["keyctl"])   # i386-only call
    with pytest.raises(ValueError, match="unknown system call"):
        seccomp.program(["keyctl", "no_such_call"])
    assert "unshare" not in seccomp.SANDBOX_DENY and "mount" not in seccomp.SANDBOX_DENY
    assert "clone" not in seccomp.SANDBOX_DENY


def test_install_covers_running_threads_and_falls_back_to_prctl(programs):
    """TSYNC: a thread started before install() is filtered too. Where seccomp(2) is
    missing, prctl(PR_SET_SECCOMP) does it for a process that has one thread."""
    res = _child(r"""
def probe():
    return sc(NR["request_key"], b"user", b"andrea-no-such-key", 0, 0)
pid = os.fork()                                 # before any filter: a clean process
if pid == 0:
    before = probe()
    seccomp._nr_seccomp = lambda: None          # as if the kernel had no seccomp(2)
    try:
        seccomp.install(open(os.environ["PROG"], "rb").read())
    except OSError:
        os._exit(2)
    ok = before[1] != errno.EPERM and probe() == (-1, errno.EPERM) and status("Seccomp") == "2"
    os._exit(0 if ok else 1)
res["prctl"] = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
go, done = threading.Event(), threading.Event()
def early():
    go.wait(); res["early_thread"] = probe(); done.set()
t = threading.Thread(target=early); t.start()
res["before"] = probe()
seccomp.install(open(os.environ["PROG"], "rb").read())
go.set(); done.wait(); t.join()
""", env={"PROG": str(programs["learner"])})
    assert res["before"] != [-1, errno.EPERM]
    assert res["early_thread"] == [-1, errno.EPERM]
    assert res["prctl"] == 0


def test_install_refuses_a_malformed_program():
    proc = subprocess.run([PY, "-c", textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(ROOT)!r})
        from classroom.isolation import seccomp
        try:
            seccomp.install(b"1234567")
        except OSError as e:
            print("refused", e.errno)
    """)], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == ["refused", str(errno.EINVAL)], proc.stderr


# ----------------------------------------------------------------------------- cgroups: fake v2
class FakeKernel:
    """Plain folders and files standing in for a cgroup v2 file system, with the
    kernel's rules that matter here: controllers reach a child only through the
    parent's cgroup.subtree_control; a non-root cgroup holding processes cannot enable
    a controller for its children (EBUSY), nor take processes while it has some
    enabled; rmdir of a cgroup with members or children is EBUSY."""

    FILES = {"memory": ("memory.max", "memory.swap.max", "memory.oom.group", "memory.events", "memory.peak"),
             "pids": ("pids.max",)}

    def __init__(self, root: Path, own: str, procs: list[int], root_enables=("memory", "pids"),
                 fail_mkdir: int | None = None):
        self.root, self.writes, self.fail_mkdir = root, [], fail_mkdir
        root.mkdir()
        (root / "cgroup.controllers").write_text("cpu io memory pids\n")
        self._files(root, "", "cpu io memory pids")
        (root / "cgroup.subtree_control").write_text(" ".join(root_enables) + "\n")
        d = root
        for part in [p for p in own.split("/") if p]:
            d = d / part
            self._populate(d)
        (d / "cgroup.procs").write_text("".join(f"{p}\n" for p in procs))
        self.own = d
        self.proc_cgroup = root.parent / "self-cgroup"
        self.proc_cgroup.write_text(f"0::{own}\n")

    def _files(self, d: Path, subtree: str, controllers: str):
        for name in ("cgroup.procs", "cgroup.kill"):
            if not (d / name).exists():
                (d / name).write_text("")
        (d / "cgroup.subtree_control").write_text(subtree)
        (d / "cgroup.controllers").write_text(controllers)
        for c, files in self.FILES.items():
            for f in files:
                if c in controllers.split() and not (d / f).exists():
                    (d / f).write_text("max\n" if f.endswith("max") else "0\n")
                elif c not in controllers.split() and (d / f).exists():
                    (d / f).unlink()

    def _populate(self, d: Path):
        d.mkdir()
        self._files(d, "", (d.parent / "cgroup.subtree_control").read_text().strip())

    def _procs(self, d: Path) -> list[str]:
        return (d / "cgroup.procs").read_text().split()

    # the module's four file operations
    def mkdir(self, path: Path):
        if self.fail_mkdir is not None:
            raise OSError(self.fail_mkdir, os.strerror(self.fail_mkdir), str(path))
        if path.exists():
            raise FileExistsError(errno.EEXIST, "File exists", str(path))
        self._populate(path)

    def rmdir(self, path: Path):
        if not path.exists():
            raise FileNotFoundError(errno.ENOENT, "No such file", str(path))
        if self._procs(path) or any(p.is_dir() for p in path.iterdir()):
            raise OSError(errno.EBUSY, "Device or resource busy", str(path))
        shutil.rmtree(path)

    def write(self, path: Path, text: str):
        d, name = path.parent, path.name
        self.writes.append((str(path.relative_to(self.root)), text))
        if name == "cgroup.subtree_control":
            have = (d / name).read_text().split()
            avail = (d / "cgroup.controllers").read_text().split()
            for word in text.split():
                c = word[1:]
                if word[0] == "+":
                    if c not in avail:
                        raise OSError(errno.ENOENT, "No such file or directory", str(path))
                    if d != self.root and self._procs(d):
                        raise OSError(errno.EBUSY, "Device or resource busy", str(path))
                    have = have + [c] if c not in have else have
                else:
                    if any(c in (k / name).read_text().split() for k in d.iterdir() if k.is_dir()):
                        raise OSError(errno.EBUSY, "Device or resource busy", str(path))
                    have = [h for h in have if h != c]
            (d / name).write_text(" ".join(have))
            for k in d.iterdir():
                if k.is_dir():
                    self._files(k, (k / name).read_text(), " ".join(have))
        elif name == "cgroup.procs":
            if d != self.root and (d / "cgroup.subtree_control").read_text().split():
                raise OSError(errno.EBUSY, "Device or resource busy", str(path))
            for f in self.root.rglob("cgroup.procs"):
                f.write_text("".join(f"{p}\n" for p in f.read_text().split() if p != text.strip()))
            with open(path, "a") as f:
                f.write(text.strip() + "\n")
        elif name == "cgroup.kill":
            for pid in self._procs(d):       # only pids the test put there (its own children)
                os.kill(int(pid), signal.SIGKILL)
            (d / "cgroup.procs").write_text("")
        else:
            if not path.exists():
                raise OSError(errno.ENOENT, "No such file or directory", str(path))
            path.write_text(text)


@pytest.fixture()
def fake(tmp_path, monkeypatch):
    def make(own="/grader.service", procs=None, **kw):
        k = FakeKernel(tmp_path / "cgroup", own, [os.getpid()] if procs is None else procs, **kw)
        monkeypatch.setattr(cgroup_group, "mkdir", k.mkdir)
        monkeypatch.setattr(cgroup_group, "rmdir", k.rmdir)
        monkeypatch.setattr(cgroup_group, "write", k.write)
        return k
    return make


def test_v2_fake_tree_moves_the_grader_into_main_and_caps_the_group(fake):
    k = fake()
    me = str(os.getpid())
    assert cgroups.detect(k.root, proc_cgroup=str(k.proc_cgroup)) == "v2"
    tree = cgroups.open_tree("andrea-grading", k.root, proc_cgroup=str(k.proc_cgroup))
    t = tree.path
    assert t.parent == k.own and t.name.startswith("andrea-grading-")
    # EBUSY on the own cgroup's subtree_control: only this process moved to <tree>/main.
    assert tree.moved_to_main
    assert (t / "main" / "cgroup.procs").read_text().split() == [me]
    assert (k.own / "cgroup.procs").read_text().split() == []
    assert set((k.own / "cgroup.subtree_control").read_text().split()) == {"memory", "pids"}
    assert set((t / "cgroup.subtree_control").read_text().split()) == {"memory", "pids"}

    g = cgroups.make_group(tree, "kernel-0", 256 * MiB, 20)
    assert g.path == t / "kernel-0"
    assert (g.path / "memory.max").read_text() == str(256 * MiB)
    assert (g.path / "memory.swap.max").read_text() == "0"
    assert (g.path / "memory.oom.group").read_text() == "1"
    assert (g.path / "pids.max").read_text() == "20"
    assert g.procs_files() == [str(g.path / "cgroup.procs")]
    (g.path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n")
    (g.path / "memory.peak").write_text("123456\n")
    assert g.oom_kills() == 2 and g.memory_peak() == 123456

    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        g.join(sleeper.pid)
        assert g.pids() == [sleeper.pid]
        tree.close()                       # cgroup.kill, rmdir, move back, rmdir
        assert sleeper.wait(timeout=10) == -signal.SIGKILL
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
    assert not t.exists()
    assert (k.own / "cgroup.procs").read_text().split() == [me]     # back where it started
    assert (k.own / "cgroup.subtree_control").read_text().split() == []


def test_v2_fake_cpu_share_for_every_group_where_the_controller_reaches(fake, monkeypatch):
    """With the cpu controller delegated, every group gets the same cpu.weight (one share
    per sandbox, however many processes it starts); without it the tree still opens and
    says why there is no share."""
    monkeypatch.setattr(FakeKernel, "FILES", {**FakeKernel.FILES, "cpu": ("cpu.weight",)})
    k = fake(root_enables=("cpu", "memory", "pids"))
    tree = cgroups.open_tree(root=k.root, proc_cgroup=str(k.proc_cgroup))
    assert tree.cpu_unavailable is None
    assert set((tree.path / "cgroup.subtree_control").read_text().split()) == {"cpu", "memory", "pids"}
    g = tree.group("w0-kernel", 256 * MiB, 20)
    assert (g.path / "cpu.weight").read_text() == "100"
    assert (f"grader.service/{tree.path.name}/w0-kernel/cpu.weight", "100") in k.writes
    tree.close()
    assert (k.own / "cgroup.subtree_control").read_text().split() == []


def test_v2_fake_without_the_cpu_controller_opens_and_says_why(fake):
    k = fake()  # memory and pids delegated, cpu not
    tree = cgroups.open_tree(root=k.root, proc_cgroup=str(k.proc_cgroup))
    assert "cpu controller is not available" in tree.cpu_unavailable
    g = tree.group("w0-kernel", 256 * MiB, 20)
    assert not (g.path / "cpu.weight").exists() and (g.path / "pids.max").read_text() == "20"
    tree.close()


def test_v2_fake_root_cgroup_needs_no_move(fake):
    k = fake(own="/", procs=[1, os.getpid()])    # the root cgroup is exempt from the rule
    tree = cgroups.open_tree(root=k.root, proc_cgroup=str(k.proc_cgroup))
    assert not tree.moved_to_main and not (tree.path / "main").exists()
    g = tree.group("worker-1", 2 << 30, 64)
    assert (g.path / "memory.max").read_text() == str(2 << 30)
    tree.close()
    assert not tree.path.exists()


def test_v2_fake_other_processes_in_our_cgroup(fake):
    k = fake(procs=[os.getpid(), 999999])
    with pytest.raises(cgroups.CgroupUnavailable, match="holds other processes") as exc:
        cgroups.open_tree(root=k.root, proc_cgroup=str(k.proc_cgroup))
    assert "999999" in str(exc.value) and "Delegate=yes" in str(exc.value)
    # Everything put back: both processes where they were, no folder left.
    assert sorted((k.own / "cgroup.procs").read_text().split()) == sorted([str(os.getpid()), "999999"])
    assert [p.name for p in k.own.iterdir() if p.is_dir()] == []


def test_v2_fake_undelegated_tree(fake):
    k = fake(root_enables=())
    with pytest.raises(cgroups.CgroupUnavailable, match="not available in our cgroup.*not delegated"):
        cgroups.detect(k.root, proc_cgroup=str(k.proc_cgroup))
    with pytest.raises(cgroups.CgroupUnavailable, match="memory and pids controllers are not available"):
        cgroups.open_tree(root=k.root, proc_cgroup=str(k.proc_cgroup))


@pytest.mark.parametrize("err, words", [(errno.EROFS, "read-only"),
                                        (errno.EACCES, "not root, and the cgroup was not delegated")])
def test_v2_fake_unwritable_tree(fake, err, words):
    k = fake(fail_mkdir=err)
    with pytest.raises(cgroups.CgroupUnavailable, match=words) as exc:
        cgroups.open_tree(root=k.root, proc_cgroup=str(k.proc_cgroup))
    assert "must give the grader a cgroup" in str(exc.value)


def test_v1_fake_detect_and_nothing_at_all(tmp_path):
    root = tmp_path / "cg"
    for c in ("memory", "pids"):
        (root / c / "grader").mkdir(parents=True)
        (root / c / "cgroup.procs").write_text("")
    proc = tmp_path / "self-cgroup"
    proc.write_text("5:pids:/grader\n4:memory:/grader\n1:name=systemd:/\n0::/\n")
    assert cgroups.detect(root, proc_cgroup=str(proc)) == "v1"
    with pytest.raises(cgroups.CgroupUnavailable, match="no cgroup v2 hierarchy"):
        cgroups.detect(tmp_path / "empty", proc_cgroup=str(proc))


# ----------------------------------------------------------------------------- cgroups: real
@pytest.fixture()
def tree():
    try:
        cgroups.detect()
        t = cgroups.open_tree("andrea-test")
    except cgroups.CgroupUnavailable as exc:
        pytest.skip(str(exc))
    try:
        yield t
    finally:
        t.close()
        for d in t.dirs:
            assert not d.exists()


def _join_code(group: cgroups.Group) -> str:
    # What the launcher does: write its own pid into each file, standard library only.
    return (f"import os\nfor f in {group.procs_files()!r}:\n"
            f"    with open(f, 'w') as fh: fh.write(str(os.getpid()))\n")


def test_memory_cap_catches_memfd_that_rlimit_as_misses(tree):
    g = tree.group("memfd", 256 * MiB, 20)
    code = _join_code(g) + textwrap.dedent("""
        fd = os.memfd_create("fill")              # written, never mapped: invisible to RLIMIT_AS
        chunk = b"x" * (16 << 20)
        for i in range(32):                       # 512 MiB against a 256 MiB cap
            os.write(fd, chunk)
        print("survived")
    """)
    proc = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    assert "survived" not in proc.stdout
    assert g.oom_kills() >= 1
    peak = g.memory_peak()
    assert peak is None or peak <= 256 * MiB + 4 * MiB
    g.remove()
    assert not any(d.exists() for d in g.dirs)


def test_process_cap_stops_threads_and_forks(tree):
    g = tree.group("pids", 256 * MiB, 20)
    code = _join_code(g) + textwrap.dedent("""
        import threading, time
        stop = threading.Event()
        threads = 1
        for i in range(60):                       # bounded: never more than 60
            t = threading.Thread(target=stop.wait)
            try:
                t.start()
            except RuntimeError:
                break
            threads += 1
        stop.set()
        time.sleep(0.5)
        r, w = os.pipe()
        kids, forks = [], 1
        for i in range(60):
            try:
                pid = os.fork()
            except BlockingIOError:
                break
            if pid == 0:
                os.close(w); os.read(r, 1); os._exit(0)
            kids.append(pid); forks += 1
        os.close(w)
        for pid in kids:
            os.waitpid(pid, 0)
        print(threads, forks)
    """)
    proc = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    threads, forks = map(int, proc.stdout.split())
    assert threads < 50 and forks < 50
    assert threads <= 20 and forks <= 20
    assert g.pids() == []


def test_kill_all_and_remove_leave_nothing_behind(tree):
    g = tree.group("sleepers", 256 * MiB, 40)
    code = _join_code(g) + textwrap.dedent("""
        import subprocess, sys
        kids = [subprocess.Popen(["sleep", "300"]) for _ in range(5)]
        print("ready", flush=True)
        sys.stdin.read()
    """)
    parent = subprocess.Popen([PY, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        members = g.pids()
        assert parent.pid in members and len(members) == 6
        g.kill_all()
        assert g.pids() == []
        assert parent.wait(timeout=10) == -signal.SIGKILL
        for pid in members:
            if pid != parent.pid:             # orphans, reaped by init: gone or a zombie at most
                try:
                    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
                except FileNotFoundError:
                    continue
                assert state in ("Z", "X")
        g.remove()
        assert not any(d.exists() for d in g.dirs)
        g.remove()                            # already gone: fine
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_remove_empties_a_group_that_a_late_process_joins(tree):
    """A process that joins after the members were killed (a launcher whose worker
    died while it was starting) does not keep the group, or the run, alive."""
    g = tree.group("late", 256 * MiB, 40)
    code = _join_code(g) + "import time\ntime.sleep(300)\n"
    first = subprocess.Popen([PY, "-c", code])
    late = []

    def join_late():  # a new member each 50 ms for a second, while remove() runs
        for _ in range(20):
            late.append(subprocess.Popen([PY, "-c", code]))
            time.sleep(0.05)

    try:
        deadline = time.monotonic() + 20
        while first.pid not in g.pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        joiner = threading.Thread(target=join_late)
        joiner.start()
        time.sleep(0.2)
        g.remove()
        joiner.join()
        g.remove()  # the ones that joined after remove() returned
        assert not any(d.exists() for d in g.dirs)
    finally:
        for p in [first, *late]:
            if p.poll() is None:
                p.kill()
            p.wait()


def test_a_child_whose_parent_is_already_gone_does_not_start(tmp_path):
    """``_die_with_parent`` given the pid that started the process: if that parent has
    died before the death signal was set, the child stops at once instead of running
    on as an orphan holding the run's pipes."""
    code = ("import os, sys\nsys.path.insert(0, %r)\nfrom classroom.isolation.processes import die_with_parent\n"
            "die_with_parent(int(sys.argv[1]))\nprint('still running')\n") % str(ROOT)
    gone = subprocess.run([PY, "-c", code, "999999999"], capture_output=True, text=True, timeout=60)
    assert gone.returncode == 1 and "still running" not in gone.stdout
    alive = subprocess.run([PY, "-c", code, str(os.getpid())], capture_output=True, text=True, timeout=60)
    assert alive.returncode == 0 and "still running" in alive.stdout
