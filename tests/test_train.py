"""Training, sampling and the corpus (andrea_ref.corpus, .train, .sampling, .ladder)."""
from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

from andrea_ref import AndreaModel, Block, ModelConfig, count_parameters, mlp
from andrea_ref import ladder as L
from andrea_ref.corpus import (TINY_SHAKESPEARE, char_corpus, get_batch, load_corpus, uniform_loss,
                               unigram_entropy)
from andrea_ref.sampling import generate, next_token_probs, sample_next
from andrea_ref.train import TrainConfig, learning_rate, train_model

TINY = ModelConfig(name="t", n_layer=1, n_head=2, d_model=16, vocab_size=65, context_length=16)
SHORT = TrainConfig(steps=12, batch_size=4, lr=3e-3, eval_every=4, eval_windows=8)


# ---- the corpus -------------------------------------------------------------------------

pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def test_corpus_is_tiny_shakespeare_cut_into_a_fixed_split():
    text = TINY_SHAKESPEARE.read_text(encoding="utf-8")
    c = load_corpus()
    assert c.vocab_size == len(set(text)) == 65
    assert c.train.numel() + c.val.numel() == len(text)
    assert c.val.numel() == round(0.1 * len(text))
    # a cut, not a shuffle: the validation split is the end of the text
    assert c.decode(c.val[-40:]) == text[-40:]
    assert c.decode(c.train[:40]) == text[:40]
    assert torch.equal(c.encode(text[1000:1100]), c.train[1000:1100])


def test_corpus_copy_is_checked_and_bad_text_is_refused():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        load_corpus().encode("café")
    with pytest.raises(ValueError, match="val_fraction"):
        char_corpus("abcdef", val_fraction=1.5)
    with pytest.raises(ValueError, match="text"):
        char_corpus("a")


def test_unigram_entropy_is_the_entropy_of_the_character_frequencies():
    text = TINY_SHAKESPEARE.read_text(encoding="utf-8")
    counts = Counter(text)
    by_hand = -sum(n / len(text) * math.log(n / len(text)) for n in counts.values())
    c = load_corpus()
    assert math.isclose(unigram_entropy(torch.cat([c.train, c.val])), by_hand, rel_tol=1e-12)
    # bounds: 0 for one repeated id, ln(V) for equally frequent ids
    assert unigram_entropy(torch.zeros(10, dtype=torch.long)) == 0.0
    assert math.isclose(unigram_entropy(torch.arange(65).repeat(3)), uniform_loss(65), rel_tol=1e-12)
    assert 0 < by_hand < uniform_loss(65)
    with pytest.raises(TypeError, match="integer"):
        unigram_entropy(torch.zeros(3))


def test_batches_are_seeded_windows_and_targets_are_shifted_by_one():
    c = load_corpus()
    x, y = get_batch(c.train, 5, 16, torch.Generator().manual_seed(3))
    x2, y2 = get_batch(c.train, 5, 16, torch.Generator().manual_seed(3))
    assert x.shape == y.shape == (5, 16) and torch.equal(x, x2) and torch.equal(y, y2)
    assert torch.equal(x[:, 1:], y[:, :-1])
    with pytest.raises(ValueError, match="context"):
        get_batch(c.train[:10], 2, 16, torch.Generator())


# ---- sampling contracts -----------------------------------------------------------------

def test_temperature_zero_is_greedy_argmax_first_of_ties():
    logits = torch.randn(7, 65, generator=torch.Generator().manual_seed(0))
    assert torch.equal(sample_next(logits, 0), logits.argmax(-1))
    tied = torch.tensor([1.0, 3.0, 3.0, 0.0])
    assert int(sample_next(tied, 0)) == 1
    # greedy needs no generator and ignores it
    assert torch.equal(sample_next(logits, 0, torch.Generator().manual_seed(5)), logits.argmax(-1))


