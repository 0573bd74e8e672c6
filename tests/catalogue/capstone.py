"""Capstone answers (05_capstone): ``andrea_tiny(token_ids, params, n_head)``,
``train(forward, params, batches, lr, n_head)`` and ``sample_next(logits, temperature, seed)``.

An entry replaces the source of one answer cell (``cell``); the notebook's other two
answer cells hold the instructor's solution, so an entry is judged on the cells of the
function it changes. ``SHORTCUTS`` (forbidden implementations) are graded by the real
grader in tests/test_grading_capstone.py, where the rules are decided on the source.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from . import Entry

NB = "05_capstone"
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "solutions" / NB / "capstone.ipynb"
RELEASE = ROOT / "exercises" / NB / "capstone.ipynb"
FUNCTIONS = ("andrea_tiny", "train", "sample_next")  # each its answer cell's id
# the graded cells of each function, in the notebook's order
CELLS = {"andrea_tiny": ("tiny_shape", "tiny_values"),
         "train": ("train_loss", "train_update", "train_learns"),
         "sample_next": ("sample_greedy", "sample_distribution", "sample_seed")}


def _cells(path: Path) -> dict[str, str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return {c["id"]: "".join(c["source"]) for c in nb["cells"]}


def solution(function: str) -> str:
    """The instructor's answer cell of ``function``, without nbgrader's markers."""
    return re.sub(r" *### (BEGIN|END) SOLUTION\n?", "", _cells(NOTEBOOK)[function])


def setup_source() -> str:
    return _cells(RELEASE)["setup"]


def Answer(name, function, source, lost=frozenset(), likely=None, note="", **_kw):  # noqa: N802
    """One capstone entry: ``source`` replaces the answer cell ``function``."""
    return Entry(NB, name, source, frozenset(lost), likely, note=note, cell=function)


def _edit(function: str, old: str, new: str) -> str:
    src = solution(function)
    assert old in src, (function, old)
    return src.replace(old, new)


TINY_TOKENS = '    x = params["token_embed"][token_ids] + params["position_embed"][:seq_len]\n'
TINY_LOOP = "        x = block(x, block_params, n_head)\n"
TINY_LAYERS = '    n_layer = len({name.split(".")[1] for name in params if name.startswith("blocks.")})\n'
TINY_FINAL = '    x = layer_norm(x, params["ln_f.gamma"], params["ln_f.beta"])\n'
TINY_OUT = '    return x @ params["token_embed"].T\n'
TRAIN_STEP = "                p -= lr * p.grad\n"
TRAIN_CLEAR = "                p.grad = None\n"
TRAIN_LOSS = "        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))\n"
SAMPLE_PROBS = "    probs = torch.softmax(logits / temperature, dim=-1)\n"
SAMPLE_DRAW = "    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)\n"

TRAIN_ALL = frozenset(CELLS["train"])
MISTAKES = [
    # ------------------------------------------------------------------ andrea_tiny
    Answer("tiny_no_position", "andrea_tiny", _edit("andrea_tiny", TINY_TOKENS,
           '    x = params["token_embed"][token_ids]\n'), frozenset({"tiny_values"}), "position embeddings are missing"),
    Answer("tiny_position_by_token", "andrea_tiny", _edit("andrea_tiny", TINY_TOKENS,
           '    x = params["token_embed"][token_ids] + params["position_embed"][token_ids]\n'),
           frozenset({"tiny_values"}), "looked up with the token ids"),
    Answer("tiny_no_final_norm", "andrea_tiny", _edit("andrea_tiny", TINY_FINAL, ""),
           frozenset({"tiny_values"}), "final LayerNorm (ln_f) is missing"),
    Answer("tiny_residual_again", "andrea_tiny", _edit("andrea_tiny", TINY_LOOP,
           "        x = x + block(x, block_params, n_head)\n"), frozenset({"tiny_values"}), "added again around each block"),
    Answer("tiny_scaled_embedding", "andrea_tiny", _edit("andrea_tiny", TINY_TOKENS,
           '    x = params["token_embed"][token_ids] * params["token_embed"].shape[1] ** 0.5'
           ' + params["position_embed"][:seq_len]\n'), frozenset({"tiny_values"}), "sqrt(d_model)"),
    Answer("tiny_softmax", "andrea_tiny", _edit("andrea_tiny", TINY_OUT,
           '    return torch.softmax(x @ params["token_embed"].T, dim=-1)\n'), frozenset({"tiny_values"}),
           "softmax is applied"),
    Answer("tiny_log_softmax", "andrea_tiny", _edit("andrea_tiny", TINY_OUT,
           '    return torch.log_softmax(x @ params["token_embed"].T, dim=-1)\n'), frozenset({"tiny_values"}),
           "log_softmax is applied"),
    Answer("tiny_reversed", "andrea_tiny", _edit("andrea_tiny", "    for i in range(n_layer):\n",
           "    for i in reversed(range(n_layer)):\n"), frozenset({"tiny_values"}), "reverse order"),
    Answer("tiny_first_block_only", "andrea_tiny", _edit("andrea_tiny", TINY_LAYERS, "    n_layer = 1\n"),
           frozenset({"tiny_values"}), "only the first 1 of the 2 blocks"),
    Answer("tiny_blocks_0_everywhere", "andrea_tiny", _edit("andrea_tiny", '        prefix = f"blocks.{i}."\n',
           '        prefix = "blocks.0."\n'), frozenset({"tiny_values"}), "parameters of blocks.0"),
    Answer("tiny_untransposed", "andrea_tiny", _edit("andrea_tiny", TINY_OUT,
           '    return x @ params["token_embed"]\n'), frozenset(CELLS["andrea_tiny"]), "token_embed.T",
           note="it raises on every input, so no property of the function holds"),
    Answer("tiny_float32", "andrea_tiny", _edit("andrea_tiny", TINY_OUT,
           '    return (x @ params["token_embed"].T).float()\n'), frozenset({"tiny_shape"}), "must keep the input's dtype",
           note="the dtype is the shape check's alone; the values are compared with float32's rounding"),
    Answer("tiny_in_place", "andrea_tiny", _edit("andrea_tiny", TINY_TOKENS,
           '    params["position_embed"] = params["position_embed"][:seq_len]\n'
           '    x = params["token_embed"][token_ids] + params["position_embed"]\n'), frozenset({"tiny_shape"}),
           "changed its argument `params['position_embed']` in place",
           note="params changed (an entry replaced by a slice of it) is the shape check's alone"),
    # ------------------------------------------------------------------ train
    Answer("train_no_clear", "train", _edit("train", TRAIN_CLEAR, ""),
           frozenset({"train_update", "train_learns"}), "gradients add up",
           note="the summed gradients make 150 steps diverge: the model does not learn either"),
    Answer("train_uphill", "train", _edit("train", TRAIN_STEP, "                p += lr * p.grad\n"),
           frozenset({"train_update", "train_learns"}), "goes uphill"),
    Answer("train_fixed_lr", "train", _edit("train", TRAIN_STEP, "                p -= 0.01 * p.grad\n"),
           frozenset({"train_update", "train_learns"}), "times the gradient, not lr",
           note="lr 0.01 instead of 0.3: 150 steps are too few to learn"),
    Answer("train_not_shifted", "train", _edit("train", TRAIN_LOSS,
           "        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, :-1].reshape(-1))\n"),
           TRAIN_ALL, "scored against its own token",
           note="a model trained to repeat its input neither steps as gradient descent on the loss nor learns "
                "to predict"),
    Answer("train_summed", "train", _edit("train", TRAIN_LOSS,
           "        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), "
           "reduction=\"sum\")\n"), TRAIN_ALL, "summed over the positions",
           note="the summed loss's gradient is B x T times the mean's: the steps blow up"),
    Answer("train_last_position", "train", _edit("train", TRAIN_LOSS,
           "        loss = F.cross_entropy(logits[:, -1], batch[:, -1])\n"), TRAIN_ALL,
           "only the last position",
           note="scored on one position in 32, 150 steps are too few to learn"),
    Answer("train_no_update", "train", _edit("train", TRAIN_STEP, "                pass\n"),
           frozenset({"train_update", "train_learns"}), "params did not change"),
    Answer("train_adam", "train", """
