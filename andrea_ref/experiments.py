"""The book's experiments, small enough to run on two CPU cores in seconds.

Every function is seeded and runs single-threaded, so the same call gives the
same numbers on every machine the course is tested on; the book glues these
numbers into its prose and a test recomputes them.

========================  ====================================================
``use_book_style``        one matplotlib style for every figure of the book
``tiny_config``           a small GPT-style configuration for experiments
``embedding_grad_norms``  gradient reaching the embeddings vs depth, +/- residuals
``per_layer_grad_norms``  gradient norm of each block's weights at initialisation
``train_tiny``            a short character-level training run (optional warm-up)
``train_char_model``      the same run, returning the trained model as well
``char_batch``            one batch of character windows, drawn as the training runs draw them
``train_runs``            several training runs at once, each with its own settings
``train_tiny_over_seeds`` training loss curves over several seeds (mean, min, max)
``block_relative_change`` how far one block moves its input at initialisation
``stream_relative_change``  the same for every block of a model at initialisation
``perturb_one_token``     which positions each sublayer lets a change reach
``token_trace``           shape and size of one token at every step of a block
``gelu_approximation_error``  the largest gap between tanh-GELU and exact GELU
``per_layer_grad_norms_over_seeds``  the per-block gradient norms over several seeds
``residual_sum_rms``      size of what the blocks add to the stream, vs depth
``embedding_grad_norms_over_seeds``  the depth experiment over several seeds
``residual_sum_rms_over_seeds``      the residual-sum experiment over several seeds
``bigram_statistics``     the character bigram table of a text and its entropies
``fit_direct_path``       the best loss a zero-block model (tied or untied) reaches on it
``fit_direct_paths``      the same for several settings at once
``norm_contrast``         LayerNorm, BatchNorm and RMSNorm on one tensor, side by side
``adam_first_step``       Adam's first step, with every gradient rescaled or not
``adam_first_steps``      the same for several settings at once
========================  ====================================================

Experiments over several seeds run the seeds in parallel worker processes (one per
CPU core, at most :data:`MAX_WORKERS`), each single-threaded: the numbers are the
same as a serial run's, only sooner.
"""
from __future__ import annotations

import contextlib
import functools
import math
import os
import statistics
from collections.abc import Callable, Iterator, Sequence

import torch
import torch.nn.functional as F

from ._validate import check_positive_int
from .block import Block
from .config import ModelConfig
from .gelu import gelu_exact, gelu_tanh_torch
from .model import AndreaModel

