"""The book's experiments, small enough to run on two CPU cores in seconds.

Every function is seeded and runs single-threaded, so the same call gives the
same numbers on every machine the course is tested on; the book glues these
numbers into its prose and a test recomputes them.

========================  ====================================================
``use_book_style``        one matplotlib style for every figure of the book
``tiny_config``           a small GPT-style configuration for experiments
``embedding_grad_norms``  gradient reaching the embeddings vs depth, +/- residuals
``per_layer_grad_norms``  gradient norm of each block's weights at initialisation
``train_tiny``            a short character-level training run, no warm-up
``block_relative_change`` how far one block moves its input at initialisation
``stream_relative_change``  the same for every block of a model at initialisation
``perturb_one_token``     which positions each sublayer lets a change reach
``token_trace``           shape and size of one token at every step of a block
``gelu_approximation_error``  the largest gap between tanh-GELU and exact GELU
``per_layer_grad_norms_over_seeds``  the per-block gradient norms over several seeds
``residual_sum_rms``      size of what the blocks add to the stream, vs depth
========================  ====================================================
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F

from .block import Block
from .config import ModelConfig
from .gelu import gelu_exact, gelu_tanh_torch
from .model import AndreaModel

__all__ = [
    "TRAINING_TEXT", "use_book_style", "tiny_config", "init_like_2017", "embedding_grad_norms",
    "per_layer_grad_norms", "train_tiny", "block_relative_change", "stream_relative_change",
    "perturb_one_token", "token_trace", "gelu_approximation_error", "PLOT_COLORS",
    "per_layer_grad_norms_over_seeds", "residual_sum_rms",
]

# A short original text for the character-level training runs (no downloads).
TRAINING_TEXT = (
    "A transformer block reads the residual stream, computes a small correction and adds it back. "
    "The attention sublayer lets every position gather information from the positions before it. "
    "The MLP sublayer then rewrites each position on its own, with two linear maps and a smooth "
    "activation between them. Stack twelve such blocks, put an embedding table below them and a "
    "final layer norm above them, and you have a language model that predicts the next token. "
    "Layer normalisation rescales each token to zero mean and unit variance before a sublayer sees it, "
    "and learned gains and shifts give back the scale that the sublayer needs. Placed before the "
    "sublayer it leaves the residual stream untouched; placed after the addition it normalises the "
    "stream itself, and deep stacks of that kind need a careful warm-up of the learning rate. "
    "The GELU activation weighs its input by the probability that a standard normal variable lies "
    "below it: large positive inputs pass almost unchanged, large negative inputs are silenced, and "
    "near zero the curve bends smoothly instead of breaking at a corner. "
) * 2

# One palette for every figure: the colour of a variant never changes between chapters.
PLOT_COLORS = {
    "pre": "#1b6ca8",
    "post": "#d1495b",
    "residual": "#1b6ca8",
    "no_residual": "#d1495b",
    "attn": "#1b6ca8",
    "mlp": "#edae49",
    "gelu": "#1b6ca8",
    "gelu_exact": "#00798c",
    "relu": "#7f7f7f",
    "error": "#d1495b",
}


def use_book_style() -> None:
    """Apply the book's matplotlib style (call once per chapter)."""
    import matplotlib

    matplotlib.rcParams.update({
        "figure.figsize": (6.4, 3.6),
        "figure.dpi": 110,
        "savefig.dpi": 110,
        "savefig.bbox": "tight",
        "font.size": 10,
        "axes.titlesize": 11,
        "axes.labelsize": 10,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "legend.frameon": False,
        "lines.linewidth": 1.8,
    })
    try:  # figures as SVG: sharp at any zoom (only inside IPython, e.g. the book's build)
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if get_ipython() is not None:
        set_matplotlib_formats("svg")


