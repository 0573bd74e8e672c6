"""Following one token through a block, with every intermediate vector named.

========================  ====================================================
``toy_config``            d_model 4, one head, one block: small enough for a calculator
``toy_block``             that block, built from :class:`Block`, with round weights
``toy_input``             the three input vectors the toy block is traced on
``trace_block``           every intermediate of one position through one block
``trace_model``           the same through block 1 of a whole model, then its logits
``format_vector``         a vector as a short line of fixed-width numbers
========================  ====================================================

Nothing here recomputes the block on its own: the vectors come from
:meth:`Block.forward_with_intermediates`, the code the model runs. Only the pieces
that call does not hand out (queries, keys, values, attention scores and weights)
are computed here, and :func:`trace_block` checks that they rebuild the block's own
attention output before it returns them.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .block import Block
from .config import ModelConfig
from .layernorm import layer_norm
from .model import AndreaModel

__all__ = ["TOY_STEPS", "toy_config", "toy_block", "toy_input", "trace_block", "trace_model",
           "format_vector"]

# The order in which a token meets the pieces of a pre-norm block.
TOY_STEPS = ("input", "ln_1", "q", "attn", "resid_1", "ln_2", "mlp_hidden", "mlp_act", "mlp", "resid_2")


def toy_config() -> ModelConfig:
    """A one-block, one-head configuration with ``d_model = 4`` (so ``mlp_dim = 16``)."""
    return ModelConfig(name="toy", n_layer=1, n_head=1, d_model=4, vocab_size=3, context_length=3)


def toy_block() -> Block:
    """A :class:`Block` of :func:`toy_config` whose weights are 0, +-0.5 or +-1.

    LayerNorm gains are 1 and every bias 0 (as at initialisation), so each step can
    be redone by hand:

    * ``W_q = W_k = I``: a query and a key are the normalised vectors themselves;
    * ``W_v`` swaps features 3 and 4, ``W_o = 0.5 I``;
    * ``W_1 = [I, -I, 0.5 I, -0.5 I]`` (``[4, 16]``): the hidden vector is the
      normalised input, its negative, and both halved, so GELU is seen at
      positive, negative and small arguments;
    * ``W_2`` sums the four groups back with weights 1, -1, 0.5, 0 (``[16, 4]``).
    """
    blk = Block(toy_config())
    eye = torch.eye(4)
    v = eye[:, [0, 1, 3, 2]]
    w1 = torch.cat([eye, -eye, 0.5 * eye, -0.5 * eye], dim=1)
    w2 = torch.cat([eye, -eye, 0.5 * eye, 0.0 * eye], dim=0)
    with torch.no_grad():
        for p in blk.parameters():
            p.zero_()
        for ln in (blk.ln_1, blk.ln_2):
            ln.gamma.fill_(1.0)
        blk.attn.w_q.copy_(eye)
        blk.attn.w_k.copy_(eye)
        blk.attn.w_v.copy_(v)
        blk.attn.w_o.copy_(0.5 * eye)
        blk.mlp.w1.copy_(w1)
        blk.mlp.w2.copy_(w2)
    return blk


def toy_input() -> torch.Tensor:
    """Three positions of width 4, shape ``[1, 3, 4]``; each row has a round mean and variance."""
    return torch.tensor([[[2.0, 0.0, 2.0, 0.0],
                          [1.0, 1.0, -1.0, -1.0],
                          [3.0, -1.0, 1.0, 1.0]]])


@torch.no_grad()
def trace_block(blk: Block, x: torch.Tensor, position: int) -> dict[str, torch.Tensor]:
    """Every intermediate of the token at ``position`` (0-based) through ``blk``.

    ``x`` is ``[1, T, d_model]``. The returned vectors are the traced token's rows of
    :meth:`Block.forward_with_intermediates` (``input``, ``ln_1``, ``attn``,
    ``resid_1``, ``ln_2``, ``mlp_hidden``, ``mlp_act``, ``mlp``, ``resid_2``), plus
    ``q`` (its query), ``k`` and ``v`` (keys and values of positions 0..position,
    ``[position + 1, d_model]``), ``scores`` and ``weights`` (``[n_head, position + 1]``:
    scaled scores and softmax weights over those positions) and ``out`` (the whole
    output tensor of the block). Raises ``RuntimeError`` if the weights and values
    do not rebuild the block's attention output.
    """
    if not isinstance(blk, Block):
        raise TypeError(f"blk must be an andrea_ref.Block, got {type(blk).__name__}")
    cfg = blk.config
    if cfg.norm_position != "pre":
        raise ValueError("trace_block follows a pre-norm block (config.norm_position == 'pre')")
    if x.dim() != 3 or x.shape[0] != 1:
        raise ValueError(f"x must have shape [1, seq_len, d_model], got {tuple(x.shape)}")
    T = x.shape[1]
    if not 0 <= position < T:
        raise ValueError(f"position must lie in [0, {T - 1}], got {position}")
    out, inter = blk.forward_with_intermediates(x)
    a = blk.attn
    h = inter["ln_1"][0, : position + 1]  # normalised vectors of the positions it may see

    def proj(w, b):
        return h @ w if b is None else h @ w + b

    q_all, k, v = proj(a.w_q, a.b_q), proj(a.w_k, a.b_k), proj(a.w_v, a.b_v)
    q = q_all[position]
    H, hd = cfg.n_head, cfg.head_dim
    scores = torch.stack([(k[:, i * hd:(i + 1) * hd] @ q[i * hd:(i + 1) * hd]) / math.sqrt(hd)
                          for i in range(H)])  # [H, position + 1]
    weights = F.softmax(scores, dim=-1)
    heads = torch.cat([weights[i] @ v[:, i * hd:(i + 1) * hd] for i in range(H)])
    rebuilt = heads @ a.w_o + (0 if a.b_o is None else a.b_o)
    attn = inter["attn"][0, position]
    if not torch.allclose(rebuilt, attn, rtol=1e-4, atol=1e-6 * (1 + float(attn.abs().max()))):
        raise RuntimeError("the attention weights do not rebuild the block's attention output")
    steps = {"input": x[0, position], **{k_: t[0, position] for k_, t in inter.items()}}
    return {**steps, "q": q, "k": k, "v": v, "scores": scores, "weights": weights, "out": out}


@torch.no_grad()
def trace_model(model: AndreaModel, ids: torch.Tensor, position: int, top_k: int = 5) -> dict:
    """One token through block 1 of ``model``, then on through the rest of it.

    ``ids`` is ``[1, T]``; ``position`` is 0-based. Returns ``token_embed`` and
    ``position_embed`` (the traced token's two rows), ``block1`` (the
    :func:`trace_block` of ``model.blocks[0]`` on the embeddings), ``stream_rms``
    (RMS of the traced token's vector entering each block and leaving the last),
    ``ln_f`` (its final normalised vector), ``logits`` (``[vocab_size]``), ``top``
    (the ``top_k`` largest as ``(token id, logit, probability)``), ``entropy`` of the
    next-token distribution in nats, ``mean_nll`` (the loss, in nats, averaged over
    every possible next token: what a target chosen at random would cost) and
    ``logit_std``. Raises ``RuntimeError`` if the logits differ from ``model(ids)``
    at that position.
    """
    if not isinstance(model, AndreaModel):
        raise TypeError(f"model must be an andrea_ref.AndreaModel, got {type(model).__name__}")
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError(f"ids must be a tensor of shape [1, seq_len], got {getattr(ids, 'shape', ids)!r}")
    T = ids.shape[-1]
    if not 0 <= position < T:
        raise ValueError(f"position must lie in [0, {T - 1}], got {position}")
    tok = model.token_embed[ids[0, position]].detach().clone()
    pos = model.position_embed[position].detach().clone()
    x = model.token_embed[ids] + model.position_embed[:T]
    first = trace_block(model.blocks[0], x, position)
    rms = [float(x[0, position].pow(2).mean().sqrt())]
    x = first["out"]
    rms.append(float(x[0, position].pow(2).mean().sqrt()))
    for blk in model.blocks[1:]:
        x = blk(x)
        rms.append(float(x[0, position].pow(2).mean().sqrt()))
    final = layer_norm(x[0, position], model.ln_f.gamma, model.ln_f.beta, model.config.ln_eps)
    unembed = model.token_embed.T if model.unembed is None else model.unembed
    logits = final @ unembed
    if not torch.allclose(logits, model(ids)[0, position], rtol=1e-4, atol=1e-4):
        raise RuntimeError("the traced logits differ from model(ids)")
    logp = F.log_softmax(logits.double(), dim=-1)
    best = torch.topk(logits, top_k)
    top = [(int(i), float(v), float(logp[i].exp())) for v, i in zip(best.values, best.indices)]
    return {"token_embed": tok, "position_embed": pos, "block1": first, "stream_rms": rms,
            "ln_f": final, "logits": logits, "top": top,
            "entropy": float(-(logp.exp() * logp).sum()), "mean_nll": float(-logp.mean()),
            "logit_std": float(logits.double().std(unbiased=False))}


def format_vector(v, digits: int = 3, width: int | None = None) -> str:
    """``v`` (a 1-D tensor or sequence) as fixed-width signed numbers, e.g. ``+1.414 -0.707``."""
    if isinstance(v, torch.Tensor):
        v = v.detach().reshape(-1).tolist()
    values = [float(t.detach()) if isinstance(t, torch.Tensor) else float(t) for t in v]
    width = width or digits + 3
    return " ".join(f"{t:+{width}.{digits}f}" for t in values)