def test_small_temperatures_tend_to_greedy():
    logits = torch.randn(50, 65, generator=torch.Generator().manual_seed(1))
    two = logits.topk(2, dim=-1).values
    gap = float((two[:, 0] - two[:, 1]).min())          # the closest race between two tokens
    temps = (1.0, 0.3, 0.1, 0.01, gap / 20)
    top = [float(next_token_probs(logits, t).max(-1).values.min()) for t in temps]
    assert all(a < b for a, b in zip(top, top[1:])), top
    # at gap / 20 every other token is at most e^-20 as likely as the best one
    assert top[-1] > 1 - 64 * math.exp(-20)
    g = torch.Generator().manual_seed(2)
    assert torch.equal(sample_next(logits, gap / 20, g), logits.argmax(-1))
    # no overflow for a tiny temperature: one-hot, not NaN
    p = next_token_probs(torch.tensor([1000.0, 0.0, -1000.0]), 1e-30)
    assert p.tolist() == [1.0, 0.0, 0.0]


def test_temperature_one_samples_the_softmax():
    logits = torch.tensor([2.0, 1.0, 0.0, -1.0, 0.5])
    p = torch.softmax(logits, -1)
    assert torch.allclose(next_token_probs(logits, 1.0), p)
    assert torch.allclose(next_token_probs(logits, 0.5), torch.softmax(logits / 0.5, -1))
    n = 40_000
    draws = sample_next(logits.expand(n, -1), 1.0, torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=5).double() / n
    sigma = (p.double() * (1 - p.double()) / n).sqrt()
    assert ((freq - p.double()).abs() < 5 * sigma).all(), (freq, p)
    # a higher temperature flattens: the draws spread over more tokens
    assert next_token_probs(logits, 2.0).max() < p.max() < next_token_probs(logits, 0.5).max()


def test_sampling_is_reproducible_with_a_seed_and_needs_a_generator():
    torch.manual_seed(0)
    model = AndreaModel(TINY)
    prompt = torch.tensor([1, 2, 3])
    a = generate(model, prompt, 40, 1.0, torch.Generator().manual_seed(7))
    b = generate(model, prompt, 40, 1.0, torch.Generator().manual_seed(7))
    c = generate(model, prompt, 40, 1.0, torch.Generator().manual_seed(8))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert a.shape == (43,) and torch.equal(a[:3], prompt)
    with pytest.raises(TypeError, match="generator"):
        generate(model, prompt, 5, 1.0)
    for bad in (-0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="temperature"):
            sample_next(torch.zeros(3), bad, torch.Generator())
    with pytest.raises(TypeError, match="temperature"):
        sample_next(torch.zeros(3), True, torch.Generator())
    with pytest.raises(ValueError, match="prompt"):
        generate(model, torch.tensor([0.5]), 3, 0)


def test_greedy_generation_follows_the_argmax_and_crops_to_the_context():
    torch.manual_seed(0)
    model = AndreaModel(TINY)
    prompt = torch.arange(20) % 65                      # longer than context_length (16)
    out = generate(model, prompt, 6, temperature=0)
    ids = prompt.clone()
    with torch.no_grad():
        for _ in range(6):
            nxt = model(ids[-16:][None])[0, -1].argmax()
            ids = torch.cat([ids, nxt[None]])
    assert torch.equal(out, ids)
    batch = generate(model, prompt[None].repeat(2, 1), 6, temperature=0)
    assert batch.shape == (2, 26) and torch.equal(batch[0], out)


# ---- training ---------------------------------------------------------------------------

def test_a_short_run_is_deterministic_and_learns():
    a = train_model(TINY, SHORT, keep_state=True)
    b = train_model(TINY, SHORT, keep_state=True)
    assert a.train_losses == b.train_losses and a.val_losses == b.val_losses
    assert all(torch.equal(a.state_dict[k], b.state_dict[k]) for k in a.state_dict)
    assert a.eval_steps == [0, 4, 8, 12]
    # the untrained model is close to uniform, and training moves below it
    assert abs(a.val_losses[0] - uniform_loss(65)) < 0.05
    assert a.final_val_loss < a.val_losses[0] - 0.3
    other = train_model(TINY, SHORT.replace(seed=1))
    assert other.train_losses != a.train_losses


def test_warm_up_rises_linearly_then_holds():
    cfg = TrainConfig(lr=1e-3, warmup_steps=4)
    assert [learning_rate(s, cfg) for s in (1, 2, 4, 5, 100)] == [2.5e-4, 5e-4, 1e-3, 1e-3, 1e-3]
    assert learning_rate(1, TrainConfig(lr=1e-3)) == 1e-3


