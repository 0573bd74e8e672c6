"""The functional ops against independent PyTorch constructions.

Tolerances: in float64 the two constructions differ only by rounding of a few dozen
operations on O(1) values, so 1e-12 is far above that noise and far below any real
mistake. In float32 the same reasoning gives ~1e-6 relative; we allow rtol=1e-5,
atol=1e-5 (atol because GELU and LayerNorm outputs pass through zero), which still
rejects the closest wrong variant (erf-GELU is 4.7e-4 away).
"""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import andrea_ref as A

TOL = {torch.float64: dict(rtol=1e-12, atol=1e-12), torch.float32: dict(rtol=1e-5, atol=1e-5)}
DTYPES = [torch.float64, torch.float32]


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_matches_torch(dtype):
    g = gen(1)
    x = torch.randn(3, 5, 8, generator=g, dtype=dtype) * 3 + 1
    gamma = torch.randn(8, generator=g, dtype=dtype)
    beta = torch.randn(8, generator=g, dtype=dtype)
    for eps in (1e-5, 0.5):  # a large eps shows where it is added
        ours = A.layer_norm(x, gamma, beta, eps)
        ref = F.layer_norm(x, (8,), gamma, beta, eps)
        torch.testing.assert_close(ours, ref, **TOL[dtype])


def test_layer_norm_normalises_each_token():
    x = torch.randn(4, 6, 16, dtype=torch.float64) * 5 + 2
    y = A.layer_norm(x, torch.ones(16, dtype=torch.float64), torch.zeros(16, dtype=torch.float64), 1e-12)
    torch.testing.assert_close(y.mean(-1), torch.zeros(4, 6, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(4, 6, dtype=torch.float64), atol=1e-9, rtol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gelu_matches_torch_tanh(dtype):
    x = torch.linspace(-8, 8, 4001, dtype=dtype)
    torch.testing.assert_close(A.gelu(x), F.gelu(x, approximate="tanh"), **TOL[dtype])
    torch.testing.assert_close(A.gelu_exact(x), F.gelu(x), **TOL[dtype])


def test_gelu_is_not_the_exact_form():
    # the reference must be the tanh approximation: it differs from erf-GELU near |x| = 2.7
    x = torch.linspace(-6, 6, 12001, dtype=torch.float64)
    gap = (A.gelu(x) - A.gelu_exact(x)).abs().max().item()
    assert 4.5e-4 < gap < 5e-4


def test_gelu_derivative_matches_autograd():
    x = torch.linspace(-6, 6, 1201, dtype=torch.float64, requires_grad=True)
    (g,) = torch.autograd.grad(F.gelu(x, approximate="tanh").sum(), x)
    torch.testing.assert_close(A.gelu_derivative(x.detach()), g, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
def test_mlp_matches_nn_linear(dtype):
    torch.manual_seed(2)
    d, m = 6, 10  # not square: a transposed weight cannot pass
    fc1, fc2 = nn.Linear(d, m).to(dtype), nn.Linear(m, d).to(dtype)
    x = torch.randn(2, 3, d, dtype=dtype)
    ref = fc2(F.gelu(fc1(x), approximate="tanh"))
    ours = A.mlp(x, fc1.weight.T, fc1.bias, fc2.weight.T, fc2.bias)
    torch.testing.assert_close(ours, ref, **TOL[dtype])


def test_mlp_without_biases():
    torch.manual_seed(3)
    w1, w2 = torch.randn(4, 9, dtype=torch.float64), torch.randn(9, 4, dtype=torch.float64)
    x = torch.randn(5, 4, dtype=torch.float64)
    torch.testing.assert_close(A.mlp(x, w1, None, w2, None), F.gelu(x @ w1, approximate="tanh") @ w2)


def _torch_attention(x, p, n_head):
    """Independent construction with nn.MultiheadAttention and a causal mask."""
    d = x.shape[-1]
    mha = nn.MultiheadAttention(d, n_head, batch_first=True, dtype=x.dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([p["w_q"].T, p["w_k"].T, p["w_v"].T]))
        mha.in_proj_bias.copy_(torch.cat([p["b_q"], p["b_k"], p["b_v"]]))
        mha.out_proj.weight.copy_(p["w_o"].T)
        mha.out_proj.bias.copy_(p["b_o"])
    T = x.shape[1]
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    return mha(x, x, x, attn_mask=mask, need_weights=False)[0]


@pytest.mark.parametrize("dtype", DTYPES)
def test_attention_matches_multihead_attention(dtype):
    torch.manual_seed(4)
    d, H = 12, 3
    attn = A.CausalSelfAttention(d, H).to(dtype)
    with torch.no_grad():
        for name, p in attn.named_parameters():
            p.copy_(torch.randn_like(p) * 0.3)
    x = torch.randn(2, 7, d, dtype=dtype)
    torch.testing.assert_close(attn(x), _torch_attention(x, dict(attn.named_parameters()), H), **TOL[dtype])


def test_attention_is_causal():
    torch.manual_seed(5)
    attn = A.CausalSelfAttention(8, 2).double()
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    y = attn(x)
    x2 = x.clone()
    x2[0, 4] += 10.0
    y2 = attn(x2)
    torch.testing.assert_close(y[0, :4], y2[0, :4], rtol=0, atol=0)
    assert (y[0, 4:] - y2[0, 4:]).abs().max() > 1e-3


@pytest.mark.parametrize(
    "op, args",
    [
        ("layer_norm", lambda: (torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True),
                                torch.randn(4, dtype=torch.float64, requires_grad=True),
                                torch.randn(4, dtype=torch.float64, requires_grad=True))),
        ("gelu", lambda: (torch.randn(3, 5, dtype=torch.float64, requires_grad=True) * 3,)),
        ("mlp", lambda: (torch.randn(2, 4, dtype=torch.float64, requires_grad=True),
                         torch.randn(4, 7, dtype=torch.float64, requires_grad=True),
                         torch.randn(7, dtype=torch.float64, requires_grad=True),
                         torch.randn(7, 4, dtype=torch.float64, requires_grad=True),
                         torch.randn(4, dtype=torch.float64, requires_grad=True))),
    ],
)
def test_gradcheck(op, args):
    torch.manual_seed(6)
    inputs = tuple(a.detach().requires_grad_() for a in args())
    assert torch.autograd.gradcheck(getattr(A, op), inputs)


def test_gradcheck_attention_and_block():
    torch.manual_seed(7)
    cfg = A.ModelConfig(n_layer=1, n_head=2, d_model=4, mlp_dim=6, vocab_size=11, context_length=5)
    blk = A.Block(cfg).double()
    names = [n for n, _ in blk.named_parameters()]
    x = torch.randn(1, 3, 4, dtype=torch.float64, requires_grad=True)
    params = [p.detach().clone().requires_grad_() for p in blk.parameters()]

    def f(x, *ps):
        return A.block(x, dict(zip(names, ps)), cfg)

    assert torch.autograd.gradcheck(f, (x, *params))
