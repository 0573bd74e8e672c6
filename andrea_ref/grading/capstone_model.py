"""The checks of ``andrea_tiny(token_ids, params, n_head)``, the capstone's model (see
:mod:`.capstone`): its inputs, random parameters of an ``AndreaModel``
(:func:`model_params` and :func:`random_ids`, which the training checks draw theirs
with too), and the classic assembly mistakes a wrong answer is compared with."""
from __future__ import annotations

import math
import re

import torch

from ..block import block as _block
from ..layernorm import layer_norm as _ln
from ..model import config_from_params, forward_from_params
from . import core as C, compare, inputs, messages, runner, watch
from .block import make_params as _block_params
from .capstone_rules import ADVICE, FORBIDDEN, TINY
from .messages import _

# (vocab, d_model, n_head, n_layer, mlp_dim, context, batch, seq_len): non-square, a seq_len
# shorter than the context and one equal to it, one to three blocks; no more token ids than
# positions, so that position embeddings looked up by token id give wrong values, not an error
_TINY_CASES = ((11, 8, 2, 2, 20, 11, 2, 7), (6, 12, 3, 3, 24, 6, 1, 6), (10, 8, 4, 1, 32, 10, 3, 4))


def model_params(g, vocab, d, n_layer, mlp_dim, context):
    """Random parameters of an ``AndreaModel`` (float64, CPU), none of them trivial."""
    p = {"token_embed": inputs.normal(g, (vocab, d), 0.7), "position_embed": inputs.normal(g, (context, d), 0.7)}
    for i in range(n_layer):
        p.update({f"blocks.{i}.{k}": v for k, v in _block_params(g, d, mlp_dim).items()})
    p["ln_f.gamma"] = inputs.uniform(g, (d,), 0.5, 1.5)
    p["ln_f.beta"] = inputs.normal(g, (d,), 0.3)
    return p


def random_ids(g, vocab, shape):
    return torch.randint(0, vocab, tuple(shape), generator=g, device="cpu")


def _tiny_inputs(seed):
    """(dtype, token_ids, params, n_head) for every case, float64 then float32."""
    g = inputs.generator(seed + 11)
    for vocab, d, n_head, n_layer, mlp_dim, context, batch, seq in _TINY_CASES:
        p = model_params(g, vocab, d, n_layer, mlp_dim, context)
        ids = random_ids(g, vocab, (batch, seq))
        for dtype in (torch.float64, torch.float32):
            yield dtype, ids, {k: v.to(dtype) for k, v in p.items()}, n_head


def _tiny_hint(error, where, args):
    """A diagnosis of an exception of andrea_tiny, named only from clear evidence."""
    text = str(error)
    params = args[1] if len(args) > 1 and isinstance(args[1], dict) else {}
    if isinstance(error, KeyError):
        key = str(error.args[0]) if error.args else ""
        if key.startswith("blocks.") and key not in params:
            return _("a block that params does not have is looked up ({key}): the number of blocks is read "
                     "from params (count the names that start with blocks.<i>.), never written into the "
                     "code.").format(key=key)
    shapes = re.search(r"mat1 and mat2 shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)", text)
    embed = params.get("token_embed")
    if shapes and isinstance(embed, torch.Tensor) and embed.dim() == 2 \
            and (int(shapes.group(3)), int(shapes.group(4))) == tuple(embed.shape) != tuple(embed.shape[::-1]):
        return _("the logits are x @ token_embed.T: the unembedding is the token embedding, transposed "
                 "([d_model, vocab]).")
    return None


