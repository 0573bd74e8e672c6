"""The training chapter (book/09_andrea_at_work): every glued number recomputed, and the
sentences that read the measurements checked against them.

Part of the ladder is trained again here, from andrea_ref, outside the chapter's kernel:
each rung once, the seeds taken in turn, so every rung and every seed is trained again
(``RETRAINED``). Those runs must give the validation curves the chapter glued for them
(``aw_ladder_val_losses``, every run's); the rest of the curves are taken from the chapter
only once they do. From the curves, the bands, the reference levels, the samples and the
exercises' numbers are recomputed with code of this test's own (Counter for the entropy,
a hand-written greedy loop, softmax of z / tau), so a mistake in the chapter's cells or in
the helpers they call shows up as a mismatch. A glued name without a recipe fails, as in
tests/test_book_glue.py.
"""
from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing
import statistics
from collections import Counter
from functools import lru_cache

import pytest
import torch

from andrea_ref import ANDREA_12M, ANDREA_120M, AndreaModel, count_parameters
from andrea_ref import ladder as L
from andrea_ref.corpus import TINY_SHAKESPEARE, load_corpus
from andrea_ref.train import VAL_SEED, TrainResult
from book_values import close, glued

CHAPTER = "09_andrea_at_work"
pytestmark = pytest.mark.slow


# the runs trained again: the baseline with seed 0 (its weights are the samples' model),
# then every other rung with the next seed in turn
RETRAINED = [(rung, L.SEEDS[i % len(L.SEEDS)])
             for i, rung in enumerate([L.BASELINE, *(r for r in L.RUNGS if r != L.BASELINE)])]


@lru_cache(maxsize=None)
def retrained() -> dict:
    """{(rung, seed): TrainResult} of RETRAINED, two at a time in fresh processes."""
    keep = [job == (L.BASELINE, 0) for job in RETRAINED]
    with cf.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        done = list(pool.map(L.run_rung, *zip(*RETRAINED), keep))
    return dict(zip(RETRAINED, done))


@lru_cache(maxsize=None)
def ladder() -> dict:
    """{rung: [TrainResult of each seed]}: the runs trained again here, and the chapter's
    glued curves of the others once those agree with them."""
    curves = glued(CHAPTER).get("aw_ladder_val_losses")
    if not isinstance(curves, dict):
        pytest.fail(f"aw_ladder_val_losses: expected {{rung: [validation curve of each seed]}}, got {curves!r:.200}")
    assert sorted(curves) == sorted(L.RUNGS) and all(len(c) == len(L.SEEDS) for c in curves.values()), curves.keys()
    again = retrained()
    differ = {}
    for (rung, seed), result in again.items():
        book = curves[rung][L.SEEDS.index(seed)]
        if len(book) != len(result.val_losses) or not all(close(a, b) for a, b in zip(book, result.val_losses)):
            differ[rung, seed] = (book, result.val_losses)
    assert not differ, f"runs trained again here differ from the chapter's curves (chapter, here): {differ}"
    steps = again[RETRAINED[0]].eval_steps
    return {rung: [again.get((rung, seed)) or TrainResult(eval_steps=steps, val_losses=list(vals), train_losses=[])
                   for seed, vals in zip(L.SEEDS, per_seed)]
            for rung, per_seed in ((r, curves[r]) for r in L.RUNGS)}


def bands(results):
    finals = [r.final_val_loss for r in results]
    return min(finals), statistics.median(finals), max(finals)


def windows(ids, context, n):
    """The chapter's fixed windows, drawn here with torch.randint directly."""
    starts = torch.randint(0, ids.numel() - context, (n, 1), generator=torch.Generator().manual_seed(VAL_SEED))
    w = ids[starts + torch.arange(context + 1)]
    return w[:, :-1], w[:, 1:]


def mean_loss(model, x, y):
    with torch.no_grad():
        logp = torch.log_softmax(model(x).double(), -1)
    return float(-logp.gather(-1, y[..., None]).mean())


