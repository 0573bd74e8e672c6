"""The mistake museum: the classic mistakes the graded checks diagnose, as a learner would write them.

Each exhibit is a function with the interface of one graded notebook (``layer_norm``,
``gelu``, ``mlp`` or ``block``), written by hand the way the mistake usually happens.
The book runs each one three ways, all measured when the book is built:

* through the notebook's graded checks (:func:`grade`): which properties fail, and
  the likely mistake the checks name;
* in place of the correct piece inside one real block (:func:`block_effect`): how
  far the block's output moves;
* in place of the correct piece inside a small trained model (:func:`loss_with`):
  what the mistake costs in loss, with the trained weights left as they are.

The substitution is done by :func:`substituted`, which rebinds, for the duration of a
``with`` block, the name under which the reference modules call the piece
(``andrea_ref.block.layer_norm``, ``andrea_ref.model.layer_norm``,
``andrea_ref.mlp.gelu``, ``andrea_ref.block.mlp`` or ``andrea_ref.model.block``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import math
from collections.abc import Callable, Iterator

import torch
import torch.nn.functional as F

from .attention import causal_self_attention
from .gelu import gelu
from .i18n import N_
from .layernorm import layer_norm
from .mlp import mlp

# The modules themselves (the package's names ``block`` and ``mlp`` are the functions).
_block_module = importlib.import_module(".block", __package__)
_mlp_module = importlib.import_module(".mlp", __package__)
_model_module = importlib.import_module(".model", __package__)

__all__ = ["Exhibit", "EXHIBITS", "substituted", "grade", "block_effect", "loss_with"]


# ----------------------------------------------------------------- the exhibits
def layer_norm_unbiased(x, gamma, beta, eps=1e-5):
    """LayerNorm with the unbiased variance (divide by d - 1)."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).sum(-1, keepdim=True) / (x.shape[-1] - 1)
    return (x - mean) / torch.sqrt(var + eps) * gamma + beta


def layer_norm_eps_outside(x, gamma, beta, eps=1e-5):
    """LayerNorm with eps added to the standard deviation, outside the square root."""
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / (torch.sqrt(var) + eps) * gamma + beta


def gelu_erf(x):
    """The exact GELU, x Phi(x), where the course asks for the tanh form."""
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def mlp_transposed(x, w1, b1, w2, b2):
    """The MLP with nn.Linear's [out, in] habit: every weight transposed."""
    return gelu(x @ w1.T + b1) @ w2.T + b2


def _pieces(params):
    p = params
    ln = lambda name, h: layer_norm(h, p[f"{name}.gamma"], p[f"{name}.beta"])  # noqa: E731
    return p, ln


def _attention(h, p, n_head):
    return causal_self_attention(h, p["attn.w_q"], p["attn.b_q"], p["attn.w_k"], p["attn.b_k"],
                                 p["attn.w_v"], p["attn.b_v"], p["attn.w_o"], p["attn.b_o"], n_head)


def _feed_forward(h, p):
    return mlp(h, p["mlp.w1"], p["mlp.b1"], p["mlp.w2"], p["mlp.b2"])


def block_lost_residual(x, params, n_head):
    """The MLP sublayer's residual addition is lost: the block returns mlp(ln_2(h))."""
    p, ln = _pieces(params)
    h = x + _attention(ln("ln_1", x), p, n_head)
    return _feed_forward(ln("ln_2", h), p)


def block_post_norm(x, params, n_head):
    """Post-norm wiring: LN(x + f(x)) instead of x + f(LN(x))."""
    p, ln = _pieces(params)
    h = ln("ln_1", x + _attention(x, p, n_head))
    return ln("ln_2", h + _feed_forward(h, p))


@dataclasses.dataclass(frozen=True)
class Exhibit:
    """One classic mistake: ``key``, the notebook ``piece`` it belongs to, the mistaken
    ``fn`` (with that notebook's interface) and a short ``label`` (English; translate it with
    :func:`andrea_ref.i18n.gettext` where it is shown)."""

    key: str
    piece: str
    fn: Callable
    label: str


