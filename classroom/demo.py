"""A demo class, graded by the real grader: what ``make demo`` runs.

    python -m classroom.demo [--out _build/demo] [--workers N]

Writes a small class into ``OUT/submissions/`` -- six learners of the first two
assignments, made from the released notebooks in ``exercises/`` as learners hand them in:

- ``ada``: LayerNorm and GELU right;
- ``ben``: LayerNorm with the unbiased variance, GELU in the exact erf form (each loses
  one property, and the feedback names the likely mistake);
- ``cleo``: both notebooks handed in as released (untouched);
- ``dan``: LayerNorm right, GELU never handed in (missing);
- ``eve``: a hostile GELU that rebinds the checks its notebook calls, so that the
  notebook shows full marks, and prints markup meant to run in the feedback page
  (it gets no points, is held as "tampering suspected", and its markup stays text);
- ``fay``: on the class list (``nbgrader db student add``), hands in nothing;

and a course gradebook of its own (``OUT/gradebook.db``: the class list), then grades it
with ``python -m classroom.grade`` into ``OUT/grading/`` and prints what to open: the
class view ``report.html`` and a feedback page. Running it again starts afresh.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from nbgrader.api import Gradebook

from andrea_ref.grading.course import venv_bin_on_path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "_build" / "demo"
NOTEBOOKS = {"02_layernorm": ("layernorm.ipynb", "layer_norm"), "03_gelu": ("gelu.ipynb", "gelu")}

LN_RIGHT = ("def layer_norm(x, gamma, beta, eps=1e-5):\n"
            "    mean = x.mean(dim=-1, keepdim=True)\n"
            "    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)\n"
            "    return gamma * (x - mean) / torch.sqrt(var + eps) + beta\n")
LN_UNBIASED = ("def layer_norm(x, gamma, beta, eps=1e-5):\n"
               "    mean = x.mean(dim=-1, keepdim=True)\n"
               "    var = x.var(dim=-1, keepdim=True)\n"
               "    return gamma * (x - mean) / torch.sqrt(var + eps) + beta\n")
GELU_RIGHT = ("def gelu(x):\n"
              "    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))\n")
GELU_ERF = "def gelu(x):\n    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))\n"
GELU_HOSTILE = ("from andrea_ref import grading as _g\n"
                "for _name in dir(_g):\n"
                "    if _name.startswith('check_'):\n"
                "        setattr(_g, _name, lambda *a, **k: print('\\u2713 looks fine'))\n"
                "print(\"<img src=x onerror=alert('eve')><script>alert('eve')</script>\")\n"
                "def gelu(x):\n"
                "    return x\n")
# learner: {assignment: the answer (None: the released notebook as it is)}
CLASS = {
    "ada": {"02_layernorm": LN_RIGHT, "03_gelu": GELU_RIGHT},
    "ben": {"02_layernorm": LN_UNBIASED, "03_gelu": GELU_ERF},
    "cleo": {"02_layernorm": None, "03_gelu": None},
    "dan": {"02_layernorm": LN_RIGHT},
    "eve": {"03_gelu": GELU_HOSTILE},
}
ON_THE_LIST_ONLY = ("fay",)


def handed_in(released: dict, cell_id: str, answer: str | None) -> dict:
    """The released notebook with ``answer`` in its answer cell ``cell_id``."""
    nb = copy.deepcopy(released)
    if answer is not None:
        for cell in nb["cells"]:
            if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == cell_id:
                cell["source"] = answer.splitlines(keepends=True)
    return nb


def write_class(out: Path, exercises: Path = ROOT / "exercises") -> tuple[Path, str]:
    """The demo's submissions and class list under ``out``: (submissions folder, gradebook URL)."""
    shutil.rmtree(out, ignore_errors=True)
    subs = out / "submissions"
    for student, answers in CLASS.items():
        for assignment, answer in answers.items():
            name, cell_id = NOTEBOOKS[assignment]
            released = json.loads((exercises / assignment / name).read_text(encoding="utf-8"))
            dest = subs / student / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(json.dumps(handed_in(released, cell_id, answer), indent=1), encoding="utf-8")
    db_url = f"sqlite:///{out / 'gradebook.db'}"
    venv_bin_on_path()  # nbgrader makes a new gradebook with alembic, from this environment
    with Gradebook(db_url) as gb:  # the class list, as `nbgrader db student add` makes it
        for student in [*CLASS, *ON_THE_LIST_ONLY]:
            gb.update_or_create_student(student, first_name=student.capitalize(), last_name="Demo")
    return subs, db_url


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m classroom.demo", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the demo's folder (default: {DEFAULT_OUT})")
    p.add_argument("--workers", type=int, default=None, help="parallel workers (default: the number of cores)")
    a = p.parse_args(argv)
    out = a.out.resolve()
    subs, db_url = write_class(out)
    print(f"demo class: {len(CLASS)} learners handed in {sum(map(len, CLASS.values()))} notebooks "
          f"(in {subs}); {len(ON_THE_LIST_ONLY)} more on the class list handed in nothing", flush=True)
    grading = out / "grading"
    cmd = [sys.executable, "-m", "classroom.grade", str(subs), "--out", str(grading), "--db", db_url,
           "--no-progress"] + (["--workers", str(a.workers)] if a.workers else [])
    print("$ " + " ".join(cmd), flush=True)
    rc = subprocess.run(cmd, cwd=ROOT, env=os.environ).returncode
    if rc != 0:
        print(f"the grader exited with status {rc}: see its messages above", file=sys.stderr)
        return rc
    page = grading / "feedback" / "ben" / "03_gelu" / "gelu.html"
    print("\nOpen in a browser:\n"
          f"  the class view:         {grading / 'report.html'}\n"
          f"  a learner's feedback:   {page}\n"
          f"  every feedback page:    {grading / 'feedback'}/<learner>/<assignment>/\n"
          f"  the same as text/CSV:   {grading / 'report.txt'}, {grading / 'report.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