def _tiny_variants(ids, p, n_head):
    """(likely mistake, its logits) of the classic assembly mistakes, in float64."""
    p = {k: compare.f64(v) for k, v in p.items()}
    cfg = config_from_params(p, n_head)
    seq, n = ids.shape[1], cfg.n_layer
    tok, pos = p["token_embed"][ids], p["position_embed"][:seq]

    def run(x, order, final=True, again=False):
        for i in order:
            prefix = f"blocks.{i}."
            y = _block(x, {k[len(prefix):]: v for k, v in p.items() if k.startswith(prefix)}, cfg)
            x = x + y if again else y
        if final:
            x = _ln(x, p["ln_f.gamma"], p["ln_f.beta"])
        return x @ p["token_embed"].T

    right = lambda: run(tok + pos, range(n))  # noqa: E731
    out = [
        (_("the position embeddings are missing: the input of the first block is "
           "token_embed[token_ids] + position_embed[:seq_len]."), lambda: run(tok, range(n))),
        (_("the final LayerNorm (ln_f) is missing: it comes after the last block, before the "
           "unembedding."), lambda: run(tok + pos, range(n), final=False)),
        (_("x is added again around each block: a block already holds both residual connections, "
           "so the stack is x = block(x)."), lambda: run(tok + pos, range(n), again=True)),
        (_("the embeddings are multiplied by sqrt(d_model), as in the 2017 Transformer; ANDREA adds "
           "the token and position embeddings as they are."),
         lambda: run(tok * math.sqrt(cfg.d_model) + pos, range(n))),
        (_("softmax is applied to the output: the model returns logits (the loss and the sampler "
           "apply softmax themselves)."), lambda: torch.softmax(right(), dim=-1)),
        (_("log_softmax is applied to the output: the model returns logits (the loss and the sampler "
           "apply softmax themselves)."), lambda: torch.log_softmax(right(), dim=-1)),
    ]
    if int(ids.max()) < cfg.context_length:
        out.append((_("the position embeddings are looked up with the token ids: they are "
                      "position_embed[0 .. seq_len - 1], one per position."),
                    lambda: run(tok + p["position_embed"][ids], range(n))))
    if n > 1:
        out += [
            (_("the blocks run in reverse order: blocks.0 comes first."), lambda: run(tok + pos, reversed(range(n)))),
            (_("every layer uses the parameters of blocks.0: layer i uses those named blocks.<i>."),
             lambda: run(tok + pos, [0] * n)),
        ]
        out += [(_("only the first {k} of the {n} blocks run: the number of blocks is read from params "
                   "(count the names that start with blocks.<i>.), never written into the code.").format(k=k, n=n),
                 lambda k=k: run(tok + pos, range(k))) for k in range(1, n)]
    return out


def _tiny_where(dtype, ids, params):
    n = config_from_params(params, 1).n_layer
    return _("{blocks} block(s), token ids of shape {shape}, {dtype}").format(
        blocks=n, shape=tuple(ids.shape), dtype=dtype)


@watch.governed(FORBIDDEN)
@runner.graded
def check_tiny_shape(fn, seed=0):
    """andrea_tiny returns a new [batch, seq_len, vocab] tensor in the parameters' dtype, inputs unchanged."""
    cases = list(_tiny_inputs(seed))
    for dtype, ids, params, n_head in cases:
        out = C.call(fn, inputs.copy_args((ids, params, n_head)), name=TINY, forbidden=FORBIDDEN, hint=_tiny_hint)
        shape = (*ids.shape, params["token_embed"].shape[0])
        compare.check_result(out, name=TINY, shape=shape, dtype=dtype, device=ids.device)
    _dtype, ids, params, n_head = cases[0]
    inputs.check_new_result(fn, inputs.copy_args((ids, params, n_head)),
                            inputs.copy_args((ids.flip(1), params, n_head)),
                            name=TINY, forbidden=FORBIDDEN, hint=_tiny_hint)
    inputs.inputs_left_alone(fn, ((ids, params, n_head) for _d, ids, params, n_head in cases), name=TINY,
                             labels=("token_ids", "params", "n_head"), advice=_(ADVICE), hint=_tiny_hint)


@watch.governed(FORBIDDEN)
@runner.graded
def check_tiny_values(fn, seed=0):
    """andrea_tiny gives the reference model's logits with the same weights: embeddings, every block in order, ln_f, tied unembedding."""
    for dtype, ids, params, n_head in _tiny_inputs(seed):
        out = C.call(fn, inputs.copy_args((ids, params, n_head)), name=TINY, forbidden=FORBIDDEN, hint=_tiny_hint)
        out = compare.values_result(out, name=TINY, shape=(*ids.shape, params["token_embed"].shape[0]))
        want = forward_from_params(ids, {k: compare.f64(v) for k, v in params.items()}, n_head)
        tol = compare.tol_for(dtype, result=out)
        if compare.close(out, want, tol):
            continue
        near = (max(tol[0], 1e-6), max(tol[1], 1e-6))
        messages.fail(_("`{name}` does not give the reference model's logits for the same weights.").format(name=TINY),
                      _("{where}: {mismatch}.").format(where=_tiny_where(dtype, ids, params),
                                                       mismatch=compare.mismatch(out, want, tol)),
                      compare.diagnose(out, _tiny_variants(ids, params, n_head), near, None))
