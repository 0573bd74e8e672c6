"""The checks of ``sample_next(logits, temperature, seed)`` (see :mod:`.capstone`, which
also derives the distribution check's bound): the argmax at temperature 0, draws that
follow softmax(logits / temperature), and the same draws from the same seed."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import core as C, captured, compare, inputs, messages, runner, watch
from .capstone_rules import FORBIDDEN_SAMPLE, SAMPLE
from .messages import _

_LOGIT_VALUES = (2.5, 1.5, 1.0, 0.5, 0.0, -1.0, -2.0, -math.inf)
SAMPLE_ROWS, SAMPLE_BOUND = 20_000, 0.026
TEMPERATURES = (1.0, 0.5, 2.0)


def _fixed_logits(seed):
    """The distribution checks' logits: fixed values (one of them -inf) in a seeded order."""
    order = inputs.permutation(inputs.generator(seed + 41), len(_LOGIT_VALUES))
    return torch.tensor(_LOGIT_VALUES, dtype=torch.float64, device="cpu")[order]


def _greedy_inputs(seed):
    """(dtype, logits) with equal maxima planted in some rows and -inf in others."""
    g = inputs.generator(seed + 37)
    for dtype in (torch.float32, torch.float64):
        logits = inputs.normal(g, (64, 9), 2.0)
        cols = inputs.permutation(g, 9)
        for r in range(0, 64, 4):  # every fourth row: its maximum twice
            top = float(logits[r].max()) + 1.0
            logits[r, cols[r % 9]] = top
            logits[r, cols[(r + 3) % 9]] = top
        logits[1::4, cols[0]] = -math.inf
        yield dtype, logits.to(dtype)


def _sample_inputs(seed):
    for _dtype, logits in _greedy_inputs(seed):
        yield (logits, 0.0, seed)
    rows = _fixed_logits(seed).repeat(SAMPLE_ROWS, 1).float()
    for i, t in enumerate(TEMPERATURES):
        yield (rows, t, seed * 7 + i)


def _ids_result(out, rows, vocab, *, strict):
    """The learner's token ids as int64 of shape [rows]. ``strict`` (the greedy check, the one
    that judges the type): a plain int64 tensor of shape [rows]; else any integer tensor of
    shape [rows] or [rows, 1]."""
    if not strict and type(out) is torch.Tensor and out.dim() == 2 and out.shape[-1] == 1:
        out = out.reshape(-1)
    out = compare.plain_tensor(out, name=SAMPLE, shape=(rows,))
    if out.dtype.is_floating_point or out.dtype == torch.bool or out.is_complex():
        messages.fail(_("`{name}` returned a tensor of dtype {dtype}; token ids are integers (torch.long).").format(
            name=SAMPLE, dtype=out.dtype), _("Return the ids themselves, e.g. what torch.multinomial gives."))
    if strict and out.dtype != torch.int64:
        messages.fail(_("`{name}` returned dtype {dtype}; token ids are int64 (torch.long).").format(
            name=SAMPLE, dtype=out.dtype), _("torch.argmax and torch.multinomial give int64 already."))
    ids = captured.clone(captured.detach(out)).to(device="cpu", dtype=torch.int64)
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= vocab):
        messages.fail(_("`{name}` returned ids outside 0 .. {last}.").format(name=SAMPLE, last=vocab - 1),
                      _("There is one id per row, an index into the row's {vocab} logits.").format(vocab=vocab))
    return ids


def _call_sampler(fn, logits, temperature, seed, *, strict=False):
    out = C.call(fn, (captured.clone(logits), temperature, seed), name=SAMPLE, forbidden=FORBIDDEN_SAMPLE)
    return _ids_result(out, logits.shape[0], logits.shape[1], strict=strict)


@watch.governed(FORBIDDEN_SAMPLE)
@runner.graded
def check_sample_greedy(fn, seed=0):
    """sample_next returns one int64 id per row, logits unchanged; at temperature 0 the argmax (the first of equal maxima)."""
    for dtype, logits in _greedy_inputs(seed):
        want = compare.f64(logits).argmax(dim=-1)
        draws = [_call_sampler(fn, logits, 0.0, s, strict=True) for s in (seed, seed + 1)]
        for s, got in zip((seed, seed + 1), draws):
            if torch.equal(got, want):
                continue
            x = compare.f64(logits)
            first_max = x == x.max(dim=-1, keepdim=True).values
            last = (first_max.shape[-1] - 1) - first_max.flip(-1).to(torch.int64).argmax(dim=-1)
            likely = None
            if not torch.equal(draws[0], draws[1]):
                likely = _("two seeds give different tokens at temperature 0: nothing is drawn there, the token is "
                           "logits.argmax(dim=-1).")
            elif torch.equal(got, x.argmin(dim=-1)):
                likely = _("this is the argmin: the most likely token has the largest logit.")
            elif torch.equal(got, last):
                likely = _("of equal maxima the last is taken; torch.argmax takes the first.")
            row = int((got != want).nonzero()[0, 0])
            messages.fail(_("At temperature 0, `{name}` must return each row's argmax.").format(name=SAMPLE),
                          _("{dtype}, seed {seed}: row {row} got {got}, expected {expected}.").format(
                       dtype=dtype, seed=s, row=row, got=int(got[row]), expected=int(want[row])), likely)
        _call_sampler(fn, logits, 1.0, seed, strict=True)  # a draw is one int64 id per row too
    inputs.inputs_left_alone(fn, _sample_inputs(seed), name=SAMPLE, labels=("logits",),
                             advice=_("Divide into a new tensor (logits / temperature, not logits /= temperature)."))