def train(forward, params, batches, lr, n_head):
    for p in params.values():
        p.requires_grad_(True)
    opt = torch.optim.Adam(params.values(), lr=lr)
    losses = []
    for batch in batches:
        logits = forward(batch[:, :-1], params, n_head)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    for p in params.values():
        p.requires_grad_(False)
    return torch.tensor(losses)
""", frozenset({"train_update", "train_learns"}), "Adam",
           note="Adam at lr 0.3 diverges; the notebook asks for plain gradient descent"),
    Answer("train_embeddings_frozen", "train", _edit("train", "            for p in params.values():\n                p -= lr",
           "            for name, p in params.items():\n                if 'embed' in name:\n                    continue\n"
           "                p -= lr"), frozenset({"train_update", "train_learns"}), "never change",
           note="with its embeddings at their random start the model does not learn"),
    Answer("train_returns_list", "train", _edit("train", "    return torch.tensor(losses)\n", "    return losses\n"),
           frozenset({"train_loss"}), "must return a torch.Tensor, got list",
           note="the losses are the loss check's alone"),
    # ------------------------------------------------------------------ sample_next
    Answer("sample_times_t", "sample_next", _edit("sample_next", SAMPLE_PROBS,
           "    probs = torch.softmax(logits * temperature, dim=-1)\n"), frozenset({"sample_distribution"}),
           "multiplied by the temperature"),
    Answer("sample_no_temperature", "sample_next", _edit("sample_next", SAMPLE_PROBS,
           "    probs = torch.softmax(logits, dim=-1)\n"), frozenset({"sample_distribution"}),
           "temperature is not used"),
    Answer("sample_argmax_always", "sample_next", """
