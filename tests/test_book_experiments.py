"""andrea_ref.experiments: the measurements the book's claims rest on."""
from __future__ import annotations

import math

import pytest
import torch

from andrea_ref import ANDREA_120M, AndreaModel
from andrea_ref import experiments as E
from andrea_ref.experiments import workers as W


def test_perturbing_one_token_reaches_later_positions_through_attention_only():
    change = E.perturb_one_token(E.tiny_config(), position=3, seq_len=8)
    assert all(v == 0.0 for v in change["attn"][:3]), "causal attention must not see the future"
    assert all(v > 0.0 for v in change["attn"][3:])
    assert [t for t, v in enumerate(change["mlp"]) if v != 0.0] == [3]
    with pytest.raises(ValueError, match="position"):
        E.perturb_one_token(E.tiny_config(), position=8, seq_len=8)


def test_residual_block_is_near_identity_for_unit_inputs_and_bare_block_is_not():
    r = E.block_relative_change(E.tiny_config(n_layer=12), [1.0, 0.01])
    assert r["cosine"][0] > 0.95 and r["relative_change"][0] < 0.3
    assert abs(r["cosine_no_residual"][0]) < 0.5
    # the delta does not shrink with the input, so small inputs are changed a lot
    assert r["relative_change"][1] > 10 * r["relative_change"][0]


def test_gradient_reaches_the_embeddings_only_with_residuals_in_deep_stacks():
    res = E.embedding_grad_norms([48], residual=True, seeds=(0,))
    bare = E.embedding_grad_norms([48], residual=False, seeds=(0,))
    assert res[0] > 0.05
    assert bare[0] < 1e-3 * res[0]


def test_per_layer_grad_norms_shapes_and_ordering():
    pre = E.per_layer_grad_norms("pre", n_layer=6)
    post = E.per_layer_grad_norms("post", n_layer=6)
    assert len(pre) == len(post) == 6 and all(v > 0 for v in pre + post)
    assert pre[0] > pre[-1], "pre-norm gradients shrink with depth"
    assert sum(post) > sum(pre)
    with pytest.raises(ValueError, match="init"):
        E.per_layer_grad_norms("pre", init="xavier")


def test_init_like_2017_needs_an_untied_model_and_sets_unit_embeddings():
    with pytest.raises(ValueError, match="tied_embeddings"):
        E.init_like_2017(AndreaModel(E.tiny_config()))
    torch.manual_seed(0)
    model = E.init_like_2017(AndreaModel(E.tiny_config(tied_embeddings=False)))
    assert 0.9 < model.token_embed.std().item() < 1.1
    assert math.isclose(model.blocks[0].attn.w_o.std().item(), 64 ** -0.5, rel_tol=0.1)


def test_training_runs_are_deterministic_and_learn():
    a = E.train_tiny("pre", steps=30, n_layer=2)
    b = E.train_tiny("pre", steps=30, n_layer=2)
    assert a == b
    assert sum(a[-5:]) / 5 < a[0] - 0.5
    assert 2.0 < E.unigram_entropy() < math.log(len(set(E.TRAINING_TEXT)))


def test_token_trace_follows_the_block_steps():
    rows = E.token_trace(ANDREA_120M.replace(n_layer=12), seq_len=4, position=1)
    assert [r["step"] for r in rows] == list(E.TRACE_STEPS)
    widths = {r["step"]: r["width"] for r in rows}
    assert widths["mlp_hidden"] == widths["mlp_act"] == 3072
    assert all(r["shape"][:2] == (1, 4) for r in rows)
    rms = {r["step"]: r["rms"] for r in rows}
    assert abs(rms["ln_1"] - 1) < 0.05 and abs(rms["ln_2"] - 1) < 0.05


def test_stream_change_falls_as_the_stream_grows():
    s = E.stream_relative_change(E.tiny_config(n_layer=6), seq_len=16)
    assert len(s["rms_in"]) == 6
    assert s["rms_in"][-1] > s["rms_in"][0]
    assert s["relative_change"][-1] < s["relative_change"][0]


def test_gelu_approximation_error_matches_the_known_maximum():
    err, at = E.gelu_approximation_error()
    assert 4.7e-4 < err < 4.8e-4
    assert abs(at - 2.70) < 0.02


def test_book_style_labels_nothing_by_itself():
    import matplotlib

    E.use_book_style()
    assert matplotlib.rcParams["axes.grid"] is True
    assert set(E.PLOT_COLORS) >= {"pre", "post", "residual", "no_residual", "attn", "mlp"}


def test_llama_mlp_hidden_rounds_two_thirds_of_4x_up_to_256():
    # LLaMA 7B, 13B, 33B, 65B: d_model from the LLaMA paper, widths of the released models
    assert E.llama_mlp_hidden(4096) == 11008
    assert [E.llama_mlp_hidden(d) for d in (5120, 6656, 8192)] == [13824, 17920, 22016]
    assert 8 * 4096 / 3 < E.llama_mlp_hidden(4096)          # rounded up, not to nearest
    assert E.llama_mlp_hidden(768, multiple_of=1) == 2048   # exact when 3 divides 8 d_model
    with pytest.raises(ValueError):
        E.llama_mlp_hidden(0)


