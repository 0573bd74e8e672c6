"""Run a block function beside the reference, with the same weights, and find the first vector that differs.

A block that returns the wrong numbers usually goes wrong at one place: a LayerNorm
reads the wrong tensor, an addition is missing, a sublayer sees the stream instead of
its normalised copy. :func:`diff_trace` finds that place. It calls ``block_fn(x,
params, n_head)`` (the interface of the graded block notebook) and watches the pieces
it calls: every name in ``block_fn``'s module that refers to ``andrea_ref``'s
``layer_norm``, ``causal_self_attention`` or ``mlp``, and the same names in the
modules that define them (for a block that imports them inside its body), is
replaced, for the duration of the call, by a wrapper that records what goes in and
what comes out. The reference
block, :class:`andrea_ref.Block` with the same ``params``, computes the same pieces;
the two are compared in the order the data meets them:

========================  ====================================================
``ln_1.in``, ``ln_1.out``  the first LayerNorm call: what it reads, what it returns
``attn.in``, ``attn.out``  the attention call
``ln_2.in``, ``ln_2.out``  the second LayerNorm call
``mlp.in``, ``mlp.out``    the MLP call
``block.out``              what the block returns
========================  ====================================================

The first of these whose vectors differ (beyond ``rtol``/``atol``) is reported with
the first position, in reading order, where they differ, and both vectors. A piece
the block never called is reported as missing. A block written without the provided
pieces can only be compared at its output.

This is a hint for the learner, run in the learner's own process: it decides nothing
(the graded checks do). The report's sentences are translated (:mod:`andrea_ref.i18n`).
"""
from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping

import torch

from .attention import causal_self_attention
from .block import Block
from .config import ModelConfig
from .i18n import _
from .layernorm import layer_norm
from .mlp import mlp

__all__ = ["STEPS", "Difference", "DiffTrace", "diff_trace"]

STEPS = ("ln_1.in", "ln_1.out", "attn.in", "attn.out", "ln_2.in", "ln_2.out", "mlp.in", "mlp.out", "block.out")
_PIECES = {layer_norm: "ln", causal_self_attention: "attn", mlp: "mlp"}


@dataclasses.dataclass(frozen=True)
class Difference:
    """Where the learner's block first parts from the reference."""

    step: str                      # one of STEPS
    sequence: int | None = None    # counted from 1; None when the piece was never called
    position: int | None = None    # counted from 1
    expected: torch.Tensor | None = None   # the reference's vector there
    got: torch.Tensor | None = None        # the learner's vector there
    max_abs_diff: float | None = None      # over the whole tensor of this step


@dataclasses.dataclass(frozen=True)
class DiffTrace:
    """The result of :func:`diff_trace`: ``compared`` steps (those both sides have),
    ``first`` difference (None when the block agrees everywhere), ``watched``: the
    names in the block's module that were recorded, and ``pieces_seen``: whether the
    block called any of the provided pieces at all."""

    compared: tuple[str, ...]
    first: Difference | None
    watched: tuple[str, ...]
    pieces_seen: bool = True

    @property
    def agrees(self) -> bool:
        return self.first is None

    def __str__(self) -> str:
        return report(self)


def _vector(v: torch.Tensor, k: int) -> str:
    head = " ".join(f"{float(e):+.4f}" for e in v[:k])
    return head + (" ..." if v.numel() > k else "")


def report(trace: DiffTrace, entries: int = 6) -> str:
    """The trace as a few lines of text (``str(trace)`` gives the same)."""
    lines = []
    if not trace.pieces_seen:
        lines.append(_("The block calls none of the provided pieces (layer_norm, causal_self_attention, "
                       "mlp), so only its output is compared."))
    if trace.first is None:
        lines.append(_("Every compared step agrees with the reference: {steps}.").format(
            steps=", ".join(trace.compared)))
        return "\n".join(lines)
    d = trace.first
    agreed = [s for s in trace.compared if STEPS.index(s) < STEPS.index(d.step)]
    if agreed:
        lines.append(_("Agrees with the reference: {steps}.").format(steps=", ".join(agreed)))
    if d.sequence is None:
        lines.append(_("First difference: step \"{step}\": the block never makes this call.").format(step=d.step))
        return "\n".join(lines)
    lines.append(_("First difference: step \"{step}\", sequence {sequence}, position {position} "
                   "(counted from 1); largest difference in this step {diff:.3g}.").format(
        step=d.step, sequence=d.sequence, position=d.position, diff=d.max_abs_diff))
    for label, v in ((_("reference"), d.expected), (_("your block"), d.got)):
        lines.append(f"  {label + ':':<12} {_vector(v, entries)}")
    return "\n".join(lines)


def _check_args(block_fn, params, x, n_head):
    if not callable(block_fn):
        raise TypeError(f"block_fn must be a function block(x, params, n_head), got {type(block_fn).__name__}")
    if not isinstance(params, Mapping):
        raise TypeError(f"params must map the parameter names of andrea_ref.Block to tensors, "
                        f"got {type(params).__name__}")
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"x must be a [batch, seq_len, d_model] tensor, got "
                         f"{tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__}")
    if "mlp.w1" not in params:
        raise KeyError("params is missing 'mlp.w1'; expected the parameter names of andrea_ref.Block")