def sample_next(logits, temperature, seed):
    return logits.argmax(dim=-1)
""", frozenset({"sample_distribution"}), "the argmax is taken",
           note="a sampler that draws nothing is not judged on its seed"),
    Answer("sample_global_rng", "sample_next", _edit("sample_next", SAMPLE_DRAW,
           "    return torch.multinomial(probs, 1).squeeze(-1)\n"), frozenset({"sample_seed"}), "seed is not used"),
    Answer("sample_fixed_seed", "sample_next", _edit("sample_next",
           "    generator = torch.Generator().manual_seed(seed)\n", "    generator = torch.Generator().manual_seed(0)\n"),
           frozenset({"sample_seed"}), "does not depend on the seed"),
    Answer("sample_argmin", "sample_next", _edit("sample_next", "        return logits.argmax(dim=-1)\n",
           "        return logits.argmin(dim=-1)\n"), frozenset({"sample_greedy"}), "argmin"),
    Answer("sample_last_of_ties", "sample_next", _edit("sample_next", "        return logits.argmax(dim=-1)\n",
           "        return logits.shape[-1] - 1 - logits.flip(-1).argmax(dim=-1)\n"),
           frozenset({"sample_greedy"}), "the last is taken"),
    Answer("sample_keepdim", "sample_next", _edit("sample_next", SAMPLE_DRAW,
           "    return torch.multinomial(probs, 1, generator=generator)\n"), frozenset({"sample_greedy"}),
           "returned shape (64, 1); expected (64,)",
           note="the [rows, 1] shape is the greedy check's alone: it judges the type"),
    Answer("sample_in_place", "sample_next", _edit("sample_next", SAMPLE_PROBS,
           "    logits /= temperature\n    probs = torch.softmax(logits, dim=-1)\n"), frozenset({"sample_greedy"}),
           "changed its argument `logits` in place", note="logits changed in place is the greedy check's alone"),
]

CORRECT = [
    Answer("tiny_loop_over_sorted_names", "andrea_tiny", """
