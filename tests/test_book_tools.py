"""The tools behind the book's newer experiments: seeds in parallel, warm-up, the bigram
example of tying, the normalisation contrast, Adam's first step, the mistake museum and
the diff-trace."""
from __future__ import annotations

import math

import pytest
import torch

from andrea_ref import Block, layer_norm
from andrea_ref import experiments as E
from andrea_ref import museum as M
from andrea_ref.attention import causal_self_attention
from andrea_ref.difftrace import STEPS, diff_trace
from andrea_ref.grading.block import make_params
from andrea_ref.mlp import mlp


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def test_summarise_runs_per_position():
    s = E.summarise_runs([[1.0, 4.0], [3.0, 2.0], [2.0, 9.0], [6.0, 5.0]])
    assert s["mean"] == [3.0, 5.0] and s["median"] == [2.5, 4.5]
    assert s["min"] == [1.0, 2.0] and s["max"] == [6.0, 9.0]
    assert math.isclose(s["std"][0], math.sqrt(3.5)) and len(s["runs"]) == 4
    with pytest.raises(ValueError, match="runs"):
        E.summarise_runs([])


def test_parallel_runs_equal_serial_runs_and_pass_errors_back():
    settings = [dict(norm_position="pre", steps=4, n_layer=2, seed=s) for s in (0, 1, 2)]
    parallel = E.train_runs(settings)
    assert parallel == [E.train_tiny(**s) for s in settings]
    with pytest.raises(ValueError, match="norm_position"):
        E.train_runs([dict(norm_position="pre", steps=2, n_layer=1), dict(norm_position="sideways", steps=2)])
    with pytest.raises(ValueError, match="norm_position"):
        E.train_runs([dict(steps=2)])
    summary = E.train_tiny_over_seeds("pre", seeds=(0, 1), steps=3, n_layer=2)
    assert summary["runs"] == [r[:3] for r in parallel[:2]] and len(summary["mean"]) == 3


def test_warm_up_changes_the_first_steps_and_one_step_of_warm_up_is_none():
    plain = E.train_tiny("post", steps=6, n_layer=2)
    assert E.train_tiny("post", steps=6, n_layer=2, warmup=1) == plain
    warm = E.train_tiny("post", steps=6, n_layer=2, warmup=5)
    assert warm[0] == plain[0] and warm[1:] != plain[1:]
    with pytest.raises(ValueError, match="warmup"):
        E.train_tiny("pre", steps=2, warmup=-1)


def test_char_batch_targets_are_the_next_characters():
    ids, targets = E.char_batch(batch=3, seq_len=7, seed=4)
    assert ids.shape == targets.shape == (3, 7)
    assert torch.equal(ids[:, 1:], targets[:, :-1])
    assert torch.equal(E.char_batch(batch=3, seq_len=7, seed=4)[0], ids)


def test_over_seeds_summaries_match_the_single_seed_functions():
    grads = E.embedding_grad_norms_over_seeds([2, 4], residual=False, seeds=(0, 1, 2))
    assert grads["median"] == E.embedding_grad_norms([2, 4], residual=False, seeds=(0, 1, 2))
    sums = E.residual_sum_rms_over_seeds([1, 4], scaled=True, seeds=(0, 1))
    assert sums["mean"] == E.residual_sum_rms([1, 4], scaled=True, seeds=(0, 1))
    half = E.residual_sum_rms_over_seeds([4], scaled="attn", seeds=(0,))["mean"][0]
    full = E.residual_sum_rms_over_seeds([4], scaled=False, seeds=(0,))["mean"][0]
    both = E.residual_sum_rms_over_seeds([4], scaled=True, seeds=(0,))["mean"][0]
    assert both < half < full
    with pytest.raises(ValueError, match="scaled"):
        E.residual_sum_rms_over_seeds([1], scaled="mlp")


def test_bigram_statistics_and_the_direct_path():
    stats = E.bigram_statistics()
    P = stats["next_given"]
    assert torch.allclose(P.sum(1), torch.ones(P.shape[0], dtype=P.dtype))
    assert math.isclose(float(stats["weights"].sum()), 1.0)
    assert stats["bigram_entropy"] < stats["unigram_entropy"] < math.log(len(stats["chars"]))
    untied = E.fit_direct_path(tied=False, steps=300)
    bare = E.fit_direct_path(tied=True, normalised=False, steps=300)
    assert abs(untied - stats["bigram_entropy"]) < 0.02
    assert bare > untied + 0.3
    assert E.fit_direct_paths([dict(tied=False, steps=300), dict(tied=True, normalised=False, steps=300)]) \
        == [untied, bare]