@lru_cache(maxsize=None)
def recipe():
    text = TINY_SHAKESPEARE.read_text(encoding="utf-8")
    corpus = load_corpus()
    n_val = round(0.1 * len(text))
    train_text = text[:-n_val]
    counts = Counter(text)
    unigram = -sum(c / len(text) * math.log(c / len(text)) for c in counts.values())
    model_config, train_config = L.BASE_MODEL, L.BASE_TRAIN
    ctx = model_config.context_length
    n_params = sum(p.numel() for p in AndreaModel(model_config).parameters())
    lad = ladder()
    values = {
        "aw_n_chars": len(text), "aw_n_lines": text.count("\n"), "aw_vocab": len(counts),
        "aw_n_train": len(text) - n_val, "aw_n_val": n_val, "aw_val_share": n_val / len(text),
        "aw_uniform": math.log(len(counts)), "aw_unigram": unigram,
        "aw_n_layer": model_config.n_layer, "aw_d_model": model_config.d_model, "aw_n_head": model_config.n_head,
        "aw_context": ctx, "aw_params": n_params,
        "aw_params_12m_ratio": count_parameters(ANDREA_12M).total / n_params,
        "aw_steps": train_config.steps, "aw_batch": train_config.batch_size, "aw_lr": train_config.lr,
        "aw_warmup": L.WARMUP_STEPS, "aw_eval_every": train_config.eval_every,
        "aw_eval_windows": train_config.eval_windows,
        "aw_chars_seen": train_config.steps * train_config.batch_size * ctx,
        "aw_share_seen": train_config.steps * train_config.batch_size * ctx / (len(text) - n_val),
        "aw_n_seeds": len(L.SEEDS), "aw_n_rungs": len(L.RUNGS), "aw_n_runs": len(L.RUNGS) * len(L.SEEDS),
        "aw_cpu_median": None,  # a measurement of time: checked for plausibility below
        "aw_ladder_val_losses": None,  # checked against the runs trained again, in ladder()
        "aw_init_std": model_config.init_std,
    }
    for rung, results in lad.items():
        for key, v in zip(("min", "median", "max"), bands(results)):
            values[f"aw_{rung}_{key}"] = v
    base = lad[L.BASELINE]
    steps = base[0].eval_steps
    values["aw_base_step0"] = statistics.median(r.val_losses[0] for r in base)
    values["aw_ex_step0_gap"] = abs(values["aw_base_step0"] - values["aw_uniform"])
    values["aw_base_below_step"] = next(s for i, s in enumerate(steps) if all(r.val_losses[i] < unigram for r in base))
    values["aw_first_eval"] = steps[1]
    # the unigram model of the training split on the validation windows
    train_counts = Counter(train_text)
    val_x, val_y = windows(corpus.val, ctx, train_config.eval_windows)
    chars = sorted(counts)
    unigram_val = -statistics.fmean(math.log(train_counts[chars[int(i)]] / len(train_text)) for i in val_y.flatten())
    values["aw_unigram_val"] = unigram_val
    values["aw_no_residual_spread"] = max(abs(v - unigram_val) for r in lad["no_residual"] for v in r.val_losses[1:])

    def median_at(rung, i):
        return statistics.median(r.val_losses[i] for r in lad[rung])
    values["aw_post_gap_first"] = median_at("post_norm", 1) - median_at("pre_norm", 1)
    values["aw_post_gap_last"] = median_at("post_norm", -1) - median_at("pre_norm", -1)
    # the samples: the trained seed-0 baseline, its distribution after the prompt, greedy text
    trained = AndreaModel(model_config)
    trained.load_state_dict(base[0].state_dict)
    prompt = torch.tensor([chars.index(c) for c in "ROMEO:\n"])
    with torch.no_grad():
        logits = trained(prompt[None])[0, -1].double()
    top = int(logits.argmax())
    values["aw_top_char"] = chars[top]
    for name, tau in (("aw_p_tau2", 2.0), ("aw_p_tau1", 1.0), ("aw_p_tau05", 0.5)):
        values[name] = float(torch.softmax(logits / tau, -1)[top])
    ids = prompt.tolist()
    with torch.no_grad():
        for _ in range(240):
            ids.append(int(trained(torch.tensor([ids[-ctx:]]))[0, -1].argmax()))
    tail = "".join(chars[i] for i in ids)[-120:]
    values["aw_greedy_period"] = next((p for p in range(1, 60) if tail[p:] == tail[:-p]), None)
    # exercises: training windows against validation windows; the cost of untying
    train_x, train_y = windows(corpus.train, ctx, train_config.eval_windows)
    values["aw_ex_train_loss"] = mean_loss(trained, train_x, train_y)
    values["aw_ex_val_loss"] = mean_loss(trained, val_x, val_y)
    val_text = text[-n_val:]
    for name, part in (("aw_ex_train_entropy", train_text), ("aw_ex_val_entropy", val_text)):
        values[name] = -sum(c / len(part) * math.log(c / len(part)) for c in Counter(part).values())
    extra = model_config.d_model * len(counts)
    values["aw_untied_extra"] = extra
    values["aw_untied_share"] = extra / n_params
    c120 = count_parameters(ANDREA_120M)
    values["aw_untied_extra_120m"] = ANDREA_120M.d_model * ANDREA_120M.vocab_size
    values["aw_untied_share_120m"] = values["aw_untied_extra_120m"] / c120.total
    return values