def andrea_tiny(token_ids, params, n_head):
    T = token_ids.size(1)
    h = params["token_embed"][token_ids] + params["position_embed"][:T]
    layers = sorted({int(k.split(".")[1]) for k in params if k.startswith("blocks.")})
    for i in layers:
        sub = {k.removeprefix(f"blocks.{i}."): v for k, v in params.items() if k.startswith(f"blocks.{i}.")}
        h = block(h, sub, n_head)
    h = layer_norm(h, params["ln_f.gamma"], params["ln_f.beta"], eps=1e-5)
    return torch.einsum("btd,vd->btv", h, params["token_embed"])
"""),
    Answer("tiny_embedding_function", "andrea_tiny", """
def andrea_tiny(token_ids, params, n_head):
    positions = torch.arange(token_ids.shape[1])
    x = F.embedding(token_ids, params["token_embed"]) + F.embedding(positions, params["position_embed"])
    i = 0
    while f"blocks.{i}.ln_1.gamma" in params:
        x = block(x, {k[len(f"blocks.{i}."):]: v for k, v in params.items() if k.startswith(f"blocks.{i}.")}, n_head)
        i += 1
    x = layer_norm(x, params["ln_f.gamma"], params["ln_f.beta"])
    return F.linear(x, params["token_embed"])
"""),
    Answer("train_parameters_wrapped", "train", """
def train(forward, params, batches, lr, n_head):
    for name in params:
        params[name] = torch.nn.Parameter(params[name])
    losses = torch.empty(len(batches))
    for step, window in enumerate(batches):
        inputs, targets = window[:, :-1], window[:, 1:]
        logits = forward(inputs, params, n_head)
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        grads = torch.autograd.grad(loss, list(params.values()))
        with torch.no_grad():
            for p, g in zip(params.values(), grads):
                p.sub_(lr * g)
        losses[step] = loss.detach()
    return losses
"""),
    Answer("train_torch_sgd", "train", """
def train(forward, params, batches, lr, n_head):
    tensors = list(params.values())
    for t in tensors:
        t.requires_grad_()
    opt = torch.optim.SGD(tensors, lr=lr)
    out = []
    for batch in batches:
        opt.zero_grad()
        logits = forward(batch[:, :-1], params, n_head)
        loss = F.cross_entropy(logits.transpose(1, 2), batch[:, 1:])
        loss.backward()
        opt.step()
        out.append(float(loss))
    return torch.tensor(out, dtype=torch.float64)
"""),
    Answer("train_new_tensors_in_dict", "train", """
def train(forward, params, batches, lr, n_head):
    losses = []
    for batch in batches:
        leaves = {k: v.detach().requires_grad_(True) for k, v in params.items()}
        logits = forward(batch[:, :-1], leaves, n_head)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), batch[:, 1:].reshape(-1))
        loss.backward()
        for k, v in leaves.items():
            params[k] = (v - lr * v.grad).detach()
        losses.append(loss.item())
    return torch.tensor(losses)
"""),
    Answer("sample_categorical", "sample_next", """
def sample_next(logits, temperature, seed):
    if temperature == 0:
        return torch.argmax(logits, dim=-1)
    gen = torch.Generator()
    gen.manual_seed(seed)
    scaled = logits / temperature
    scaled = scaled - scaled.max(dim=-1, keepdim=True).values
    probs = scaled.exp() / scaled.exp().sum(dim=-1, keepdim=True)
    return torch.multinomial(probs, num_samples=1, generator=gen)[:, 0]
"""),
    Answer("sample_inverse_cdf", "sample_next", """