def test_a_diverging_run_is_reported_not_hidden():
    r = train_model(TINY, SHORT.replace(lr=1e12))
    if not r.diverged:
        pytest.skip("this learning rate did not make the loss overflow here")
    assert math.isnan(r.final_val_loss) and r.eval_steps == [0, 4, 8, 12]
    assert math.isnan(L.band([r])["median"])


def test_bad_training_arguments_are_named():
    with pytest.raises(ValueError, match="steps"):
        TrainConfig(steps=0)
    with pytest.raises(ValueError, match="lr"):
        TrainConfig(lr=-1.0)
    with pytest.raises(ValueError, match="vocab_size"):
        train_model(TINY.replace(vocab_size=10), SHORT)
    with pytest.raises(TypeError, match="model_config"):
        train_model("tiny", SHORT)


# ---- the model variants the ladder trains -------------------------------------------------

def test_no_layernorm_variant_has_no_layernorm_parameters():
    cfg = TINY.replace(norm_position="none")
    torch.manual_seed(0)
    model = AndreaModel(cfg)
    assert not any("ln" in name for name, _ in model.named_parameters())
    assert count_parameters(cfg).total == sum(p.numel() for p in model.parameters())
    assert count_parameters(cfg).n_layernorms == 0
    # a block without LayerNorm is x + attn(x), then + mlp(.)
    blk = Block(cfg)
    x = torch.randn(1, 5, 16)
    with torch.no_grad():
        h = x + blk.attn(x)
        assert torch.allclose(blk(x), h + blk.mlp(h), atol=1e-6)


def test_relu_variant_uses_relu_and_bad_activation_is_named():
    g = torch.Generator().manual_seed(0)
    x, w1, b1 = torch.randn(3, 8, generator=g), torch.randn(8, 12, generator=g), torch.randn(12, generator=g)
    w2, b2 = torch.randn(12, 8, generator=g), torch.randn(8, generator=g)
    assert torch.allclose(mlp(x, w1, b1, w2, b2, activation="relu"), torch.relu(x @ w1 + b1) @ w2 + b2)
    with pytest.raises(ValueError, match="activation"):
        ModelConfig(activation="swish")
    with pytest.raises(ValueError, match="activation"):
        mlp(x, w1, b1, w2, b2, activation="swish")


# ---- the ladder ---------------------------------------------------------------------------

def test_every_rung_changes_one_thing_of_the_baseline():
    base_model, base_train = L.rung_configs(L.BASELINE)
    assert (base_model, base_train) == (L.BASE_MODEL, L.BASE_TRAIN)
    for rung in L.RUNGS:
        model, train = L.rung_configs(rung, seed=2)
        assert train.seed == 2
        changed = {k for k in vars(model) if getattr(model, k) != getattr(base_model, k)}
        changed |= {k for k in vars(train) if k != "seed" and getattr(train, k) != getattr(base_train, k)}
        assert changed == set(L.RUNGS[rung]), (rung, changed)
        assert len(changed) == (2 if rung == "post_norm_warmup" else 0 if rung == L.BASELINE else 1)
    with pytest.raises(ValueError, match="rung"):
        L.rung_configs("bigger")


@pytest.mark.slow
def test_the_ladder_gives_the_same_numbers_in_one_process_and_in_two():
    train = SHORT.replace(steps=6, eval_every=3)
    kw = dict(rungs=["pre_norm", "relu", "no_layernorm"], seeds=(0, 1), model=TINY, train=train)
    one = L.run_ladder(workers=1, **kw)
    two = L.run_ladder(workers=2, **kw)
    assert list(one) == list(two) == kw["rungs"]
    for rung in one:
        assert [r.val_losses for r in one[rung]] == [r.val_losses for r in two[rung]]
        assert [r.train_losses for r in one[rung]] == [r.train_losses for r in two[rung]]
    kept = one["pre_norm"][0].state_dict
    assert kept is not None and one["relu"][0].state_dict is None


def test_band_and_overlap():
    class R:
        def __init__(self, v):
            self.final_val_loss = v
    b = L.band([R(2.0), R(1.0), R(3.0)])
    assert b == {"min": 1.0, "median": 2.0, "max": 3.0}
    assert L.band([R(1.0), R(2.0)])["median"] == 1.5
    assert L.overlaps(b, {"min": 3.0, "max": 4.0}) and not L.overlaps(b, {"min": 3.1, "max": 4.0})
