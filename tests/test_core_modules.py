"""Modules against blocks assembled from torch.nn parts, and parameter counts."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import andrea_ref as A

TOL = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-5, atol=1e-5)}


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


class TorchBlock(nn.Module):
    """A pre-norm (or post-norm) block built only from torch.nn parts."""

    def __init__(self, d, H, m, post=False):
        super().__init__()
        self.post = post
        self.ln_1, self.ln_2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, H, batch_first=True)
        self.fc1, self.fc2 = nn.Linear(d, m), nn.Linear(m, d)

    def _attn(self, h):
        T = h.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool, device=h.device).triu(1)
        return self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]

    def _mlp(self, h):
        return self.fc2(F.gelu(self.fc1(h), approximate="tanh"))

    def forward(self, x):
        if self.post:
            x = self.ln_1(x + self._attn(x))
            return self.ln_2(x + self._mlp(x))
        x = x + self._attn(self.ln_1(x))
        return x + self._mlp(self.ln_2(x))

    @torch.no_grad()
    def copy_from(self, blk: A.Block):
        for ln_t, ln_a in ((self.ln_1, blk.ln_1), (self.ln_2, blk.ln_2)):
            ln_t.weight.copy_(ln_a.gamma)
            ln_t.bias.copy_(ln_a.beta)
        a = blk.attn
        self.attn.in_proj_weight.copy_(torch.cat([a.w_q.T, a.w_k.T, a.w_v.T]))
        self.attn.in_proj_bias.copy_(torch.cat([a.b_q, a.b_k, a.b_v]))
        self.attn.out_proj.weight.copy_(a.w_o.T)
        self.attn.out_proj.bias.copy_(a.b_o)
        self.fc1.weight.copy_(blk.mlp.w1.T)
        self.fc1.bias.copy_(blk.mlp.b1)
        self.fc2.weight.copy_(blk.mlp.w2.T)
        self.fc2.bias.copy_(blk.mlp.b2)
        return self


def _randomise(module, scale=0.3, seed=0):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * scale + (1.0 if p.dim() == 1 else 0.0) * 0.1)
    return module


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("norm_position", ["pre", "post"])
def test_block_matches_torch_nn_block(dtype, norm_position):
    cfg = A.ModelConfig(n_layer=2, n_head=3, d_model=12, mlp_dim=20, norm_position=norm_position)
    blk = _randomise(A.Block(cfg)).to(dtype)
    ref = TorchBlock(12, 3, 20, post=norm_position == "post").to(dtype).copy_from(blk)
    x = torch.randn(2, 5, 12, dtype=dtype)
    torch.testing.assert_close(blk(x), ref(x), **TOL[dtype])
    # the functional form, fed the module's own parameters, is the same computation
    torch.testing.assert_close(A.block(x, dict(blk.named_parameters()), cfg), blk(x), rtol=0, atol=0)


def test_block_intermediates_are_consistent():
    cfg = A.ModelConfig(n_layer=1, n_head=2, d_model=8, vocab_size=10, context_length=4)
    blk = _randomise(A.Block(cfg)).double()
    x = torch.randn(1, 4, 8, dtype=torch.float64)
    out, mid = blk.forward_with_intermediates(x)
    assert list(mid) == ["ln_1", "attn", "resid_1", "ln_2", "mlp_hidden", "mlp_act", "mlp", "resid_2"]
    torch.testing.assert_close(mid["resid_1"], x + mid["attn"])
    torch.testing.assert_close(mid["resid_2"], mid["resid_1"] + mid["mlp"])
    torch.testing.assert_close(mid["mlp_act"], A.gelu(mid["mlp_hidden"]))
    torch.testing.assert_close(out, mid["resid_2"])
    assert mid["mlp_hidden"].shape == (1, 4, cfg.mlp_dim)


def test_zeroed_output_projections_make_identity():
    cfg = A.ModelConfig(n_layer=1, n_head=2, d_model=8)
    blk = _randomise(A.Block(cfg)).double()
    with torch.no_grad():
        for p in (blk.attn.w_o, blk.attn.b_o, blk.mlp.w2, blk.mlp.b2):
            p.zero_()
    x = torch.randn(2, 3, 8, dtype=torch.float64)
    torch.testing.assert_close(blk(x), x, rtol=0, atol=0)
    post = A.Block(cfg.replace(norm_position="post")).double()
    post.load_state_dict(blk.state_dict())
    assert (post(x) - x).abs().max() > 0.1  # post-norm re-normalises the stream


def test_block_starts_close_to_identity():
    torch.manual_seed(0)
    blk = A.Block(A.ANDREA_12M)
    x = torch.randn(2, 16, A.ANDREA_12M.d_model)
    rel = ((blk(x) - x).norm() / x.norm()).item()
    assert rel < 0.1, rel


@pytest.mark.parametrize("tied", [True, False])
def test_model_matches_manual_forward(tied):
    cfg = A.ModelConfig(n_layer=2, n_head=2, d_model=8, vocab_size=13, context_length=6, tied_embeddings=tied)
    torch.manual_seed(1)
    model = A.AndreaModel(cfg).double()
    ids = torch.randint(0, 13, (3, 6))
    x = model.token_embed[ids] + model.position_embed[:6]
    for blk in model.blocks:
        x = blk(x)
    x = F.layer_norm(x, (8,), model.ln_f.gamma, model.ln_f.beta, 1e-5)
    ref = x @ (model.token_embed.T if tied else model.unembed)
    torch.testing.assert_close(model(ids), ref)
    assert (model.unembed is None) == tied


@pytest.mark.parametrize("name", list(A.CONFIGS))
@pytest.mark.parametrize("tied", [True, False])
def test_parameter_count_matches_numel(name, tied):
    cfg = A.CONFIGS[name].replace(tied_embeddings=tied)
    counts = A.count_parameters(cfg)
    with torch.device("meta"):  # shapes only: ANDREA-480M without allocating 2 GB
        model = A.AndreaModel(cfg)
    assert counts.total == sum(p.numel() for p in model.parameters())
    blk = model.blocks[0]
    assert counts.attention_per_block == sum(p.numel() for p in blk.attn.parameters())
    assert counts.mlp_per_block == sum(p.numel() for p in blk.mlp.parameters())
    assert counts.layernorm_per_block == sum(p.numel() for m in (blk.ln_1, blk.ln_2) for p in m.parameters())
    assert counts.blocks == sum(p.numel() for p in model.blocks.parameters())
    assert counts.token_embedding == model.token_embed.numel()
    assert counts.position_embedding == model.position_embed.numel()
    assert counts.unembedding == (0 if tied else model.unembed.numel())
    assert counts.n_layernorms == sum(isinstance(m, A.LayerNorm) for m in model.modules())


def test_parameter_count_without_biases():
    cfg = A.ModelConfig(n_layer=3, n_head=2, d_model=8, bias=False, vocab_size=20, context_length=7)
    assert A.count_parameters(cfg).total == sum(p.numel() for p in A.AndreaModel(cfg).parameters())


def test_andrea_120m_numbers():
    c = A.count_parameters(A.ANDREA_120M)
    assert A.ANDREA_120M.mlp_dim == 3072
    assert c.mlp_weights_per_block == 2 * 768 * 3072 == 4_718_592
    assert c.n_layernorms == 25
    assert math.isclose(c.blocks / 1e6, 85.05, abs_tol=0.01)


# ----------------------------------------------------------------- the capstone's pieces
def test_the_model_from_its_parameters_alone_is_the_model():
    """forward_from_params reads every size from the parameters and gives AndreaModel's
    logits; config_from_params refuses a stack with a block missing."""
    from andrea_ref.model import config_from_params, forward_from_params
    for n_layer, tied in ((1, True), (2, False), (3, True)):
        cfg = A.ModelConfig(name="t", n_layer=n_layer, n_head=2, d_model=8, mlp_dim=20, vocab_size=11,
                            context_length=9, tied_embeddings=tied)
        torch.manual_seed(n_layer)
        model = A.AndreaModel(cfg)
        ids = torch.randint(0, 11, (2, 7))
        params = dict(model.named_parameters())
        assert config_from_params(params, 2) == cfg.replace(name="from-params")
        assert torch.equal(forward_from_params(ids, params, 2), model(ids))
    with pytest.raises(KeyError, match="each present"):  # blocks.0 and blocks.2, no blocks.1
        forward_from_params(ids, {k: v for k, v in params.items() if not k.startswith("blocks.1.")}, 2)


def test_the_exercises_block_is_andreas_block():
    from andrea_ref.block import pre_norm_block
    cfg = A.ModelConfig(name="t", n_layer=1, n_head=3, d_model=12, mlp_dim=20)
    torch.manual_seed(0)
    blk = A.Block(cfg)
    x = torch.randn(2, 5, 12)
    assert torch.equal(pre_norm_block(x, dict(blk.named_parameters()), 3), blk(x))


def test_fresh_parameters_come_from_the_seed_alone():
    """init_params: AndreaModel's initialisation drawn from the seed, float32 whatever the
    default dtype, the global random state left as it was."""
    from andrea_ref.config import tiny_config
    from andrea_ref.model import init_params
    cfg = tiny_config(65)
    torch.manual_seed(7)
    expected = {k: v.detach() for k, v in A.AndreaModel(cfg).named_parameters()}
    torch.manual_seed(123)
    state = torch.get_rng_state()
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        got = init_params(cfg, 7)
        assert torch.get_default_dtype() == torch.float64
    finally:
        torch.set_default_dtype(previous)
    assert torch.equal(torch.get_rng_state(), state)
    assert got.keys() == expected.keys() and all(torch.equal(got[k], expected[k]) for k in got)
    assert all(v.dtype == torch.float32 and not v.requires_grad for v in got.values())
    with pytest.raises(ValueError, match="seed"):
        init_params(cfg, -1)


def test_windows_are_the_batches_inputs_and_targets():
    """get_batch's x and y are a get_windows window without its last and first id, drawn
    from the same stream (the book's runs keep their numbers)."""
    from andrea_ref.corpus import get_batch, get_windows
    ids = torch.arange(100)
    w = get_windows(ids, 4, 9, torch.Generator().manual_seed(3))
    x, y = get_batch(ids, 4, 8, torch.Generator().manual_seed(3))
    assert torch.equal(w[:, :-1], x) and torch.equal(w[:, 1:], y)
    assert torch.equal(w[:, 1:] - w[:, :-1], torch.ones(4, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="length"):
        get_windows(ids, 1, 101, torch.Generator())