@contextlib.contextmanager
def _single_thread() -> Iterator[None]:
    """Run torch on one thread (deterministic sums, and the book's cells stay light)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def tiny_config(**changes) -> ModelConfig:
    """A small configuration (4 blocks, 4 heads, d_model 64, 64 tokens, context 32)."""
    base = ModelConfig(name="tiny", n_layer=4, n_head=4, d_model=64, vocab_size=64, context_length=32)
    return base.replace(**changes)


def init_like_2017(model: AndreaModel) -> AndreaModel:
    """Re-initialise ``model`` the way the 2017 transformer starts training.

    Every block weight ~ N(0, 1/d_model) with no down-scaling of the output
    projections, and embeddings at unit scale (the 2017 model multiplies its
    embeddings by sqrt(d_model)), so the residual stream starts at unit size and
    each sublayer's output is as large as its input. The model must be untied.
    """
    cfg = model.config
    if cfg.tied_embeddings:
        raise ValueError("model.config.tied_embeddings must be False for init_like_2017 (unit-scale "
                         "embeddings would make the tied output logits huge)")
    std = cfg.d_model ** -0.5
    with torch.no_grad():
        for blk in model.blocks:
            blk.attn.reset_parameters(std, std)
            blk.mlp.reset_parameters(std, std)
        torch.nn.init.normal_(model.token_embed, std=1.0)
        torch.nn.init.normal_(model.position_embed, std=1.0)
        torch.nn.init.normal_(model.unembed, std=std)
    return model


def _seeded_model(cfg: ModelConfig, init: str, seed: int) -> AndreaModel:
    """A freshly seeded model with ANDREA's initialisation (``"andrea"``) or the 2017 one (``"2017"``)."""
    if init not in ("2017", "andrea"):
        raise ValueError(f"init must be '2017' or 'andrea', got {init!r}")
    torch.manual_seed(seed)
    model = AndreaModel(cfg)
    return init_like_2017(model) if init == "2017" else model


def _random_batch(config: ModelConfig, batch: int, generator: torch.Generator):
    ids = torch.randint(0, config.vocab_size, (batch, config.context_length), generator=generator)
    targets = torch.randint(0, config.vocab_size, (batch, config.context_length), generator=generator)
    return ids, targets