def test_norm_contrast_axes():
    c = E.norm_contrast()
    rows = c["layer"].reshape(-1, c["layer"].shape[-1])
    cols = c["batch"].reshape(-1, c["batch"].shape[-1])
    assert torch.allclose(rows.mean(1), torch.zeros(rows.shape[0], dtype=rows.dtype), atol=1e-9)
    assert torch.allclose(cols.mean(0), torch.zeros(cols.shape[1], dtype=cols.dtype), atol=1e-9)
    assert torch.allclose(cols.std(0, unbiased=False), torch.ones(cols.shape[1], dtype=cols.dtype), atol=1e-4)
    assert c["other_sequence"]["layer"] == 0 == c["later_position"]["layer"] == c["later_position"]["rms"]
    assert c["other_sequence"]["batch"] > 0 and c["later_position"]["batch"] > 0
    assert c["rms_vs_layer"]["centred"] < 1e-12


def test_adam_first_step_is_the_learning_rate_times_the_sign():
    one = E.adam_first_step("post", seed=1, n_layer=2, lr=1e-3)
    ten = E.adam_first_step("post", seed=1, n_layer=2, lr=1e-3, grad_scale=10.0)
    assert math.isclose(ten["grad_norm"], 10 * one["grad_norm"], rel_tol=1e-5)
    assert abs(one["update_rms"] / 1e-3 - 1) < 0.01
    assert ((ten["update"] - one["update"]).norm() / one["update"].norm()) < 0.02
    summary = E.adam_first_steps([dict(norm_position="pre", seed=1, n_layer=2), dict(norm_position="post", seed=1, n_layer=2)])
    assert "update" not in summary[0] and math.isclose(summary[1]["grad_norm"], one["grad_norm"])


# ------------------------------------------------------------------ the museum
def test_substitution_is_undone_and_changes_the_model():
    import importlib
    block_module = importlib.import_module("andrea_ref.block")
    before = block_module.layer_norm
    torch.manual_seed(0)
    model, _ = E.train_char_model("pre", steps=2, n_layer=2, init="andrea")
    ids, targets = E.char_batch(batch=2, seq_len=8, seed=0)
    right = M.loss_with(None, model, ids, targets)
    exhibits = {e.key: e for e in M.EXHIBITS}
    assert M.loss_with(exhibits["unbiased_variance"], model, ids, targets) != right
    assert block_module.layer_norm is before
    assert M.loss_with(None, model, ids, targets) == right
    assert "shapes cannot be multiplied" in M.loss_with(exhibits["transposed"], model, ids, targets)
    with pytest.raises(ValueError, match="exhibit.piece"):
        with M.substituted(M.Exhibit("x", "softmax", abs, "x")):
            pass


def test_block_effect_names_the_error_of_a_transposed_mlp():
    blk = Block(E.tiny_config(n_layer=1))
    x = torch.randn(1, 3, 64)
    effect = {e.key: M.block_effect(e, blk, x) for e in M.EXHIBITS}
    assert "shapes cannot be multiplied" in effect["transposed"]["error"]
    assert effect["lost_residual"]["relative_change"] > 0.5
    assert 0 < effect["erf_gelu"]["relative_change"] < 1e-3


# --------------------------------------------------------------- the diff-trace
P_NAMES = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")


def _right_block(x, p, n_head):
    h = x + causal_self_attention(layer_norm(x, p["ln_1.gamma"], p["ln_1.beta"]),
                                  *(p[f"attn.{n}"] for n in P_NAMES), n_head)
    return h + mlp(layer_norm(h, p["ln_2.gamma"], p["ln_2.beta"]), p["mlp.w1"], p["mlp.b1"], p["mlp.w2"], p["mlp.b2"])


def _mlp_reads_attention(x, p, n_head):
    a = causal_self_attention(layer_norm(x, p["ln_1.gamma"], p["ln_1.beta"]), *(p[f"attn.{n}"] for n in P_NAMES), n_head)
    return x + a + mlp(layer_norm(a, p["ln_2.gamma"], p["ln_2.beta"]), p["mlp.w1"], p["mlp.b1"], p["mlp.w2"], p["mlp.b2"])


