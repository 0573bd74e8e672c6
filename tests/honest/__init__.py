"""Honest but unusual notebook habits: learners who do nothing wrong, in ways the
grader must not mistake for tampering, probing or shortcuts.

Each habit is a notebook a learner would hand in: the released notebook with a correct
answer, written or surrounded the way some learners do (magics, IPython display, a
pasted image, helper and test cells, a fix below a graded cell, cells run out of
order, seeds, numpy, classes, type hints, ``typing.TypeVar``, namedtuple, dataclasses,
enum, functools, warnings filters, decorators, unicode names, an old nbformat, a thread
count set in ``os.environ``, ``%config InlineBackend``, ``%%writefile`` notes, a look at
the learner's own names and objects ...).
``tests/test_honest_habits.py`` grades them all through the real grader: every one
must get full points, in the kernel and in the independent check, and no tampering,
probe, shortcut or review line.
"""
from __future__ import annotations

import base64
import copy
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from andrea_ref.grading.manifest import load
from hostile.submissions import GELU  # the correct answer the hostile catalogue starts from

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = {a.name: (a.filename, a.function()[0]) for a in load()}  # the course manifest
MAX = {a.name: float(sum(a.points().values())) for a in load()}

# a first attempt that keeps shape, dtype and device but has the exact (erf) form's values
GELU_ERF = "def gelu(x):\n    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))\n"
LAYER_NORM = textwrap.dedent("""\
    def layer_norm(x, gamma, beta, eps=1e-5):
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return gamma * (x - mean) / torch.sqrt(var + eps) + beta
    """)
MLP = "def mlp(x, w1, b1, w2, b2):\n    return gelu(x @ w1 + b1) @ w2 + b2\n"
BLOCK = textwrap.dedent("""\
    def block(x, params, n_head):
        p = params
        h = x + causal_self_attention(layer_norm(x, p["ln_1.gamma"], p["ln_1.beta"]),
                                      p["attn.w_q"], p["attn.b_q"], p["attn.w_k"], p["attn.b_k"],
                                      p["attn.w_v"], p["attn.b_v"], p["attn.w_o"], p["attn.b_o"], n_head)
        return h + mlp(layer_norm(h, p["ln_2.gamma"], p["ln_2.beta"]), p["mlp.w1"], p["mlp.b1"],
                       p["mlp.w2"], p["mlp.b2"])
    """)
ANSWER = {"02_layernorm": LAYER_NORM, "03_gelu": GELU, "04_mlp": MLP, "01_block": BLOCK}


def _capstone_answers() -> dict:
    """The capstone's three answer cells, written as a learner would (the catalogue's)."""
    from catalogue import capstone
    return {fn: capstone.solution(fn) for fn in capstone.FUNCTIONS}


# a notebook with several answer cells: {answer cell: source}
ANSWER["05_capstone"] = _capstone_answers()
# what a learner pastes into the capstone's cell for their own pieces: exercises 1 to 4
OWN_PIECES = "\n\n".join((LAYER_NORM, GELU, MLP, BLOCK))
# a 1x1 PNG, as a pasted image is stored (a cell attachment)
PIXEL = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360f8cfc0000003010100c9fe92ef0000000049454e44ae426082")).decode()


def released(assignment: str) -> dict:
    return json.loads((ROOT / "exercises" / assignment / NOTEBOOKS[assignment][0]).read_text())


def _code(source: str, count=None) -> dict:
    return {"cell_type": "code", "execution_count": count, "metadata": {}, "outputs": [], "source": source}


def _md(source: str, **extra) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": source, **extra}


def _cell_source(nb: dict, cell_id: str) -> str:
    source = next(c for c in nb["cells"] if c.get("id") == cell_id)["source"]
    return "".join(source) if isinstance(source, list) else source


def _set_cell(nb: dict, cell_id: str, source: str) -> None:
    next(c for c in nb["cells"] if c.get("id") == cell_id)["source"] = source


def _index(nb: dict, grade_id: str) -> int:
    """The cell whose nbgrader grade id is ``grade_id``, else the cell of that id."""
    found = [i for i, c in enumerate(nb["cells"]) if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id]
    return found[0] if found else next(i for i, c in enumerate(nb["cells"]) if c.get("id") == grade_id)