def test_glued_numbers_match_a_fresh_ladder():
    values = glued(CHAPTER)
    expected = recipe()
    unknown = sorted(set(values) - set(expected))
    assert not unknown, f"glued names without a recipe in this test: {unknown}"
    missing = sorted(set(expected) - set(values))
    assert not missing, f"recipes for names the chapter no longer glues: {missing}"
    # float32 losses summed in another order here (float64 log-softmax): a small tolerance
    wrong = {k: (values[k], v) for k, v in expected.items()
             if v is not None and not (close(values[k], v) or (isinstance(v, float) and abs(values[k] - v) < 2e-5))}
    assert not wrong, f"glued value != recomputed value: {wrong}"
    assert 0.5 < values["aw_cpu_median"] < 600


def test_the_chapters_reading_of_the_ladder_holds():
    v, lad = recipe(), ladder()
    base = L.band(lad[L.BASELINE])

    def apart_above(rung):
        return L.band(lad[rung])["min"] > base["max"]
    # "every seed is below the unigram entropy" by the first evaluation
    assert v["aw_base_below_step"] == v["aw_first_eval"]
    # no residuals: the unigram level throughout, the largest difference of all
    assert v["aw_no_residual_spread"] < 0.03
    assert max(L.band(r)["median"] for r in lad.values()) == L.band(lad["no_residual"])["median"]
    # no LayerNorm: behind at every evaluation, well above at the end
    for i in range(1, len(lad[L.BASELINE][0].eval_steps)):
        assert min(r.val_losses[i] for r in lad["no_layernorm"]) > max(r.val_losses[i] for r in lad[L.BASELINE])
    assert L.band(lad["no_layernorm"])["min"] - base["max"] > 0.1
    # the baseline "keeps falling"; post-norm's median stays above it, the warm-up starts highest
    def medians(rung):
        return [statistics.median(vals) for vals in zip(*(r.val_losses for r in lad[rung]))][1:]
    assert all(a > b for a, b in zip(medians("pre_norm"), medians("pre_norm")[1:]))
    assert all(p > b for p, b in zip(medians("post_norm"), medians("pre_norm")))
    assert medians("post_norm_warmup")[0] > medians("post_norm")[0]
    # post-norm: slower start, the gap narrows, just above at the end
    assert v["aw_post_gap_first"] > v["aw_post_gap_last"] > 0
    assert apart_above("post_norm") and L.band(lad["post_norm"])["min"] - base["max"] < 0.05
    # the warm-up does not help here: its band lies above post-norm's without one
    assert L.band(lad["post_norm_warmup"])["min"] > L.band(lad["post_norm"])["max"]
    # ReLU, MLP ratio 8 and untied overlap the baseline; ratio 2 is above it, with the widest band
    for rung in ("relu", "mlp_ratio_8", "untied"):
        assert L.overlaps(L.band(lad[rung]), base), rung
    assert apart_above("mlp_ratio_2")
    widths = {r: L.band(res)["max"] - L.band(res)["min"] for r, res in lad.items()}
    assert max(widths, key=widths.get) == "mlp_ratio_2"
    # "every curve but the one without residuals is still falling at the last step"
    for rung, results in lad.items():
        if rung != "no_residual":
            assert statistics.median(r.val_losses[-1] for r in results) < \
                statistics.median(r.val_losses[-2] for r in results), rung
    # samples: greedy loops; the temperature sharpens and flattens the favourite
    assert v["aw_greedy_period"] is not None
    assert v["aw_p_tau2"] < v["aw_p_tau1"] < v["aw_p_tau05"]
    # exercises: a little lower on training text; tying saves a larger share in ANDREA-120M
    assert 0 < v["aw_ex_val_loss"] - v["aw_ex_train_loss"] < 0.1
    assert v["aw_untied_share_120m"] > v["aw_untied_share"]
    assert v["aw_ex_step0_gap"] < 0.05
    assert v["aw_ex_val_entropy"] > v["aw_ex_train_entropy"]


def test_the_chapter_samples_the_weights_the_seed_starts_from():
    """The chapter's 'untrained' model (torch.manual_seed(0); AndreaModel(config)) is the
    model the seed-0 run starts from: its step-0 validation loss is the run's first value."""
    corpus = load_corpus()
    torch.manual_seed(0)
    untrained = AndreaModel(L.BASE_MODEL)
    x, y = windows(corpus.val, L.BASE_MODEL.context_length, L.BASE_TRAIN.eval_windows)
    assert abs(mean_loss(untrained, x, y) - ladder()[L.BASELINE][0].val_losses[0]) < 2e-5