def test_fast_tanh_gelu_error_emulation_under_the_documented_bound():
    assert E.PTX_TANH_APPROX_REL_ERR == 2.0 ** -11           # PTX ISA, tanh.approx.f32
    gap, at = E.fast_tanh_gelu_error_emulated()
    # 0.5 |x| |tanh(u)| 2^-11 at the largest |x| whose |u| stays below 10 (about 5.4)
    x = torch.tensor(at, dtype=torch.float64)
    u = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    assert u < 10 and abs(gap - 0.5 * at * float(torch.tanh(u)) * 2.0 ** -11) < 1e-9
    assert 1.2e-3 < gap < 1.4e-3 and abs(at - 5.4) < 0.05
    half = E.fast_tanh_gelu_error_emulated(tanh_rel_err=2.0 ** -12)[0]
    assert abs(half - gap / 2) < 1e-12                       # linear in the assumed error
    assert E.fast_tanh_gelu_error_emulated(tanh_rel_err=0.0)[0] == 0.0


def test_gelu_memory_traffic_fusion_halves_the_bias_gelu_bytes():
    t = E.gelu_memory_traffic(1000, 4)
    assert t["gelu_forward"] == 8000 and t["gelu_backward"] == 12000
    assert t["bias_gelu_unfused"] == 2 * t["bias_gelu_fused"] == 16000
    with_bias = E.gelu_memory_traffic(1000, 2, bias_elements=10)
    assert with_bias["bias_gelu_fused"] == (2000 + 10) * 2
    assert with_bias["bias_gelu_unfused"] == with_bias["bias_gelu_fused"] + 4000


def test_per_layer_grad_norms_over_seeds_summarises_every_seed():
    s = E.per_layer_grad_norms_over_seeds("pre", seeds=(0, 1, 2), n_layer=4)
    assert len(s["runs"]) == 3 and all(len(r) == 4 for r in s["runs"])
    assert s["runs"][1] == E.per_layer_grad_norms("pre", n_layer=4, seed=1)
    for i in range(4):
        column = [r[i] for r in s["runs"]]
        assert s["min"][i] == min(column) and s["max"][i] == max(column)
        assert math.isclose(s["mean"][i], sum(column) / 3)
        assert s["min"][i] <= s["mean"][i] <= s["max"][i] and s["std"][i] >= 0
    with pytest.raises(ValueError, match="seed"):
        E.per_layer_grad_norms_over_seeds("pre", seeds=())


def test_scaled_output_projections_keep_the_residual_sum_independent_of_depth():
    depths = [1, 4, 16]
    scaled = E.residual_sum_rms(depths, scaled=True, seeds=(0,))
    plain = E.residual_sum_rms(depths, scaled=False, seeds=(0,))
    # 2 n_layer contributions of similar size: the plain sum grows like sqrt(2 n_layer) ...
    for d, v in zip(depths, plain):
        assert math.isclose(v / plain[0], math.sqrt(d), rel_tol=0.25)
    # ... and the 1/sqrt(2 n_layer) factor cancels that growth
    assert max(scaled) / min(scaled) < 1.15
    assert math.isclose(scaled[0], plain[0] / math.sqrt(2), rel_tol=0.15)


# ------------------------------------------------------------------ the worker processes
def test_a_worker_stopped_with_its_notebooks_kernel_ends_without_a_traceback():
    """A chapter's kernel shut down (or interrupted) takes its process group's workers with
    SIGINT: they end at once and quietly, with nothing on the build's output."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "import andrea_ref.experiments.workers as m; m._serve()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    W._Workers._send(proc.stdin, (abs, -3))
    assert W._Workers._receive(proc.stdout) == (True, 3)  # in its loop, waiting for the next task
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and b"Traceback" not in err, err.decode()


def test_an_interrupted_map_leaves_no_answer_behind(monkeypatch):
    """A map interrupted in the notebook (Ctrl-C, the kernel's interrupt) ends its workers,
    so the next map starts fresh ones and reads no answer meant for the one before."""
    import signal
    import time

    monkeypatch.setattr(W, "_WORKERS", None)
    monkeypatch.setattr(W, "_cores", lambda: 2)

    def interrupt(signum, frame):
        raise KeyboardInterrupt
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 1.5)
        with pytest.raises(KeyboardInterrupt):
            W.parallel_map(time.sleep, [5.0, 5.0, 5.0])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    first = W._WORKERS
    assert first is not None and all(p.poll() is not None for p in first.procs)
    assert W.parallel_map(abs, [-1, -2, -3, -4]) == [1, 2, 3, 4]
    assert W._WORKERS is not first
    W._WORKERS.close()


def test_a_task_that_raises_is_raised_in_the_caller_and_the_workers_stay(monkeypatch):
    monkeypatch.setattr(W, "_WORKERS", None)
    monkeypatch.setattr(W, "_cores", lambda: 2)
    with pytest.raises(ValueError):
        W.parallel_map(int, ["1", "not a number", "3"])
    pool = W._WORKERS
    assert W.parallel_map(int, ["4", "5"]) == [4, 5] and W._WORKERS is pool
    pool.close()