__all__ = [
    "TRAINING_TEXT", "use_book_style", "tiny_config", "init_like_2017", "embedding_grad_norms",
    "per_layer_grad_norms", "train_tiny", "block_relative_change", "stream_relative_change",
    "perturb_one_token", "token_trace", "gelu_approximation_error", "PLOT_COLORS",
    "per_layer_grad_norms_over_seeds", "residual_sum_rms", "train_char_model", "train_tiny_over_seeds", "train_runs",
    "embedding_grad_norms_over_seeds", "residual_sum_rms_over_seeds", "bigram_statistics", "fit_direct_path", "fit_direct_paths",
    "norm_contrast", "adam_first_step", "adam_first_steps", "char_batch", "summarise_runs", "MAX_WORKERS",
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


# Seeds run side by side in this many worker processes at most (the book's machine has two cores).
MAX_WORKERS = 2


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


class _Workers:
    """Worker processes for the seeds of an experiment, started once per process and reused.

    Each worker is a fresh Python that imports this module and answers tasks on its
    standard input: ``(fn, item)`` pickled in, ``fn(item)`` (or the exception it
    raised) pickled out. Written by hand because both ways ``multiprocessing`` starts
    workers fail here: forking a process whose torch has already run OpenMP threads
    can hang a worker at its first parallel loop, and spawning (or a fork server)
    imports the caller's main script again, which breaks a script that runs an
    experiment at its top level.
    """

    def __init__(self, n: int):
        import subprocess
        import sys

        package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            filter(None, [package_parent, os.environ.get("PYTHONPATH", "")])), OMP_NUM_THREADS="1")
        self.procs = [subprocess.Popen([sys.executable, "-c", f"import {__name__} as m; m._serve()"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
                      for _ in range(n)]
        import atexit
        atexit.register(self.close)

    def close(self) -> None:
        """End the workers: each sees its input close and returns; wait for them."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.stdin.close()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except Exception:  # pragma: no cover - a worker stuck in a task
                proc.kill()
            proc.stdout.close()

    @staticmethod
    def _send(stream, obj) -> None:
        import pickle
        import struct

        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
        stream.write(struct.pack("<Q", len(data)) + data)
        stream.flush()

    @staticmethod
    def _receive(stream):
        import pickle
        import struct

        head = stream.read(8)
        if len(head) < 8:
            raise RuntimeError("an experiment worker process ended unexpectedly")
        return pickle.loads(stream.read(struct.unpack("<Q", head)[0]))

    def kill(self) -> None:
        """End the workers now (a map was interrupted: answers may be left in the pipes)."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass

    def map(self, fn: Callable, items: list) -> list:
        """``[fn(item) for item in items]`` on the workers; a map that does not finish (the
        notebook interrupted) ends them, so that no later map reads its answers."""
        done = False
        try:
            results, error = self._map(fn, items)
            done = True
        finally:
            if not done:
                self.kill()
        if error is not None:  # the first exception a task raised, after every answer came back
            raise error
        return results

    def _map(self, fn: Callable, items: list) -> tuple[list, BaseException | None]:
        import selectors

        results, queue, busy, error = [None] * len(items), list(enumerate(items)), {}, None
        with selectors.DefaultSelector() as sel:
            for proc in self.procs:
                if queue:
                    index, item = queue.pop(0)
                    self._send(proc.stdin, (fn, item))
                    busy[proc.stdout.fileno()] = (proc, index)
                    sel.register(proc.stdout, selectors.EVENT_READ)
            while busy:  # every worker answers what it was sent, so no answer is left in a pipe
                for key, _ in sel.select():
                    proc, index = busy.pop(key.fd)
                    ok, value = self._receive(proc.stdout)
                    if ok:
                        results[index] = value
                    elif error is None:
                        error = value
                    if queue and error is None:
                        index, item = queue.pop(0)
                        self._send(proc.stdin, (fn, item))
                        busy[key.fd] = (proc, index)
                    else:
                        sel.unregister(key.fileobj)
        return results, error


def _serve() -> None:
    """The loop of one worker process (see :class:`_Workers`)."""
    import sys

    torch.set_num_threads(1)
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    try:
        while True:
            try:
                fn, item = _Workers._receive(source)
            except RuntimeError:  # the parent closed the pipe: done
                return
            try:
                answer = (True, fn(item))
            except Exception as exc:  # sent back and raised in the parent
                answer = (False, exc)
            _Workers._send(sink, answer)
    except KeyboardInterrupt:  # the notebook's kernel was interrupted or shut down (its process group): end quietly
        return


_WORKERS: _Workers | None = None


def _parallel_map(fn: Callable, items: Sequence) -> list:
    """``[fn(item) for item in items]``, in worker processes when there are cores to spare.

    ``fn`` must be picklable (a module-level function or a ``functools.partial`` of
    one). Each item runs single-threaded in a worker, and the results come back in
    the order of ``items``: the same values a serial loop gives.
    """
    global _WORKERS
    items = list(items)
    workers = max(1, min(MAX_WORKERS, _cores()))
    if workers == 1 or len(items) < 2:
        return [fn(item) for item in items]
    if _WORKERS is None or any(p.poll() is not None for p in _WORKERS.procs):
        _WORKERS = _Workers(workers)
    return _WORKERS.map(fn, items)


def summarise_runs(runs: Sequence[Sequence[float]]) -> dict[str, list]:
    """Per position (a depth, a block, a step), the ``mean``, ``median``, ``std``
    (population), ``min`` and ``max`` over the runs, and the ``runs`` themselves."""
    if not runs:
        raise ValueError("runs must hold at least one run")
    columns = list(zip(*runs))
    mean = [sum(v) / len(v) for v in columns]
    return {
        "mean": mean,
        "median": [float(statistics.median(v)) for v in columns],
        "std": [statistics.pstdev(v) for v in columns],
        "min": [min(v) for v in columns],
        "max": [max(v) for v in columns],
        "runs": [list(r) for r in runs],
    }


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


def _embedding_grad_norms_one_seed(seed: int, depths: Sequence[int], residual: bool, config: ModelConfig,
                                   batch: int) -> list[float]:
    out = []
    with _single_thread():
        for depth in depths:
            torch.manual_seed(seed)
            model = AndreaModel(config.replace(n_layer=int(depth), residual=residual))
            ids, targets = _random_batch(model.config, batch, torch.Generator().manual_seed(1000 + seed))
            _loss(model, ids, targets).backward()
            out.append(model.position_embed.grad.norm().item())
    return out


def embedding_grad_norms_over_seeds(depths: Sequence[int], residual: bool,
                                    seeds: Sequence[int] = tuple(range(10)),
                                    config: ModelConfig | None = None, batch: int = 8) -> dict[str, list]:
    """Norm of the loss gradient that reaches the position embedding, for stacks of each depth.

    The position embedding is used only at the bottom of the stack, so its gradient
    has travelled back through every block (the token embedding would also collect
    a direct gradient through the tied unembedding). Random tokens and targets; each
    seed draws new weights and a new batch. Returns :func:`summarise_runs` over the
    seeds, per depth (``runs``: one list of ``len(depths)`` norms per seed).
    """
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    task = functools.partial(_embedding_grad_norms_one_seed, depths=list(depths), residual=residual,
                             config=config or tiny_config(), batch=batch)
    return summarise_runs(_parallel_map(task, [int(s) for s in seeds]))


def embedding_grad_norms(depths: Sequence[int], residual: bool, seeds: Sequence[int] = (0, 1, 2),
                         config: ModelConfig | None = None, batch: int = 8) -> list[float]:
    """The median over ``seeds`` of :func:`embedding_grad_norms_over_seeds`, per depth."""
    return embedding_grad_norms_over_seeds(depths, residual, seeds, config, batch)["median"]


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


def _windows(data: torch.Tensor, batch: int, seq_len: int, gen: torch.Generator):
    """``batch`` random windows of ``seq_len`` characters and, one character later, their targets."""
    starts = torch.randint(0, len(data) - seq_len - 1, (batch, 1), generator=gen)
    offsets = torch.arange(seq_len)
    return data[starts + offsets], data[starts + offsets + 1]


def char_batch(batch: int = 16, seq_len: int = 32, seed: int = 0,
               text: str = TRAINING_TEXT) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch of character windows of ``text`` (ids, and the next character of each as
    targets), drawn the way :func:`train_char_model` draws its training batches."""
    return _windows(_char_data(text)[1], batch, seq_len, torch.Generator().manual_seed(seed))


def train_char_model(norm_position: str, steps: int = 100, lr: float = 1e-3, n_layer: int = 12,
                     init: str = "2017", seed: int = 0, batch: int = 16, seq_len: int = 32,
                     text: str = TRAINING_TEXT, warmup: int = 0, d_model: int = 64,
                     ) -> tuple[AndreaModel, list[float]]:
    """Train a small character-level model on ``text`` with Adam; return the model and
    the training loss of every step (nats per character).

    The learning rate is ``lr`` from the first step, or, with ``warmup > 0``, rises
    linearly from ``lr / warmup`` to ``lr`` over the first ``warmup`` steps
    (``torch.optim.lr_scheduler.LambdaLR``) and stays there. ``init="2017"`` uses
    :func:`init_like_2017` (and untied embeddings); ``init="andrea"`` ANDREA's own.
    """
    check_positive_int(steps, "steps")
    if not (isinstance(warmup, int) and warmup >= 0):
        raise ValueError(f"warmup must be a whole number of steps >= 0, got {warmup!r}")
    chars, data = _char_data(text)
    cfg = tiny_config(n_layer=n_layer, d_model=d_model, norm_position=norm_position, vocab_size=len(chars),
                      context_length=seq_len, tied_embeddings=(init != "2017"))
    losses = []
    with _single_thread():
        model = _seeded_model(cfg, init, seed)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        schedule = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda step: min(1.0, (step + 1) / warmup) if warmup else 1.0)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(steps):
            x, y = _windows(data, batch, seq_len, gen)
            loss = _loss(model, x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            schedule.step()
            losses.append(loss.item())
    return model, losses


def train_tiny(norm_position: str, steps: int = 100, lr: float = 1e-3, n_layer: int = 12,
               init: str = "2017", seed: int = 0, batch: int = 16, seq_len: int = 32,
               text: str = TRAINING_TEXT, warmup: int = 0, d_model: int = 64) -> list[float]:
    """The training losses of :func:`train_char_model` (no warm-up unless ``warmup`` is given)."""
    return train_char_model(norm_position, steps=steps, lr=lr, n_layer=n_layer, init=init, seed=seed,
                            batch=batch, seq_len=seq_len, text=text, warmup=warmup, d_model=d_model)[1]


def _train_losses(settings: dict) -> list[float]:
    return train_tiny(**settings)


def train_runs(runs: Sequence[dict]) -> list[list[float]]:
    """The loss curves of several :func:`train_tiny` runs, one dict of its arguments per
    run (``{"norm_position": "post", "warmup": 50, "seed": 1}``), trained in parallel;
    the curves come back in the order of ``runs``."""
    runs = [dict(r) for r in runs]
    for r in runs:
        if "norm_position" not in r:
            raise ValueError(f"every run must name its norm_position, got {r!r}")
    return _parallel_map(_train_losses, runs)


def train_tiny_over_seeds(norm_position: str, seeds: Sequence[int] = tuple(range(10)),
                          **settings) -> dict[str, list]:
    """:func:`train_tiny` once per seed (weights, batches), in parallel; returns
    :func:`summarise_runs` of the loss curves, step by step."""
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    return summarise_runs(train_runs([dict(settings, norm_position=norm_position, seed=int(s)) for s in seeds]))


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
    return summarise_runs([per_layer_grad_norms(norm_position, n_layer=n_layer, init=init, seed=int(s),
                                                batch=batch) for s in seeds])


def _residual_sum_rms_one_seed(seed: int, depths: Sequence[int], scaled: bool | str, base: ModelConfig,
                               seq_len: int) -> list[float]:
    out = []
    with _single_thread(), torch.no_grad():
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


def adam_first_step(norm_position: str, seed: int = 0, grad_scale: float = 1.0, lr: float = 1e-3,
                    n_layer: int = 12, batch: int = 16, seq_len: int = 32,
                    text: str = TRAINING_TEXT) -> dict[str, float | torch.Tensor]:
    """One Adam step of the training run of :func:`train_char_model` (2017 initialisation,
    the same first batch), with every gradient multiplied by ``grad_scale`` before the step.

    Returns ``grad_norm`` (of all parameters together, after scaling), ``update``
    (the change of every parameter, flattened into one vector), ``update_rms`` and
    ``logit_change``: the RMS change of the model's logits on the step's own batch.
    """
    chars, data = _char_data(text)
    cfg = tiny_config(n_layer=n_layer, norm_position=norm_position, vocab_size=len(chars),
                      context_length=seq_len, tied_embeddings=False)
    with _single_thread():
        model = _seeded_model(cfg, "2017", seed)
        x, y = _windows(data, batch, seq_len, torch.Generator().manual_seed(seed))
        before = [p.detach().clone() for p in model.parameters()]
        with torch.no_grad():
            logits_before = model(x)
        opt = torch.optim.Adam(model.parameters(), lr=lr)
        _loss(model, x, y).backward()
        with torch.no_grad():
            for p in model.parameters():
                p.grad.mul_(grad_scale)
            grad_norm = math.sqrt(sum(float((p.grad ** 2).sum()) for p in model.parameters()))
        opt.step()
        with torch.no_grad():
            update = torch.cat([(p - b).flatten() for p, b in zip(model.parameters(), before)])
            logit_change = float((model(x) - logits_before).pow(2).mean().sqrt())
    return {"grad_norm": grad_norm, "update": update, "update_rms": float(update.pow(2).mean().sqrt()),
            "logit_change": logit_change}


def _adam_first_step_summary(settings: dict) -> dict[str, float]:
    out = adam_first_step(**settings)
    out.pop("update")
    return out


def adam_first_steps(runs: Sequence[dict]) -> list[dict[str, float]]:
    """:func:`adam_first_step` for several settings at once, in parallel, without the
    ``update`` vectors (``grad_norm``, ``update_rms`` and ``logit_change`` of each)."""
    return _parallel_map(_adam_first_step_summary, [dict(r) for r in runs])


def bigram_statistics(text: str = TRAINING_TEXT) -> dict:
    """The character bigrams of ``text``: ``chars``, ``counts`` ``[V, V]`` (row: the
    character, column: the one after it), ``next_given`` = P(next | current) (rows of
    characters never followed by anything are uniform), ``weights`` = how often each
    character is followed by another, and the ``bigram_entropy`` and
    ``unigram_entropy`` in nats per character: the best losses of a model that sees
    the current character, and of one that sees nothing."""
    chars, data = _char_data(text)
    V = len(chars)
    counts = torch.zeros(V, V, dtype=torch.float64)
    counts.index_put_((data[:-1], data[1:]), torch.ones(len(data) - 1, dtype=torch.float64), accumulate=True)
    rows = counts.sum(1, keepdim=True)
    next_given = torch.where(rows > 0, counts / rows.clamp(min=1), torch.full_like(counts, 1.0 / V))
    weights = rows.squeeze(1) / rows.sum()
    plogp = torch.where(next_given > 0, next_given * next_given.log(), torch.zeros_like(next_given))
    return {"chars": chars, "counts": counts, "next_given": next_given, "weights": weights,
            "bigram_entropy": float(-(weights[:, None] * plogp).sum()),
            "unigram_entropy": unigram_entropy(text)}


def fit_direct_path(tied: bool, normalised: bool = True, d_model: int = 64, steps: int = 500, lr: float = 1e-2,
                    seed: int = 0, text: str = TRAINING_TEXT) -> float:
    """The loss a model without blocks reaches on the bigrams of ``text``.

    The model reads the current character's embedding ``E[a]``, optionally passes it
    through a LayerNorm with learned gain and shift (``normalised``, as ``ln_f`` does
    in ANDREA), and scores every next character ``b`` against the unembedding: the
    token table itself (``tied``: ``score(a, b) = LN(E[a]) . E[b]``) or a separate
    matrix ``U``. Adam, ``steps`` full-batch steps on the exact expected loss
    (nats per character); float64. Returns the final loss.
    """
    stats = bigram_statistics(text)
    P, w = stats["next_given"], stats["weights"]
    V = P.shape[0]
    with _single_thread():
        g = torch.Generator().manual_seed(seed)
        E = (torch.randn(V, d_model, generator=g, dtype=torch.float64) * 0.02).requires_grad_()
        U = (torch.randn(d_model, V, generator=g, dtype=torch.float64) * 0.02).requires_grad_()
        gamma = torch.ones(d_model, dtype=torch.float64, requires_grad=True)
        beta = torch.zeros(d_model, dtype=torch.float64, requires_grad=True)
        params = [E] + ([gamma, beta] if normalised else []) + ([] if tied else [U])
        opt = torch.optim.Adam(params, lr=lr)

        def loss_now():
            from .layernorm import layer_norm
            h = layer_norm(E, gamma, beta) if normalised else E
            logits = h @ (E.T if tied else U)
            return -(w[:, None] * P * F.log_softmax(logits, dim=-1)).sum()

        for _ in range(steps):
            loss = loss_now()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        with torch.no_grad():
            return float(loss_now())


def _fit_direct_path(settings: dict) -> float:
    return fit_direct_path(**settings)


def fit_direct_paths(runs: Sequence[dict]) -> list[float]:
    """:func:`fit_direct_path` for several settings (dicts of its arguments), in parallel."""
    return _parallel_map(_fit_direct_path, [dict(r) for r in runs])


def norm_contrast(batch: int = 3, seq_len: int = 5, d: int = 6, seed: int = 0, eps: float = 1e-5) -> dict:
    """LayerNorm, BatchNorm and RMSNorm applied to one random ``[batch, seq_len, d]`` tensor.

    The input has a different mean and spread in every feature and every token, so
    each normalisation shows what it removes. Returns ``x`` and the three outputs
    (``layer``, ``batch``, ``rms``; unit gains, zero shifts; BatchNorm with the
    statistics of this batch, as in training), and three measurements:
    ``other_sequence``: how far each norm's output for sequence 1 moves when
    sequence 2 alone is changed; ``later_position``: how far its output at position 1
    moves when only the last position changes; ``rms_vs_layer``: the largest gap
    between RMSNorm and LayerNorm, on ``x`` and on ``x`` with each token's mean removed.
    """
    from .layernorm import layer_norm

    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(batch, seq_len, d, generator=g, dtype=torch.float64)
         * torch.linspace(0.5, 2.0, d, dtype=torch.float64) + torch.linspace(-1.0, 1.5, d, dtype=torch.float64))
    ones, zeros = torch.ones(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)

    def norms(t):
        return {
            "layer": layer_norm(t, ones, zeros, eps),
            # BatchNorm: one mean and variance per feature, over the batch and the positions
            "batch": F.batch_norm(t.transpose(1, 2), None, None, ones, zeros, training=True,
                                  eps=eps).transpose(1, 2),
            "rms": F.rms_norm(t, (d,), ones, eps),
        }

    out = norms(x)
    other = x.clone()
    other[1] = torch.randn(seq_len, d, generator=g, dtype=torch.float64) * 3
    later = x.clone()
    later[:, -1] = later[:, -1] + 5.0
    moved_other, moved_later = norms(other), norms(later)
    centred = x - x.mean(-1, keepdim=True)
    return {
        "x": x, **out,
        "other_sequence": {k: float((moved_other[k][0] - out[k][0]).abs().max()) for k in out},
        "later_position": {k: float((moved_later[k][:, 0] - out[k][:, 0]).abs().max()) for k in out},
        "rms_vs_layer": {"raw": float((out["rms"] - out["layer"]).abs().max()),
                         "centred": float((F.rms_norm(centred, (d,), ones, eps)
                                           - layer_norm(centred, ones, zeros, eps)).abs().max())},
    }
