"""andrea_ref.trace: the worked examples of chapter 6 are the block's real computation."""
from __future__ import annotations

import math

import pytest
import torch

from andrea_ref import AndreaModel, Block, gelu, layer_norm
from andrea_ref import experiments as E
from andrea_ref import trace as TR


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def test_toy_block_is_a_real_block_with_round_weights():
    blk = TR.toy_block()
    assert isinstance(blk, Block) and blk.config.d_model == 4 and blk.config.n_head == 1
    assert blk.config.mlp_dim == 16
    allowed = {0.0, 0.5, -0.5, 1.0, -1.0}
    for name, p in blk.named_parameters():
        assert set(p.flatten().tolist()) <= allowed, name


def test_toy_trace_matches_the_block_forward_at_every_position():
    blk, x = TR.toy_block(), TR.toy_input()
    out = blk(x)
    _, inter = blk.forward_with_intermediates(x)
    for position in range(3):
        t = TR.trace_block(blk, x, position)
        assert torch.allclose(t["resid_2"], out[0, position], atol=1e-6)
        for step in ("ln_1", "attn", "resid_1", "ln_2", "mlp_hidden", "mlp_act", "mlp"):
            assert torch.allclose(t[step], inter[step][0, position], atol=1e-6), step
        assert t["weights"].shape == (1, position + 1)
        assert math.isclose(float(t["weights"].sum()), 1.0, rel_tol=1e-6)


def test_toy_trace_is_the_hand_computation():
    """Every step redone here with plain arithmetic, as the chapter asks the reader to."""
    blk, x = TR.toy_block(), TR.toy_input()
    t = TR.trace_block(blk, x, position=2)
    r2 = math.sqrt(2.0)
    assert torch.allclose(t["ln_1"], torch.tensor([r2, -r2, 0.0, 0.0]), atol=1e-4)
    assert torch.allclose(t["q"], t["ln_1"])                      # W_q = I
    # keys are the normalised rows; scores = q.k / sqrt(4)
    assert torch.allclose(t["scores"][0], torch.tensor([r2, 0.0, 2.0]), atol=1e-4)
    e = torch.tensor([math.exp(r2), 1.0, math.exp(2.0)])
    assert torch.allclose(t["weights"][0], e / e.sum(), atol=1e-5)
    ln1 = layer_norm(x[0], torch.ones(4), torch.zeros(4))
    v = ln1[:, [0, 1, 3, 2]]                                       # W_v swaps features 3 and 4
    attn = 0.5 * (t["weights"][0] @ v)                             # W_o = I / 2
    assert torch.allclose(t["attn"], attn, atol=1e-6)
    resid_1 = x[0, 2] + attn
    assert torch.allclose(t["resid_1"], resid_1, atol=1e-6)
    h = layer_norm(resid_1, torch.ones(4), torch.zeros(4))
    assert torch.allclose(t["mlp_hidden"], torch.cat([h, -h, h / 2, -h / 2]), atol=1e-6)
    mlp = gelu(h) - gelu(-h) + 0.5 * gelu(h / 2)
    assert torch.allclose(t["mlp"], mlp, atol=1e-6)
    assert torch.allclose(t["mlp"], h + 0.5 * gelu(h / 2), atol=1e-5)   # exercise 6.1
    assert torch.allclose(t["resid_2"], resid_1 + mlp, atol=1e-6)
    # the order the chapter states: itself first, then position 1, then position 2
    w = t["weights"][0].tolist()
    assert w[2] > w[0] > w[1]


def test_trace_block_checks_its_inputs():
    blk, x = TR.toy_block(), TR.toy_input()
    with pytest.raises(ValueError, match="position"):
        TR.trace_block(blk, x, 3)
    with pytest.raises(TypeError, match="Block"):
        TR.trace_block(torch.nn.Linear(4, 4), x, 0)


def test_trace_model_uses_one_model_and_reproduces_its_logits():
    torch.manual_seed(0)
    model = AndreaModel(E.tiny_config(n_layer=3))
    ids = torch.randint(0, model.config.vocab_size, (1, 6), generator=torch.Generator().manual_seed(1))
    r = TR.trace_model(model, ids, position=5, top_k=3)
    with torch.no_grad():
        x = model.token_embed[ids] + model.position_embed[:6]
        assert torch.allclose(r["block1"]["input"], x[0, 5])
        assert torch.allclose(r["block1"]["out"], model.blocks[0](x))     # the model's own block 1
        logits = model(ids)[0, 5]
    assert torch.allclose(r["logits"], logits, atol=1e-5)
    assert not any(t.requires_grad for t in (r["token_embed"], r["position_embed"], r["logits"]))
    assert len(r["stream_rms"]) == model.config.n_layer + 1
    assert [tok for tok, _, _ in r["top"]] == torch.topk(logits, 3).indices.tolist()
    V = model.config.vocab_size
    assert 0 < r["entropy"] <= math.log(V) + 1e-9 <= r["mean_nll"] + 1e-9
    assert r["block1"]["weights"].shape == (model.config.n_head, 6)
    with pytest.raises(ValueError, match="position"):
        TR.trace_model(model, ids, position=6)


def test_format_vector_is_fixed_width():
    line = TR.format_vector(torch.tensor([1.0, -0.5, 0.0]), digits=3)
    assert line == "+1.000 -0.500 +0.000"
    assert TR.format_vector([torch.tensor(2.0, requires_grad=True)]) == "+2.000"


def test_sharper_queries_focus_the_toy_attention_on_itself():
    """Exercise 6.2: W_q times 10 puts almost all the weight on the traced position."""
    blk, x = TR.toy_block(), TR.toy_input()
    with torch.no_grad():
        blk.attn.w_q.mul_(10)
    t = TR.trace_block(blk, x, position=2)
    assert float(t["weights"][0, 2]) > 0.99
    assert torch.allclose(t["attn"], 0.5 * t["v"][2], atol=0.02)