@dataclass
class Habit:
    name: str
    assignment: str
    answer: str | dict | None = None  # the answer cell (default: a correct one); {cell: source} for several
    before: tuple = ()  # cells (source, or a cell dict) put just above the answer cell
    after: tuple = ()  # cells put just below it
    below: dict | None = None  # {grade id: [cells]} put just below that graded cell
    change: Callable[[dict], None] | None = None  # anything else, on the whole notebook

    def notebook(self) -> dict:
        nb = copy.deepcopy(released(self.assignment))
        fn = NOTEBOOKS[self.assignment][1]
        given = ANSWER[self.assignment]
        answers = dict(given) if isinstance(given, dict) else {fn: given}
        if isinstance(self.answer, dict):
            answers.update(self.answer)
        elif self.answer is not None:
            answers[fn] = self.answer
        for cell_id, source in answers.items():
            nb["cells"][_index(nb, cell_id)]["source"] = source
        at = _index(nb, fn)
        cells = lambda xs: [x if isinstance(x, dict) else _code(x) for x in xs]  # noqa: E731
        nb["cells"][at + 1:at + 1] = cells(self.after)
        nb["cells"][at:at] = cells(self.before)
        for gid, extra in (self.below or {}).items():
            i = _index(nb, gid)
            nb["cells"][i + 1:i + 1] = cells(extra)
        for i, cell in enumerate(nb["cells"]):
            if "id" in nb["cells"][0] and "id" not in cell:
                cell["id"] = f"habit-{i}"
        if self.change is not None:
            self.change(nb)
        return nb

    def text(self) -> str:
        return json.dumps(self.notebook(), indent=1, ensure_ascii=False)


def _old_nbformat(nb: dict) -> None:
    nb["nbformat_minor"] = 2
    for cell in nb["cells"]:
        cell.pop("id", None)


def _out_of_order(nb: dict) -> None:
    for count, cell in zip((7, 3, 12, 1, 9, 4, 15, 2, 11, 5, 8, 6, 13, 10, 14),
                           [c for c in nb["cells"] if c["cell_type"] == "code"]):
        cell["execution_count"] = count
        if not cell.get("outputs"):
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": f"run as [{count}]\n"}]


def _pasted_image(nb: dict) -> None:
    nb["cells"].insert(2, _md("My sketch of the curve:\n\n![sketch](attachment:sketch.png)\n",
                              attachments={"sketch.png": {"image/png": PIXEL}}))