def _frequencies(ids, vocab):
    return torch.bincount(ids, minlength=vocab).double() / ids.numel()


def _distribution_message(freq, logits, t):
    """The known wrong distribution ``freq`` follows, if any."""
    finite = torch.isfinite(logits)
    candidates = (
        (_("the temperature is not used: the draw follows softmax(logits)."), torch.softmax(logits, -1)),
        (_("the logits are multiplied by the temperature; they are divided: softmax(logits / temperature)."),
         torch.softmax(logits * t, -1)),
        (_("at temperature > 0 the argmax is taken; the token is drawn from softmax(logits / temperature)."),
         F.one_hot(logits.argmax(), logits.numel()).double()),
        (_("every possible token is drawn equally often: the draw follows softmax(logits / temperature)."),
         finite.double() / finite.sum()),
    )
    for label, p in candidates:
        if float((freq - p).abs().max()) <= SAMPLE_BOUND and float((torch.softmax(logits / t, -1) - p).abs().max()) > 2 * SAMPLE_BOUND:
            return label
    return None


@watch.governed(FORBIDDEN_SAMPLE)
@runner.graded
def check_sample_distribution(fn, seed=0):
    """sample_next draws from softmax(logits / temperature): token frequencies within 0.026 over 20,000 rows, never a token of logit -inf."""
    logits = _fixed_logits(seed)
    rows = logits.repeat(SAMPLE_ROWS, 1).float()
    for i, t in enumerate(TEMPERATURES):
        ids = _call_sampler(fn, rows, t, seed * 7 + i)
        freq = _frequencies(ids, logits.numel())
        want = torch.softmax(logits / t, -1)
        dead = int(ids.eq(int(logits.argmin())).sum())
        where = _("temperature {t}, {n} rows of the logits {logits}").format(
            t=messages.number(t), n=messages.number(SAMPLE_ROWS, ","), logits="[" + ", ".join(messages.number(float(v), "g") for v in logits) + "]")
        if dead:
            messages.fail(_("`{name}` drew a token whose logit is -inf (probability 0).").format(name=SAMPLE),
                          _("{where}: token {token} was drawn {count} times.").format(
                              where=where, token=int(logits.argmin()), count=messages.number(dead, ",")),
                          _("the probabilities are softmax(logits / temperature), which gives -inf exactly 0; "
                            "nothing may be added to them."))
        gap = (freq - want).abs()
        k = int(gap.argmax())
        if float(gap[k]) <= SAMPLE_BOUND:
            continue
        messages.fail(_("`{name}`'s draws do not follow softmax(logits / temperature).").format(name=SAMPLE),
                      _("{where}: token {token} came {got} of the time, expected {expected} (allowed: {bound} either "
                        "way).").format(where=where, token=k, got=messages.number(float(freq[k]), ".4f"),
                                        expected=messages.number(float(want[k]), ".4f"),
                                        bound=messages.number(SAMPLE_BOUND)),
                      _distribution_message(freq, logits, t))


@watch.governed(FORBIDDEN_SAMPLE)
@runner.graded
def check_sample_seed(fn, seed=0):
    """sample_next is reproducible: the same seed gives the same tokens, another seed other tokens."""
    # 4,000 identical rows at temperature 1: a draw that depends on the seed differs between
    # two seeds in about 2,600 rows
    rows = _fixed_logits(seed).repeat(4000, 1).float()
    first = _call_sampler(fn, rows, 1.0, seed + 100)
    again = _call_sampler(fn, rows, 1.0, seed + 100)
    if not torch.equal(first, again):
        messages.fail(_("Two calls of `{name}` with the same seed drew different tokens.").format(name=SAMPLE),
                      _("{n} rows at temperature 1: {count} of them differ.").format(
                          n=messages.number(rows.shape[0], ","), count=messages.number(int((first != again).sum()), ",")),
                      _("the seed is not used for the draw: make a generator, torch.Generator().manual_seed(seed), and "
                        "pass it to torch.multinomial(..., generator=g)."))
    if bool((first == first[0]).all()):
        return  # identical rows, one token: nothing is drawn, which the distribution check judges
    other = _call_sampler(fn, rows, 1.0, seed + 101)
    if torch.equal(first, other):
        messages.fail(_("Two calls of `{name}` with different seeds drew the same tokens.").format(name=SAMPLE),
                      _("{n} rows at temperature 1, seeds {a} and {b}.").format(
                          n=messages.number(rows.shape[0], ","), a=seed + 100, b=seed + 101),
                      _("the draw does not depend on the seed: seed the generator with the seed argument."))
