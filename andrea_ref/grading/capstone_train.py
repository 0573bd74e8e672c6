"""The checks of ``train(forward, params, batches, lr, n_head)`` (see :mod:`.capstone`):
the reference loss and steps of gradient descent with the classic slips of each, and
ANDREA-tiny's learning task on Tiny Shakespeare. The learner's ``train`` is handed the
reference model (:data:`FORWARD`), so a slip in ``andrea_tiny`` costs only its own points."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..config import tiny_config
from ..corpus import get_windows, load_corpus, unigram_loss
from ..model import forward_from_params, init_params
from ..train import fixed_windows
from . import core as C, captured, compare, inputs, messages, runner, watch
from .capstone_model import model_params, random_ids
from .capstone_rules import ADVICE, FORBIDDEN_TRAIN, TRAIN
from .messages import _

# The model the train checks hand to the learner's train (a PROVIDED function of watch).
FORWARD = forward_from_params

_LOSS_MODEL = (11, 8, 2, 1, 20, 8)  # vocab, d_model, n_head, n_layer, mlp_dim, context
_STEP_MODEL = (9, 8, 2, 2, 12, 6)


def _train_setup(seed, model, steps, batch):
    """(params, batches, n_head): float64 parameters of a small model and ``steps`` batches of
    ``batch`` windows of context + 1 token ids."""
    vocab, d, n_head, n_layer, mlp_dim, context = model
    g = inputs.generator(seed + 23)
    params = model_params(g, vocab, d, n_layer, mlp_dim, context)
    return params, random_ids(g, vocab, (steps, batch, context + 1)), n_head


def cross_entropy(forward, params, window, n_head):
    """The training loss of one batch of windows: the mean cross-entropy (nats) of every
    position's prediction of the next token."""
    logits = forward(window[:, :-1], params, n_head)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), window[:, 1:].reshape(-1))


def _loss_variants(params, window, n_head):
    p = {k: compare.f64(v) for k, v in params.items()}
    x, y = window[:, :-1], window[:, 1:]
    logits = forward_from_params(x, p, n_head)
    flat, target = logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
    mean = F.cross_entropy(flat, target)
    return [
        (_("each position is scored against its own token: the target of position t is the next "
           "token, so x = batch[:, :-1] and the targets are batch[:, 1:]."),
         lambda: F.cross_entropy(flat, x.reshape(-1))),
        (_("the loss is summed over the positions; it is their mean (F.cross_entropy's default), in nats "
           "per token."), lambda: F.cross_entropy(flat, target, reduction="sum")),
        (_("the loss is in bits (log base 2); it is in nats, the natural log F.cross_entropy uses."),
         lambda: mean / math.log(2)),
        (_("only the last position is scored; every position predicts its next token."),
         lambda: F.cross_entropy(logits[:, -1], y[:, -1])),
        (_("softmax is applied before F.cross_entropy, which applies it itself: pass the logits."),
         lambda: F.cross_entropy(torch.softmax(flat, dim=-1), target)),
        (_("the loss is exp(cross-entropy), the perplexity; return the cross-entropy itself."),
         lambda: torch.exp(mean)),
    ]


def _train_hint(error, where, args):
    text = str(error)
    if "longer than the context_length" in text:
        return _("the model is given the whole window: its input is batch[:, :-1], and the last token "
                 "is only a target.")
    if "does not require grad" in text or "does not have a grad_fn" in text:
        return _("the parameters do not require gradients: call p.requires_grad_() on each tensor of params "
                 "before the forward pass.")
    return None


def _losses(out, steps):
    """The learner's losses as float64 of shape [steps] (a trailing 1 allowed)."""
    if isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[-1] == 1:
        out = out.reshape(-1)
    return compare.values_result(out, name=TRAIN, shape=(steps,))


@watch.governed(FORBIDDEN_TRAIN)
@runner.graded
def check_train_loss(fn, seed=0):
    """train returns one loss per batch, the first the mean cross-entropy of the next token under the initial parameters."""
    params, batches, n_head = _train_setup(seed, _LOSS_MODEL, 2, 3)
    for steps in (1, 2):
        keep = batches[:steps].clone()
        out = C.call(fn, (FORWARD, inputs.copy_args((params,))[0], keep, 0.1, n_head), name=TRAIN,
                     forbidden=FORBIDDEN_TRAIN, hint=_train_hint)
        if not compare.same(keep, batches[:steps]):
            inputs.fail_changed(TRAIN, "batches", _(ADVICE))
        losses = _losses(out, steps)
        want = cross_entropy(forward_from_params, params, batches[0], n_head)
        tol = compare.tol_for(torch.float64, result=losses)
        first = captured.reshape(compare.f64(losses), (-1,))[:1]
        if compare.close(first, want.reshape(1), tol):
            continue
        near = (max(tol[0], 1e-6), max(tol[1], 1e-6))
        variants = [(label, (lambda compute=compute: compute().reshape(1))) for label, compute in
                    _loss_variants(params, batches[0], n_head)]
        messages.fail(_("The first loss `{name}` returns is not the mean cross-entropy of the next token under the "
                        "initial parameters.").format(name=TRAIN),
                      _("{steps} batch(es) of shape {shape}: {mismatch}.").format(
                          steps=steps, shape=tuple(batches.shape[1:]),
                          mismatch=compare.mismatch(first, want.reshape(1), tol)),
                      compare.diagnose(first, variants, near, None))