F = "import torch.nn.functional as F\n"
HABITS = [
    Habit("default_dtype", "03_gelu", before=["torch.set_default_dtype(torch.float64)\n"]),
    Habit("default_device", "03_gelu", before=["torch.set_default_device('cpu')\n"]),
    Habit("default_dtype_layernorm", "02_layernorm", before=["torch.set_default_dtype(torch.float64)\n"]),
    Habit("pasted_image", "03_gelu", change=_pasted_image),
    Habit("fix_below_first_graded_cell", "03_gelu", answer=GELU_ERF, below={"gelu_shape": [GELU]}),
    Habit("timeit", "03_gelu", after=["%timeit gelu(torch.randn(1000))\n"]),
    Habit("time_cell_magic", "03_gelu", after=["%%time\ny = gelu(torch.linspace(-3, 3, 7))\nprint(y)\n"]),
    Habit("answer_in_time_cell", "03_gelu", answer="%%time\n" + GELU),
    Habit("matplotlib_inline", "03_gelu", after=[
        "%matplotlib inline\nimport matplotlib.pyplot as plt\nxs = torch.linspace(-4, 4, 50)\n"
        "plt.plot(xs, gelu(xs))\nplt.title('my GELU')\nplt.show()\n"]),
    Habit("ipython_display", "03_gelu", after=[
        "from IPython.display import display, Markdown, Math\ndisplay(Markdown('**my GELU** at 1:'))\n"
        "display(Math(r'\\mathrm{GELU}(1) \\approx 0.8412'))\ndisplay(gelu(torch.ones(1)))\n"]),
    Habit("helper_cells", "03_gelu", before=[
        "SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)\nCOEFF = 0.044715\n",
        "def _inner(x):\n    return SQRT_2_OVER_PI * (x + COEFF * x * x * x)\n"],
        answer="def gelu(x):\n    return 0.5 * x * (1.0 + torch.tanh(_inner(x)))\n"),
    Habit("own_test_with_F_gelu", "03_gelu", after=[
        F + "x = torch.linspace(-5, 5, 101)\n"
        "assert torch.allclose(gelu(x), F.gelu(x, approximate='tanh'), atol=1e-6)\nprint('matches F.gelu')\n"]),
    Habit("own_test_with_F_layer_norm", "02_layernorm", after=[
        F + "x, g, b = torch.randn(3, 8), torch.rand(8) + 0.5, torch.randn(8)\n"
        "assert torch.allclose(layer_norm(x, g, b), F.layer_norm(x, (8,), g, b, 1e-5), atol=1e-6)\n"]),
    Habit("own_test_with_nn_LayerNorm_module", "02_layernorm", after=[
        "ref = torch.nn.LayerNorm(8)\nx = torch.randn(2, 8)\n"
        "print(torch.allclose(layer_norm(x, ref.weight, ref.bias), ref(x), atol=1e-6))\n"]),
    Habit("own_test_with_andrea_ref_Block", "01_block", after=[
        "from andrea_ref import Block, ModelConfig\ncfg = ModelConfig(name='t', n_layer=1, n_head=2, d_model=8)\n"
        "ref = Block(cfg)\np = {k: v.detach() for k, v in ref.named_parameters()}\nx = torch.randn(1, 3, 8)\n"
        "with torch.no_grad():\n    print(torch.allclose(block(x, p, 2), ref(x), atol=1e-5))\n"]),
    # the notebook's own diff-trace, called again on the learner's own parameters (so the cell
    # differs from the release and runs in the answer server too)
    Habit("own_diff_trace", "01_block", after=[
        "from andrea_ref import Block, ModelConfig\nfrom andrea_ref.difftrace import diff_trace\n"
        "torch.manual_seed(7)\ncfg = ModelConfig(name='t', n_layer=1, n_head=2, d_model=8)\n"
        "mine = {k: torch.randn_like(v) for k, v in Block(cfg).named_parameters()}\n"
        "print(diff_trace(block, mine, torch.randn(2, 3, 8), n_head=2))\n"]),
    Habit("cells_run_out_of_order", "03_gelu", change=_out_of_order),
    Habit("seeds", "03_gelu", before=[
        "import random\nimport numpy as np\ntorch.manual_seed(0)\nrandom.seed(0)\nnp.random.seed(0)\n"]),
    Habit("numpy_in_tests", "03_gelu", after=[
        "import numpy as np\nxs = np.linspace(-3, 3, 13)\n"
        "ref = 0.5 * xs * (1 + np.tanh(np.sqrt(2 / np.pi) * (xs + 0.044715 * xs ** 3)))\n"
        "print(np.abs(gelu(torch.from_numpy(xs)).numpy() - ref).max())\n"]),
    Habit("printing", "03_gelu",
          answer=GELU.replace("    return", "    print('gelu called on', tuple(x.shape))\n    return"),
          after=["print(gelu(torch.zeros(2)))\n"]),
    Habit("class_module", "03_gelu", after=[
        "class MyGELU(torch.nn.Module):\n    def forward(self, x):\n        return gelu(x)\n\n"
        "    def __repr__(self):\n        return f'{self.__class__.__name__}()'\n\n"
        "print(MyGELU(), MyGELU()(torch.ones(2)))\n"]),
    Habit("function_is_a_class_instance", "03_gelu", answer=textwrap.dedent("""\
        class _Gelu:
            c = math.sqrt(2.0 / math.pi)

            def __call__(self, x):
                return 0.5 * x * (1.0 + torch.tanh(self.c * (x + 0.044715 * x ** 3)))


        gelu = _Gelu()
        """)),
    Habit("type_hints", "03_gelu", answer=GELU.replace("def gelu(x):", "def gelu(x: torch.Tensor) -> torch.Tensor:")),
    Habit("typing_typevar", "03_gelu", answer="import typing\nT = typing.TypeVar('T', bound=torch.Tensor)\n\n\n"
          + GELU.replace("def gelu(x):", "def gelu(x: T) -> T:")),
    Habit("namedtuple_constants", "03_gelu", answer=textwrap.dedent("""\
        import collections
        Consts = collections.namedtuple("Consts", "scale coeff")
        C = Consts(math.sqrt(2.0 / math.pi), 0.044715)


        def gelu(x):
            return 0.5 * x * (1.0 + torch.tanh(C.scale * (x + C.coeff * x ** 3)))
        """)),
    Habit("dataclass_constants", "03_gelu", answer=textwrap.dedent("""\
        import dataclasses


        @dataclasses.dataclass(frozen=True)
        class GeluConstants:
            scale: float = math.sqrt(2.0 / math.pi)
            coeff: float = 0.044715


        K = GeluConstants()


        def gelu(x):
            return 0.5 * x * (1.0 + torch.tanh(K.scale * (x + K.coeff * x ** 3)))
        """)),
    Habit("enum", "03_gelu", before=["import enum\n\n\nclass Form(enum.Enum):\n    TANH = 'tanh'\n    ERF = 'erf'\n"],
          answer="def gelu(x, form=Form.TANH):\n    assert form is Form.TANH\n"
                 "    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))\n"),
    Habit("functools", "03_gelu", answer=textwrap.dedent("""\
        import functools


        @functools.lru_cache(maxsize=None)
        def _scale():
            return math.sqrt(2.0 / math.pi)


        def _gelu(x, coeff):
            return 0.5 * x * (1.0 + torch.tanh(_scale() * (x + coeff * x ** 3)))


        gelu = functools.partial(_gelu, coeff=0.044715)
        """)),
    Habit("warnings_filters", "03_gelu", before=[
        "import warnings\nwarnings.filterwarnings('ignore', category=UserWarning)\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"]),
    Habit("no_grad_decorator", "03_gelu", answer="@torch.no_grad()\n" + GELU),
    Habit("docstring", "03_gelu", answer=GELU.replace(
        "def gelu(x):\n", 'def gelu(x):\n    """GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).\n\n'
        '    Not F.gelu: built from torch.tanh, as the notebook asks.\n    """\n')),
    Habit("unicode_names", "03_gelu", answer=textwrap.dedent("""\
        α = math.sqrt(2.0 / math.pi)
        β = 0.044715


        def gelu(x):
            z = α * (x + β * x ** 3)
            return 0.5 * x * (1.0 + torch.tanh(z))
        """)),
    Habit("future_annotations", "03_gelu", answer="from __future__ import annotations\n\n"
          + GELU.replace("def gelu(x):", "def gelu(x: torch.Tensor) -> torch.Tensor:")),
    Habit("old_nbformat_minor", "03_gelu", change=_old_nbformat),
    Habit("defined_twice", "03_gelu", answer="def gelu(x):\n    return x  # first try\n\n\n" + GELU),
    Habit("defined_twice_across_cells", "03_gelu", answer="def gelu(x):\n    return torch.relu(x)\n",
          after=[GELU]),
    Habit("asserts", "03_gelu",
          answer=GELU.replace("def gelu(x):\n", "def gelu(x):\n    assert isinstance(x, torch.Tensor)\n"),
          after=["y = gelu(torch.tensor([0.0, 1.0]))\nassert y.shape == (2,)\n"
                 "assert abs(float(y[1]) - 0.8412) < 1e-3\n"]),
    Habit("perf_counter_timing", "03_gelu", after=[
        "import time\nt0 = time.perf_counter()\nfor _ in range(10):\n    gelu(torch.randn(10000))\n"
        "print(f'{(time.perf_counter() - t0) / 10 * 1e3:.3f} ms per call')\n"]),
    Habit("own_calls_of_the_checks", "03_gelu",
          after=["grading.check_gelu_values(gelu)\n", "grading.report_gelu(gelu)\n"]),
    Habit("autoreload", "03_gelu", before=["%load_ext autoreload\n%autoreload 2\n"]),
    Habit("help_and_traceback_habits", "03_gelu", after=[
        "gelu?\n", "import traceback\ntry:\n    gelu('not a tensor')\nexcept Exception:\n    traceback.print_exc()\n"]),
    Habit("deterministic_flags", "03_gelu", before=[
        "torch.backends.cudnn.deterministic = True\ntorch.use_deterministic_algorithms(True)\n"
        "torch.set_printoptions(precision=6)\n"]),
    Habit("capture_and_environment", "03_gelu", before=[
        "%%capture log\nimport sys\nprint(sys.version, sys.platform, torch.__version__)\n",
        "torch.set_num_threads(1)\nprint(torch.get_num_threads())\n"],
          after=["from IPython.display import HTML, display\ndisplay(HTML('<b>done</b>'))\nprint(log.stdout[:20])\n"]),
    Habit("inference_mode", "03_gelu", answer="@torch.inference_mode()\n" + GELU),
    Habit("mlp_with_F_linear", "04_mlp", answer=F + "def mlp(x, w1, b1, w2, b2):\n"
          "    return F.linear(gelu(F.linear(x, w1.T, b1)), w2.T, b2)\n"),
    Habit("mlp_helpers_and_lambda", "04_mlp", answer="affine = lambda t, w, b: t @ w + b\n\n\n"
          "def mlp(x, w1, b1, w2, b2):\n    return affine(gelu(affine(x, w1, b1)), w2, b2)\n"),
    # habits once held for review (book/guide_threat_model.md says why they are harmless)
    Habit("thread_count_environment", "03_gelu", before=[
        "import os\nos.environ['OMP_NUM_THREADS'] = '1'\nos.environ.setdefault('MKL_NUM_THREADS', '1')\n"]),
    Habit("retina_figures_and_notes", "03_gelu", before=["%config InlineBackend.figure_format = 'retina'\n"],
          after=["%%writefile notes.txt\nGELU, tanh form: checked against F.gelu in my own test.\n"]),
    Habit("own_names", "03_gelu", after=["print('gelu' in globals(), gelu.__module__, gelu.__name__)\n"]),
    # the capstone: its own invitations and the habits of a longer notebook
    Habit("capstone_own_pieces", "05_capstone", change=lambda nb: _set_cell(nb, "pieces", OWN_PIECES)),
    Habit("capstone_demo_changed", "05_capstone", change=lambda nb: _set_cell(
        nb, "at_work", _cell_source(nb, "at_work").replace("steps, temperature = 300, 0.8",
                                                           "steps, temperature = 60, 0.5"))),
    Habit("capstone_torch_optim_and_a_plot", "05_capstone", answer={"train": (
        "def train(forward, params, batches, lr, n_head):\n"
        "    opt = torch.optim.SGD([p.requires_grad_() for p in params.values()], lr=lr)\n"
        "    losses = []\n"
        "    for batch in batches:\n"
        "        opt.zero_grad()\n"
        "        logits = forward(batch[:, :-1], params, n_head)\n"
        "        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())\n"
        "        loss.backward()\n"
        "        opt.step()\n"
        "        losses.append(loss.item())\n"
        "    return torch.tensor(losses)\n")},
        below={"train_check": ["import matplotlib.pyplot as plt\nplt.plot(losses)\nplt.ylabel('loss')\nplt.show()\n"]}),
    Habit("capstone_sampler_fixed_below", "05_capstone",
          answer={"sample_next": "def sample_next(logits, temperature, seed):\n    return logits.argmax(dim=-1)\n"},
          below={"sample_check": [ANSWER["05_capstone"]["sample_next"]]}),
    Habit("own_object_dict", "03_gelu", after=[
        "class Settings:\n    def __init__(self):\n        self.coeff = 0.044715\n\n\n"
        "s = Settings()\nprint(s.__dict__, getattr(s, '__dict__'))\n"]),
]