EXHIBITS = (
    Exhibit("unbiased_variance", "layer_norm", layer_norm_unbiased, N_("unbiased variance (divide by d - 1)")),
    Exhibit("eps_outside", "layer_norm", layer_norm_eps_outside, N_("eps outside the square root")),
    Exhibit("erf_gelu", "gelu", gelu_erf, N_("exact erf GELU for the tanh form")),
    Exhibit("transposed", "mlp", mlp_transposed, N_("transposed MLP weights")),
    Exhibit("lost_residual", "block", block_lost_residual, N_("the MLP's residual addition lost")),
    Exhibit("post_norm", "block", block_post_norm, N_("post-norm wiring")),
)


# ------------------------------------------------------------- substitution
@contextlib.contextmanager
def substituted(exhibit: Exhibit) -> Iterator[None]:
    """Within the ``with`` block, the reference model and block use ``exhibit.fn`` for its piece."""
    if exhibit.piece == "layer_norm":
        targets = [(_block_module, "layer_norm", exhibit.fn), (_model_module, "layer_norm", exhibit.fn)]
    elif exhibit.piece == "gelu":
        targets = [(_mlp_module, "gelu", exhibit.fn)]
    elif exhibit.piece == "mlp":
        def learner_mlp(x, w1, b1, w2, b2, activation="gelu"):
            # A learner's MLP has the graded signature, which is the GELU model's.
            if activation != "gelu":
                raise ValueError(f"the museum's MLP exhibits need activation='gelu', got {activation!r}")
            return exhibit.fn(x, w1, b1, w2, b2)

        targets = [(_block_module, "mlp", learner_mlp)]
    elif exhibit.piece == "block":
        targets = [(_model_module, "block", lambda x, params, config: exhibit.fn(x, params, config.n_head))]
    else:
        raise ValueError(f"exhibit.piece must be one of layer_norm, gelu, mlp, block, got {exhibit.piece!r}")
    saved = [(module, name, getattr(module, name)) for module, name, _ in targets]
    try:
        for module, name, fn in targets:
            setattr(module, name, fn)
        yield
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


# ------------------------------------------------------------ measurements
def grade(exhibit: Exhibit) -> list[tuple[str, bool, str | None]]:
    """Run the graded checks of the exhibit's notebook on its function.

    Returns one ``(property, passed, likely mistake)`` per check, the likely mistake
    being the line the check names it in (None when the check passes or names none).
    """
    from .grading import block as gb, gelu as gg, layernorm as gl, mlp as gm

    checks = {"layer_norm": gl.CHECKS, "gelu": gg.CHECKS, "mlp": gm.CHECKS, "block": gb.CHECKS}[exhibit.piece]
    results = []
    for prop, check in checks:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                check(exhibit.fn)
        except AssertionError as exc:
            likely = next((line.split(":", 1)[1].strip() for line in str(exc).splitlines()
                           if line.startswith("Likely mistake:")), None)
            results.append((prop, False, likely))
        else:
            results.append((prop, True, None))
    return results


def _run_block(blk, x):
    params = dict(blk.named_parameters())
    return _model_module.block(x, params, blk.config)


def block_effect(exhibit: Exhibit, blk, x: torch.Tensor) -> dict:
    """Run the reference block ``blk`` (an :class:`andrea_ref.Block`) on ``x``, with and
    without the exhibit's mistake. Returns ``relative_change`` = |mistaken - right| / |right|
    and ``max_abs_diff``, or ``error``: the one-line message of the exception it raised."""
    with torch.no_grad():
        right = _run_block(blk, x)
        try:
            with substituted(exhibit):
                wrong = _run_block(blk, x)
        except RuntimeError as exc:
            return {"error": str(exc).splitlines()[0]}
    return {"relative_change": float((wrong - right).norm() / right.norm()),
            "max_abs_diff": float((wrong - right).abs().max())}


def loss_with(exhibit: Exhibit | None, model, ids: torch.Tensor, targets: torch.Tensor) -> float | str:
    """The model's cross-entropy on ``ids``/``targets`` (nats per token), with the
    exhibit's mistake in place of the right piece (None: no mistake). A mistake that
    makes the model raise returns the first line of its message instead."""
    with torch.no_grad():
        try:
            with substituted(exhibit) if exhibit is not None else contextlib.nullcontext():
                logits = model(ids)
        except RuntimeError as exc:
            return str(exc).splitlines()[0]
        return float(F.cross_entropy(logits.flatten(0, 1), targets.flatten()))