def reference_steps(params, batches, lr, n_head, *, ascent=False, accumulate=False, momentum=0.0):
    """The parameters after one step of gradient descent per batch (float64): the
    reference, and the classic variants of the update the diagnosis compares with."""
    p = {k: compare.f64(v).clone() for k, v in params.items()}
    total = {k: torch.zeros_like(v) for k, v in p.items()}
    velocity = {k: torch.zeros_like(v) for k, v in p.items()}
    for window in batches:
        leaves = {k: v.clone().requires_grad_(True) for k, v in p.items()}
        loss = cross_entropy(forward_from_params, leaves, window, n_head)
        grads = dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))
        for k in p:
            g = grads[k]
            if accumulate:
                total[k] = total[k] + g
                g = total[k]
            if momentum:
                velocity[k] = momentum * velocity[k] + g
                g = velocity[k]
            p[k] = p[k] + lr * g if ascent else p[k] - lr * g
    return p


# a call of train is given the per-call time limit for every STEPS_PER_CALL steps it is asked
# for (150 steps: three times the limit); an honest loop takes about 1 s for 150 steps here
STEPS_PER_CALL = 50


def _after(fn, params, batches, lr, n_head):
    """``params`` as the learner's train leaves them (a fresh copy is passed)."""
    passed = inputs.copy_args((params,))[0]
    keep = batches.clone()
    C.call(fn, (FORWARD, passed, keep, lr, n_head), name=TRAIN, forbidden=FORBIDDEN_TRAIN, hint=_train_hint,
           work=max(1.0, len(batches) / STEPS_PER_CALL))
    if not compare.same(keep, batches):
        inputs.fail_changed(TRAIN, "batches", _(ADVICE))
    if sorted(map(str, passed)) != sorted(params):
        messages.fail(_("After `{name}`, params holds other names than before.").format(name=TRAIN),
                      _("train updates the tensors params holds; it neither adds nor removes any."))
    for k, v in passed.items():
        if not isinstance(v, torch.Tensor) or tuple(v.shape) != tuple(params[k].shape):
            messages.fail(_("After `{name}`, params[{key}] is no longer a tensor of shape {shape}.").format(
                name=TRAIN, key=repr(k), shape=tuple(params[k].shape)), _(ADVICE))
    return {k: compare.f64(v) for k, v in passed.items()}


def _worst(got, want, tol):
    """(name, mismatch) of the parameter furthest from ``want``, or None if all are close."""
    for k in want:
        m = compare.mismatch(got[k], want[k], tol)
        if m is not None:
            return k, m
    return None


def _step_message(before, after, want, grads, lr, positions):
    """What one step did, named only when it is what a known slip computes (``want``: the
    reference's step; ``positions``: the batch's batch x seq_len scored positions)."""
    unchanged = [k for k in before if compare.same(before[k], after[k])]
    if len(unchanged) == len(before):
        return _("params did not change: train must update the tensors params holds (in place, "
                 "p -= lr * p.grad under torch.no_grad(), or by putting the new tensors into the dict).")
    moved = [k for k in unchanged if not compare.close(want[k], before[k], compare.FLOAT64_TOL)]
    if moved:
        return _("these parameters never change: {names}. Every tensor in params is trained, the embeddings "
                 "and ln_f included.").format(names=", ".join(moved[:6]))
    step = torch.cat([(after[k] - before[k]).reshape(-1) for k in before])
    grad = torch.cat([grads[k].reshape(-1) for k in before])
    if compare.close(step, -lr * grad / (grad.abs() + 1e-8), (1e-3, 1e-7)):
        return _("the step is Adam's (each parameter moves by about lr, whatever its gradient): here each step "
                 "is plain gradient descent, p - lr * grad.")
    scale = float(-(step @ grad) / (grad @ grad))
    if compare.close(step, -scale * grad, (1e-6, 1e-9)) and abs(scale - lr) > 1e-6 * abs(lr):
        if abs(scale + lr) <= 1e-6 * abs(lr):
            return _("the step goes uphill: p + lr * grad; gradient descent subtracts, p - lr * grad.")
        if abs(scale - lr * positions) <= 1e-6 * abs(lr * positions):
            return _("each step is {n} times too large, the number of scored positions (batch x seq_len): the loss "
                     "is summed over the positions; it is their mean.").format(n=positions)
        return _("each step moves the parameters by {scale} times the gradient, not lr = {lr}: use the "
                 "lr argument.").format(scale=messages.number(scale, ".6g"), lr=messages.number(lr, ".6g"))
    return None