def _reference(params: Mapping, x: torch.Tensor, n_head: int) -> dict[str, torch.Tensor]:
    d, h = params["mlp.w1"].shape
    cfg = ModelConfig(name="diff-trace", n_layer=1, n_head=n_head, d_model=d, mlp_dim=h,
                      bias=params.get("attn.b_q") is not None)
    blk = Block(cfg).to(torch.float64)
    with torch.no_grad():
        blk.load_state_dict({k: v.detach().to(torch.float64) for k, v in params.items()})
        x64 = x.detach().to(torch.float64)
        out, s = blk.forward_with_intermediates(x64)
    return {"ln_1.in": x64, "ln_1.out": s["ln_1"], "attn.in": s["ln_1"], "attn.out": s["attn"],
            "ln_2.in": s["resid_1"], "ln_2.out": s["ln_2"], "mlp.in": s["ln_2"], "mlp.out": s["mlp"],
            "block.out": out}


def _homes() -> list:
    """The modules where the pieces can be looked up at call time (``from andrea_ref.mlp
    import mlp`` inside a function reads them there)."""
    return [sys.modules[name] for name in ("andrea_ref", "andrea_ref.layernorm", "andrea_ref.attention",
                                           "andrea_ref.mlp") if name in sys.modules]


def _recorded(block_fn: Callable, params: Mapping, x: torch.Tensor, n_head: int):
    """Call the block with its pieces watched; return (the calls per piece, its output, watched names)."""
    calls: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {"ln": [], "attn": [], "mlp": []}
    namespace = getattr(block_fn, "__globals__", None)
    # (namespace, name, original): the block's own names first, then the pieces' homes
    spots = [(vars(module), name, value) for module in _homes() for name, value in vars(module).items()
             if any(value is piece for piece in _PIECES)]
    own = [(namespace, name, value) for name, value in (namespace or {}).items()
           if any(value is piece for piece in _PIECES)]
    spots = own + [spot for spot in spots if spot[0] is not namespace]

    def wrap(piece, kind):
        def recording(h, *args, **kwargs):
            out = piece(h, *args, **kwargs)
            calls[kind].append((h.detach(), out.detach()))
            return out
        return recording

    try:
        for space, name, value in spots:
            space[name] = wrap(value, _PIECES[value])
        with torch.no_grad():
            out = block_fn(x.clone(), {k: v.clone() for k, v in params.items()}, n_head)
    finally:
        for space, name, value in spots:
            space[name] = value
    return calls, out, tuple(sorted(name for _, name, _ in own))


def _first_position(got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float):
    bad = ~torch.isclose(got, want, rtol=rtol, atol=atol)
    if bad.dim() >= 2:
        rows = bad.reshape(-1, bad.shape[-1]).any(-1)
    else:
        rows = bad.reshape(1, -1).any(-1)
    index = int(rows.nonzero()[0, 0])
    batch_index, position = divmod(index, want.shape[-2]) if want.dim() == 3 else (0, index)
    return batch_index, position


def diff_trace(block_fn: Callable, params: Mapping, x: torch.Tensor, n_head: int, *,
               rtol: float = 1e-5, atol: float = 1e-5) -> DiffTrace:
    """Compare ``block_fn(x, params, n_head)`` with the reference block, piece by piece (see the module)."""
    _check_args(block_fn, params, x, n_head)
    want = _reference(params, x, n_head)
    calls, out, watched = _recorded(block_fn, params, x, n_head)
    seen = bool(watched) or any(calls.values())
    got: dict[str, torch.Tensor | None] = {}
    if seen:
        for kind, names in (("ln", ("ln_1", "ln_2")), ("attn", ("attn",)), ("mlp", ("mlp",))):
            for i, name in enumerate(names):
                pair = calls[kind][i] if i < len(calls[kind]) else (None, None)
                got[f"{name}.in"], got[f"{name}.out"] = pair
    got["block.out"] = out if isinstance(out, torch.Tensor) else None
    compared = []

    def result(first):
        return DiffTrace(tuple(compared), first, watched, seen)

    for step in STEPS:
        if step not in got:
            continue
        compared.append(step)
        mine, ref = got[step], want[step]
        if mine is None:
            return result(Difference(step))
        if tuple(mine.shape) != tuple(ref.shape):
            raise ValueError(f"step {step!r}: the block's tensor has shape {tuple(mine.shape)}, "
                             f"the reference's {tuple(ref.shape)}")
        mine = mine.detach().to(torch.float64)
        if torch.allclose(mine, ref, rtol=rtol, atol=atol):
            continue
        b, t = _first_position(mine, ref, rtol, atol)
        pick = (lambda v: v[b, t]) if ref.dim() == 3 else (lambda v: v[t])
        return result(Difference(step, b + 1, t + 1, pick(ref), pick(mine), float((mine - ref).abs().max())))
    return result(None)
