"""The residual stream at initialisation: how far fresh blocks move it, what they add to it,
which positions a change reaches, and one token's path through a block."""
from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ..block import Block
from ..config import ModelConfig
from ..model import AndreaModel
from .models import tiny_config
from .summary import summarise_runs
from .workers import single_thread


def block_relative_change(config: ModelConfig, rms_values: Sequence[float], seed: int = 0,
                          seq_len: int = 64) -> dict[str, list[float]]:
    """How far one freshly initialised block moves its input.

    For inputs of each RMS size, returns ``relative_change`` = |Block(x) - x| / |x| and
    ``cosine`` between Block(x) and x, for the block with residuals and (``*_no_residual``)
    the same block without them.
    """
    result = {"relative_change": [], "cosine": [], "relative_change_no_residual": [],
              "cosine_no_residual": []}
    with single_thread(), torch.no_grad():
        torch.manual_seed(seed)
        blk = Block(config)
        bare = Block(config.replace(residual=False))
        bare.load_state_dict(blk.state_dict())
        noise = torch.randn(1, seq_len, config.d_model, generator=torch.Generator().manual_seed(seed))
        noise = noise / noise.pow(2).mean().sqrt()
        for rms in rms_values:
            x = noise * rms
            for suffix, module in (("", blk), ("_no_residual", bare)):
                y = module(x)
                result["relative_change" + suffix].append(float((y - x).norm() / x.norm()))
                result["cosine" + suffix].append(float(F.cosine_similarity(y.flatten(), x.flatten(), dim=0)))
    return result


def stream_relative_change(config: ModelConfig, seed: int = 0, seq_len: int = 64) -> dict[str, list[float]]:
    """Run a freshly initialised model on random tokens and report, for each block,
    the RMS of the residual stream entering it and |x_out - x_in| / |x_in|."""
    with single_thread(), torch.no_grad():
        torch.manual_seed(seed)
        model = AndreaModel(config)
        ids = torch.randint(0, config.vocab_size, (1, seq_len), generator=torch.Generator().manual_seed(seed))
        x = model.token_embed[ids] + model.position_embed[:seq_len]
        rms_in, change = [], []
        for blk in model.blocks:
            y = blk(x)
            rms_in.append(float(x.pow(2).mean().sqrt()))
            change.append(float((y - x).norm() / x.norm()))
            x = y
    return {"rms_in": rms_in, "relative_change": change}


def perturb_one_token(config: ModelConfig, position: int, seq_len: int = 12, seed: int = 0,
                      size: float = 1.0) -> dict[str, list[float]]:
    """Change the input at one position and measure how much each sublayer's output
    changes at every position: ``attn`` = Attention(LN(x)), ``mlp`` = MLP(LN(x))."""
    if not 0 <= position < seq_len:
        raise ValueError(f"position must lie in [0, {seq_len - 1}], got {position}")
    with single_thread(), torch.no_grad():
        torch.manual_seed(seed)
        blk = Block(config)
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(1, seq_len, config.d_model, generator=gen)
        x2 = x.clone()
        x2[0, position] += size * torch.randn(config.d_model, generator=gen)
        out = {}
        for name, f in (("attn", lambda h: blk.attn(blk.ln_1(h))), ("mlp", lambda h: blk.mlp(blk.ln_2(h)))):
            out[name] = (f(x2) - f(x))[0].norm(dim=-1).tolist()
    return out


TRACE_STEPS = ("input", "ln_1", "attn", "resid_1", "ln_2", "mlp_hidden", "mlp_act", "mlp", "resid_2")


def token_trace(config: ModelConfig, position: int = 5, seq_len: int = 16, seed: int = 0) -> list[dict]:
    """Follow the token at ``position`` through the first block of one freshly
    initialised model built from ``config`` (its embeddings, its block 1).

    Returns one row per step: ``step``, ``shape`` (of the whole tensor),
    ``width`` (its last dimension) and ``rms`` of the traced token's vector.
    """
    with single_thread(), torch.no_grad():
        torch.manual_seed(seed)
        model = AndreaModel(config)  # one model: its own embeddings and its own block 1
        ids = torch.randint(0, config.vocab_size, (1, seq_len), generator=torch.Generator().manual_seed(seed))
        x = model.token_embed[ids] + model.position_embed[:seq_len]
        _, inter = model.blocks[0].forward_with_intermediates(x)
        tensors = {"input": x, **inter}
        rows = []
        for step in TRACE_STEPS:
            t = tensors[step]
            rows.append({"step": step, "shape": tuple(t.shape), "width": int(t.shape[-1]),
                         "rms": float(t[0, position].pow(2).mean().sqrt())})
    return rows


def _residual_sum_rms_one_seed(seed: int, depths: Sequence[int], scaled: bool | str, base: ModelConfig,
                               seq_len: int) -> list[float]:
    out = []
    with single_thread(), torch.no_grad():
        for depth in depths:
            cfg = base.replace(n_layer=int(depth))
            torch.manual_seed(seed)
            blocks = [Block(cfg) for _ in range(cfg.n_layer)]
            for blk in blocks:
                if scaled is False:
                    blk.attn.reset_parameters(cfg.init_std, cfg.init_std)
                if scaled is not True:
                    blk.mlp.reset_parameters(cfg.init_std, cfg.init_std)
            x0 = torch.randn(1, seq_len, cfg.d_model, generator=torch.Generator().manual_seed(seed))
            x = x0
            for blk in blocks:
                x = blk(x)
            out.append(float((x - x0).pow(2).mean().sqrt()))
    return out


def residual_sum_rms_over_seeds(depths: Sequence[int], scaled: bool | str, config: ModelConfig | None = None,
                                seeds: Sequence[int] = tuple(range(10)), seq_len: int = 16) -> dict[str, list]:
    """RMS of everything the blocks add to the residual stream, ``x_out - x_0``, at initialisation.

    For each depth in ``depths`` a fresh pre-norm stack is built from ``config``
    (default: :func:`tiny_config`) and run on a random input of unit RMS, so that
    every LayerNorm sees an ordinary input. With ``scaled=True`` the output
    projections ``attn.w_o`` and ``mlp.w2`` keep ANDREA's standard deviation
    ``init_std / sqrt(2 n_layer)``; with ``scaled=False`` they are redrawn with plain
    ``init_std``, like every other weight; ``scaled="attn"`` keeps the factor on
    ``attn.w_o`` only. Returns :func:`summarise_runs` over the seeds, per depth.
    """
    if scaled not in (True, False, "attn"):
        raise ValueError(f"scaled must be True, False or 'attn', got {scaled!r}")
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    task = functools.partial(_residual_sum_rms_one_seed, depths=list(depths), scaled=scaled,
                             base=config or tiny_config(), seq_len=seq_len)
    return summarise_runs([task(int(s)) for s in seeds])


def residual_sum_rms(depths: Sequence[int], scaled: bool, config: ModelConfig | None = None,
                     seeds: Sequence[int] = (0, 1, 2), seq_len: int = 16) -> list[float]:
    """The mean over ``seeds`` of :func:`residual_sum_rms_over_seeds`, per depth."""
    return residual_sum_rms_over_seeds(depths, scaled, config, seeds, seq_len)["mean"]