@watch.governed(FORBIDDEN_TRAIN)
@runner.graded
def check_train_update(fn, seed=0):
    """train changes every parameter by one step of gradient descent per batch, p <- p - lr * dloss/dp."""
    params, batches, n_head = _train_setup(seed, _STEP_MODEL, 3, 4)
    lr = float(inputs.uniform(inputs.generator(seed + 29), (1,), 0.05, 0.5)[0])
    tol = compare.FLOAT64_TOL
    for steps in (1, 3):
        got = _after(fn, params, batches[:steps], lr, n_head)
        want = reference_steps(params, batches[:steps], lr, n_head)
        worst = _worst(got, want, tol)
        if worst is None:
            continue
        if steps == 1:
            leaves = {k: compare.f64(v).clone().requires_grad_(True) for k, v in params.items()}
            loss = cross_entropy(forward_from_params, leaves, batches[0], n_head)
            grads = dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))
            positions = batches.shape[1] * (batches.shape[2] - 1)
            likely = _step_message({k: compare.f64(v) for k, v in params.items()}, got, want, grads, lr, positions)
        else:
            likely = None
            for label, kwargs in (
                    (_("the gradients add up from step to step: clear them after each step (p.grad = None, or "
                       "zero_grad()), or each step also takes every earlier batch's gradient again."),
                     {"accumulate": True}),
                    (_("the step keeps a momentum of earlier gradients: here each step is plain gradient "
                       "descent on this batch's gradient, p - lr * grad."), {"momentum": 0.9})):
                if _worst(got, reference_steps(params, batches[:steps], lr, n_head, **kwargs), (1e-6, 1e-6)) is None:
                    likely = label
                    break
        messages.fail(_("After {steps} step(s) with lr = {lr}, params is not what gradient descent gives.").format(
                          steps=steps, lr=messages.number(lr, ".4g")),
                      _("params[{key}]: {mismatch}.").format(key=repr(worst[0]), mismatch=worst[1]), likely)


# ANDREA-tiny on Tiny Shakespeare: what check_train_learns trains (one block, 150 steps)
LEARN_STEPS, LEARN_BATCH, LEARN_LR, LEARN_MARGIN = 150, 16, 0.3, 0.25


def learning_task(seed):
    """(params, batches, baseline, (val_x, val_y)) of check_train_learns: ANDREA-tiny's initial
    parameters (float32), ``LEARN_STEPS`` batches of training windows, the unigram
    baseline (nats per character on the validation text) and the validation windows."""
    corpus = load_corpus()
    cfg = tiny_config(corpus.vocab_size)
    params = init_params(cfg, seed)
    g = inputs.generator(seed + 31)
    batches = torch.stack([get_windows(corpus.train, LEARN_BATCH, cfg.context_length + 1, g)
                           for _step in range(LEARN_STEPS)])
    baseline = unigram_loss(corpus.train, corpus.val)
    return params, batches, baseline, fixed_windows(corpus.val, cfg.context_length, 256)


@torch.no_grad()
def validation_loss(params, windows, n_head=tiny_config(1).n_head):
    """Mean cross-entropy (nats per character) of the model ``params`` on the validation windows."""
    x, y = windows
    logits = forward_from_params(x, {k: v.detach().float() for k, v in params.items()}, n_head)
    return float(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1)))


@watch.governed(FORBIDDEN_TRAIN)
@runner.left_to_grader  # 150 steps of training: the grader's independent check runs them once
@runner.graded
def check_train_learns(fn, seed=0):
    """train teaches ANDREA-tiny: 150 steps on Tiny Shakespeare bring its validation loss below the unigram baseline minus 0.25 nats."""
    params, batches, baseline, val = learning_task(seed)
    before = validation_loss(params, val)
    got = _after(fn, params, batches, LEARN_LR, tiny_config(1).n_head)
    after = validation_loss(got, val)
    bound = baseline - LEARN_MARGIN
    if math.isfinite(after) and after < bound:
        return
    if all(compare.same(compare.f64(params[k]), got[k]) for k in params):
        likely = _("params did not change: train must update the tensors params holds (in place, "
                   "p -= lr * p.grad under torch.no_grad(), or by putting the new tensors into the dict).")
        state = _("Before training it was {before}.")
    else:
        # a loss that rose or went non-finite has many causes: the check of the steps
        # themselves (check_train_update) names the slip where it can, this one does not guess
        likely = None
        state = (_("Before training it was {before}; the trained parameters hold nan or inf.")
                 if not all(compare.all_finite(v) for v in got.values()) else
                 _("Before training it was {before}; the loss rose.") if after > before else
                 _("Before training it was {before}."))
    messages.fail(_("After {steps} steps (batches of {batch}, lr = {lr}), ANDREA-tiny's validation loss is "
                    "{after} nats per character; it must be below {bound} (the unigram baseline {baseline} minus "
                    "{margin}).").format(steps=LEARN_STEPS, batch=LEARN_BATCH, lr=messages.number(LEARN_LR),
                                         after=messages.number(after, ".4g"), bound=messages.number(bound, ".4g"),
                                         baseline=messages.number(baseline, ".4g"),
                                         margin=messages.number(LEARN_MARGIN)),
                  state.format(before=messages.number(before, ".4g")) + " " +
                  _("The check of the steps themselves (train's previous graded cell) shows where they differ from "
                    "gradient descent."), likely)