@pytest.fixture(scope="module")
def case():
    gen = torch.Generator().manual_seed(3)
    return make_params(gen, 8, 32), torch.randn(2, 5, 8, generator=gen, dtype=torch.float64)


def test_a_right_block_agrees_at_every_step(case):
    params, x = case
    trace = diff_trace(_right_block, params, x, 2)
    assert trace.agrees and trace.compared == STEPS and "agrees" in str(trace)
    # float32 parameters and input are compared with the float64 reference
    trace32 = diff_trace(_right_block, {k: v.float() for k, v in params.items()}, x.float(), 2, atol=1e-4, rtol=1e-4)
    assert trace32.agrees


@pytest.mark.parametrize("fn, step", [
    (M.block_lost_residual, "block.out"),
    (M.block_post_norm, "ln_1.in"),
    (_mlp_reads_attention, "ln_2.in"),
])
def test_each_wrong_wiring_is_found_where_it_starts(case, fn, step):
    params, x = case
    trace = diff_trace(fn, params, x, 2)
    assert trace.first.step == step
    assert trace.first.sequence == 1 and trace.first.position == 1
    assert not torch.allclose(trace.first.got, trace.first.expected)
    assert f'step "{step}"' in str(trace)


def test_a_block_that_skips_a_piece_or_calls_none(case):
    params, x = case

    def no_mlp(x, p, n_head):
        return x + causal_self_attention(layer_norm(x, p["ln_1.gamma"], p["ln_1.beta"]),
                                         *(p[f"attn.{n}"] for n in P_NAMES), n_head)

    trace = diff_trace(no_mlp, params, x, 2)
    assert trace.first.step == "ln_2.in" and trace.first.sequence is None
    assert "never makes this call" in str(trace)

    namespace = {}
    exec("def own(x, p, n_head):\n    return x * 2\n", namespace)
    trace = diff_trace(namespace["own"], params, x, 2)
    assert trace.watched == () and not trace.pieces_seen and trace.compared == ("block.out",)
    assert "only its output is compared" in str(trace)


def test_pieces_imported_inside_the_block_are_watched_too(case):
    params, x = case

    def inner_imports(x, p, n_head):
        from andrea_ref.attention import causal_self_attention as attend
        from andrea_ref.layernorm import layer_norm as norm
        from andrea_ref.mlp import mlp as feed_forward
        h = x + attend(norm(x, p["ln_1.gamma"], p["ln_1.beta"]), *(p[f"attn.{n}"] for n in P_NAMES), n_head)
        return h + feed_forward(norm(h, p["ln_1.gamma"], p["ln_1.beta"]),
                                p["mlp.w1"], p["mlp.b1"], p["mlp.w2"], p["mlp.b2"])

    trace = diff_trace(inner_imports, params, x, 2)
    assert trace.pieces_seen and trace.first.step == "ln_2.out"
    import sys
    assert vars(sys.modules["andrea_ref.mlp"])["mlp"] is mlp     # put back after the call


def test_diff_trace_restores_the_names_it_watches(case):
    params, x = case
    before = _right_block.__globals__["layer_norm"]

    def broken(x, p, n_head):
        layer_norm(x, p["ln_1.gamma"], p["ln_1.beta"])
        raise RuntimeError("learner bug")

    broken.__globals__["layer_norm"] = before
    with pytest.raises(RuntimeError, match="learner bug"):
        diff_trace(broken, params, x, 2)
    assert _right_block.__globals__["layer_norm"] is before


def test_diff_trace_bad_input_names_the_argument(case):
    params, x = case
    with pytest.raises(TypeError, match="block_fn"):
        diff_trace("block", params, x, 2)
    with pytest.raises(TypeError, match="params"):
        diff_trace(_right_block, [1, 2], x, 2)
    with pytest.raises(ValueError, match="x must be"):
        diff_trace(_right_block, params, x[0], 2)
    with pytest.raises(KeyError, match="mlp.w1"):
        diff_trace(_right_block, {"ln_1.gamma": params["ln_1.gamma"]}, x, 2)


def test_diff_trace_report_is_translated(case, monkeypatch):
    params, x = case
    monkeypatch.setenv("ANDREA_LANG", "de")
    text = str(diff_trace(M.block_post_norm, params, x, 2))
    monkeypatch.setenv("ANDREA_LANG", "en")
    assert text != str(diff_trace(M.block_post_norm, params, x, 2))