def sample_next(logits, temperature, seed):
    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.double() / temperature, dim=-1)
    u = torch.rand(probs.shape[0], 1, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    index = (probs.cumsum(-1) < u).sum(-1)
    return index.clamp(max=probs.shape[-1] - 1).long()
"""),
    Answer("sample_manual_seed", "sample_next", """
def sample_next(logits, temperature, seed):
    if temperature == 0:
        return logits.argmax(dim=-1)
    torch.manual_seed(seed)
    return torch.distributions.Categorical(logits=logits / temperature).sample()
"""),
]

CORRECT += [
    Answer("tiny_float64_inside", "andrea_tiny", """
def andrea_tiny(token_ids, params, n_head):
    p = {k: v.double() for k, v in params.items()}
    x = p["token_embed"][token_ids] + p["position_embed"][: token_ids.shape[1]]
    for i in range(sum(1 for k in p if k.startswith("blocks.") and k.endswith(".ln_1.gamma"))):
        x = block(x, {k.split(".", 2)[2]: v for k, v in p.items() if k.startswith(f"blocks.{i}.")}, n_head)
    x = F.layer_norm(x, (x.shape[-1],), p["ln_f.gamma"], p["ln_f.beta"], 1e-5)
    return (x @ p["token_embed"].T).to(params["token_embed"].dtype)
"""),
    Answer("train_grad_tuple", "train", """
def train(forward, params, batches, lr, n_head):
    names = list(params)
    history = []
    for batch in batches:
        leaves = [params[n].detach().requires_grad_() for n in names]
        logits = forward(batch[:, :-1], dict(zip(names, leaves)), n_head)
        loss = torch.nn.functional.cross_entropy(logits.permute(0, 2, 1), batch[:, 1:])
        grads = torch.autograd.grad(loss, leaves)
        with torch.no_grad():
            for n, g in zip(names, grads):
                params[n].sub_(g, alpha=lr)
        history.append(loss.detach())
    return torch.stack(history)
"""),
    Answer("sample_gumbel_max", "sample_next", """
def sample_next(logits, temperature, seed):
    if temperature == 0:
        return logits.argmax(dim=-1)
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(logits.shape, generator=g, dtype=torch.float64).clamp_(min=1e-300)
    gumbel = -torch.log(-torch.log(u))
    return (logits.double() / temperature + gumbel).argmax(dim=-1)
"""),
]

SHORTCUTS = [
    Answer("tiny_reference_model", "andrea_tiny", """
from andrea_ref.model import model_forward, config_from_params

def andrea_tiny(token_ids, params, n_head):
    return model_forward(token_ids, params, config_from_params(params, n_head))
""", frozenset(CELLS["andrea_tiny"]), shortcut=True),
    Answer("tiny_module_alias", "andrea_tiny", """
import andrea_ref as _ar
_m = _ar.model

def andrea_tiny(token_ids, params, n_head):
    return _m.forward_from_params(token_ids, params, n_head)
""", frozenset(CELLS["andrea_tiny"]), shortcut=True),
    Answer("train_checks_own_reference", "train", """
from andrea_ref.grading import capstone as _checks

def train(forward, params, batches, lr, n_head):
    losses = torch.tensor([float(_checks.cross_entropy(forward, params, b, n_head)) for b in batches[:1]] * len(batches))
    trained = _checks.reference_steps(params, batches, lr, n_head)
    with torch.no_grad():
        for k in params:
            params[k].copy_(trained[k])
    return losses
""", TRAIN_ALL, shortcut=True, note="the checks' own reference helpers are forbidden everywhere"),
    Answer("sample_reference", "sample_next", """
from andrea_ref.sampling import sample_next as _reference

def sample_next(logits, temperature, seed):
    return _reference(logits, temperature, torch.Generator().manual_seed(seed))
""", frozenset(CELLS["sample_next"]), shortcut=True),
]