def _loss(model: AndreaModel, ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model(ids)
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def embedding_grad_norms(depths: Sequence[int], residual: bool, seeds: Sequence[int] = (0, 1, 2),
                         config: ModelConfig | None = None, batch: int = 8) -> list[float]:
    """Norm of the loss gradient that reaches the position embedding, for stacks of each depth.

    The position embedding is used only at the bottom of the stack, so its gradient
    has travelled back through every block (the token embedding would also collect
    a direct gradient through the tied unembedding). Random tokens and targets; the
    median over ``seeds`` is returned for each depth.
    """
    config = config or tiny_config()
    out = []
    with _single_thread():
        for depth in depths:
            values = []
            for seed in seeds:
                torch.manual_seed(seed)
                model = AndreaModel(config.replace(n_layer=int(depth), residual=residual))
                ids, targets = _random_batch(model.config, batch, torch.Generator().manual_seed(1000 + seed))
                _loss(model, ids, targets).backward()
                values.append(model.position_embed.grad.norm().item())
            out.append(float(sorted(values)[len(values) // 2]))
    return out


def per_layer_grad_norms(norm_position: str, n_layer: int = 12, init: str = "2017", seed: int = 0,
                         batch: int = 8) -> list[float]:
    """Gradient norm of each block's weight matrices (Wq, Wk, Wv, Wo, W1, W2) at initialisation.

    ``init="2017"`` uses :func:`init_like_2017`; ``init="andrea"`` keeps ANDREA's own.
    """
    cfg = tiny_config(n_layer=n_layer, norm_position=norm_position, tied_embeddings=(init != "2017"))
    with _single_thread():
        model = _seeded_model(cfg, init, seed)
        ids, targets = _random_batch(cfg, batch, torch.Generator().manual_seed(1000 + seed))
        _loss(model, ids, targets).backward()
        norms = []
        for blk in model.blocks:
            sq = sum((p.grad ** 2).sum() for n, p in blk.named_parameters()
                     if n.split(".")[-1] in ("w_q", "w_k", "w_v", "w_o", "w1", "w2"))
            norms.append(float(torch.sqrt(sq)))
    return norms


def _char_data(text: str) -> tuple[list[str], torch.Tensor]:
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    return chars, torch.tensor([index[c] for c in text], dtype=torch.long)


def train_tiny(norm_position: str, steps: int = 100, lr: float = 1e-3, n_layer: int = 12,
               init: str = "2017", seed: int = 0, batch: int = 16, seq_len: int = 32,
               text: str = TRAINING_TEXT) -> list[float]:
    """Train a small character-level model on ``text`` with Adam at a constant
    learning rate (no warm-up); return the training loss of every step (nats/char)."""
    chars, data = _char_data(text)
    cfg = tiny_config(n_layer=n_layer, norm_position=norm_position, vocab_size=len(chars),
                      context_length=seq_len, tied_embeddings=(init != "2017"))
    losses = []
    with _single_thread():
        model = _seeded_model(cfg, init, seed)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        gen = torch.Generator().manual_seed(seed)
        offsets = torch.arange(seq_len)
        for _ in range(steps):
            starts = torch.randint(0, len(data) - seq_len - 1, (batch, 1), generator=gen)
            x, y = data[starts + offsets], data[starts + offsets + 1]
            loss = _loss(model, x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
    return losses


def unigram_entropy(text: str = TRAINING_TEXT) -> float:
    """Entropy (nats/char) of the character frequencies of ``text``: the loss of a
    model that has learned which characters are common and nothing else."""
    _, data = _char_data(text)
    p = torch.bincount(data).double() / len(data)
    p = p[p > 0]
    return float(-(p * p.log()).sum())


def block_relative_change(config: ModelConfig, rms_values: Sequence[float], seed: int = 0,
                          seq_len: int = 64) -> dict[str, list[float]]:
    """How far one freshly initialised block moves its input.

    For inputs of each RMS size, returns ``relative_change`` = |Block(x) - x| / |x| and
    ``cosine`` between Block(x) and x, for the block with residuals and (``*_no_residual``)
    the same block without them.
    """
    result = {"relative_change": [], "cosine": [], "relative_change_no_residual": [],
              "cosine_no_residual": []}
    with _single_thread(), torch.no_grad():
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
    with _single_thread(), torch.no_grad():
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
    with _single_thread(), torch.no_grad():
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
    with _single_thread(), torch.no_grad():
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


def gelu_approximation_error(lo: float = -8.0, hi: float = 8.0, n: int = 160_001) -> tuple[float, float]:
    """Largest |tanh-GELU - exact GELU| on a uniform float64 grid, and the |x| where it occurs."""
    x = torch.linspace(lo, hi, n, dtype=torch.float64)
    err = (gelu_tanh_torch(x) - gelu_exact(x)).abs()
    i = int(err.argmax())
    return float(err[i]), abs(float(x[i]))


def llama_mlp_hidden(d_model: int, multiple_of: int = 256) -> int:
    """Hidden width of a LLaMA-style SwiGLU MLP for a stream of width ``d_model``.

    LLaMA keeps the parameter count of a 4x MLP with three matrices by taking two
    thirds of ``4 * d_model``; its reference code truncates that to an integer and
    then rounds it *up* to a multiple of ``multiple_of`` (256), a width that maps
    well onto GPU matrix tiles. Exact integer arithmetic: ``8 * d_model // 3`` is
    ``int(2 * 4 * d_model / 3)`` for every positive ``d_model``.
    """
    if d_model <= 0 or multiple_of <= 0:
        raise ValueError("d_model and multiple_of must be positive")
    two_thirds = 8 * d_model // 3
    return multiple_of * -(-two_thirds // multiple_of)


# The largest relative error of the GPU's hardware tanh (PTX ``tanh.approx.f32``) over
# the whole float range, as NVIDIA's PTX ISA documents it: a bound, not a typical error.
PTX_TANH_APPROX_REL_ERR = 2.0 ** -11


def fast_tanh_gelu_error_emulated(tanh_rel_err: float = PTX_TANH_APPROX_REL_ERR, saturate_at: float = 10.0,
                                  lo: float = -12.0, hi: float = 12.0,
                                  n: int = 2_400_001) -> tuple[float, float]:
    """Emulated worst-case gap between a GELU that uses the GPU's hardware tanh and the
    tanh formula, on a float64 grid over ``[lo, hi]``; returns (gap, |x| where it occurs).

    The emulation assumes the hardware ``tanh(u)`` is off by the relative error
    ``tanh_rel_err`` (default: the documented bound, ``PTX_TANH_APPROX_REL_ERR``) at
    every point, with the sign that hurts most, except where
    ``|u| >= saturate_at``, where the kernel returns exactly +-1 (``cuda/gelu_math.h``).
    GELU = 0.5 x (1 + t), so an error ``d`` in ``t`` moves GELU by ``0.5 |x| |t| d``.
    This is a CPU estimate, not a measurement of the instruction.
    """
    x = torch.linspace(lo, hi, n, dtype=torch.float64)
    u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))
    t = torch.tanh(u)
    gap = torch.where(u.abs() >= saturate_at, torch.zeros_like(x), 0.5 * x.abs() * t.abs() * tanh_rel_err)
    i = int(gap.argmax())
    return float(gap[i]), abs(float(x[i]))


def gelu_memory_traffic(n_elements: int, bytes_per_element: int, bias_elements: int = 0) -> dict[str, int]:
    """Bytes read plus bytes written by each GELU pass over ``n_elements`` values.

    ``gelu_forward`` reads x and writes y; ``gelu_backward`` reads x and dy and writes
    dx (tanh is recomputed, not stored); ``bias_gelu_unfused`` is ``h + b`` in one pass
    (read h and b, write the sum) followed by GELU (read the sum, write y);
    ``bias_gelu_fused`` reads h and b and writes y once. The bias is counted once per
    pass, as if it stayed in cache after its first read.
    """
    n, b, nb = n_elements, bytes_per_element, bias_elements
    return {
        "gelu_forward": 2 * n * b,
        "gelu_backward": 3 * n * b,
        "bias_gelu_unfused": (2 * n + nb) * b + 2 * n * b,
        "bias_gelu_fused": (2 * n + nb) * b,
    }


def per_layer_grad_norms_over_seeds(norm_position: str, seeds: Sequence[int] = tuple(range(10)),
                                    n_layer: int = 12, init: str = "2017",
                                    batch: int = 8) -> dict[str, list[float]]:
    """:func:`per_layer_grad_norms` repeated for every seed in ``seeds``.

    Returns, per block (index 0 = the block nearest the embeddings), the ``mean``,
    ``std`` (population), ``min`` and ``max`` over the seeds, and ``runs``: one list
    of ``n_layer`` gradient norms per seed. Each seed draws both the weights and the
    random batch afresh.
    """
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    runs = [per_layer_grad_norms(norm_position, n_layer=n_layer, init=init, seed=int(s), batch=batch)
            for s in seeds]
    per_block = list(zip(*runs))
    mean = [sum(v) / len(v) for v in per_block]
    std = [math.sqrt(sum((x - m) ** 2 for x in v) / len(v)) for v, m in zip(per_block, mean)]
    return {"mean": mean, "std": std, "min": [min(v) for v in per_block],
            "max": [max(v) for v in per_block], "runs": [list(r) for r in runs]}


def residual_sum_rms(depths: Sequence[int], scaled: bool, config: ModelConfig | None = None,
                     seeds: Sequence[int] = (0, 1, 2), seq_len: int = 16) -> list[float]:
    """RMS of everything the blocks add to the residual stream, ``x_out - x_0``, at initialisation.

    For each depth in ``depths`` a fresh pre-norm stack is built from ``config``
    (default: :func:`tiny_config`) and run on a random
    input of unit RMS, so that every LayerNorm sees an ordinary input. With
    ``scaled=True`` the output projections ``attn.w_o`` and ``mlp.w2`` keep ANDREA's
    standard deviation ``init_std / sqrt(2 n_layer)``; with ``scaled=False`` they are
    redrawn with plain ``init_std``, like every other weight. The mean over ``seeds``
    is returned for each depth.
    """
    base = config or tiny_config()
    out = []
    with _single_thread(), torch.no_grad():
        for depth in depths:
            cfg = base.replace(n_layer=int(depth))
            values = []
            for seed in seeds:
                torch.manual_seed(seed)
                blocks = [Block(cfg) for _ in range(cfg.n_layer)]
                if not scaled:
                    for blk in blocks:
                        blk.attn.reset_parameters(cfg.init_std, cfg.init_std)
                        blk.mlp.reset_parameters(cfg.init_std, cfg.init_std)
                x0 = torch.randn(1, seq_len, cfg.d_model, generator=torch.Generator().manual_seed(seed))
                x = x0
                for blk in blocks:
                    x = blk(x)
                values.append(float((x - x0).pow(2).mean().sqrt()))
            out.append(sum(values) / len(values))
    return out
