"""Bad input raises a clear error that names the argument, never broadcasts silently."""
import pytest
import torch

import andrea_ref as A

f64 = dict(dtype=torch.float64)


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


def raises(exc, *words):
    """pytest.raises that also requires every word to appear in the message."""
    class _Ctx:
        def __enter__(self):
            self.ctx = pytest.raises(exc)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *a):
            handled = self.ctx.__exit__(*a)
            msg = str(self.info.value)
            for w in words:
                assert w in msg, f"{w!r} not in error message {msg!r}"
            return handled

    return _Ctx()


def test_layer_norm_errors():
    x = torch.randn(2, 3, 8)
    with raises(ValueError, "gamma", "(8,)", "(7,)"):
        A.layer_norm(x, torch.ones(7), torch.zeros(8))
    with raises(ValueError, "beta"):
        A.layer_norm(x, torch.ones(8), torch.zeros(1))  # would broadcast silently
    with raises(TypeError, "gamma", "float64", "float32"):
        A.layer_norm(x, torch.ones(8, **f64), torch.zeros(8))
    with raises(ValueError, "gamma", "meta"):
        A.layer_norm(x, torch.ones(8, device="meta"), torch.zeros(8))
    with raises(TypeError, "x", "torch.Tensor", "list"):
        A.layer_norm([1.0, 2.0], torch.ones(2), torch.zeros(2))
    with raises(TypeError, "x", "floating-point", "int64"):
        A.layer_norm(torch.ones(2, 4, dtype=torch.int64), torch.ones(4), torch.zeros(4))
    with raises(ValueError, "eps"):
        A.layer_norm(x, torch.ones(8), torch.zeros(8), eps=-1.0)


def test_gelu_errors():
    with raises(TypeError, "x", "floating-point"):
        A.gelu(torch.arange(4))
    with raises(TypeError, "x", "torch.Tensor"):
        A.gelu(3.0)


def test_mlp_errors():
    x = torch.randn(2, 6)
    w1, b1, w2, b2 = torch.randn(6, 10), torch.randn(10), torch.randn(10, 6), torch.randn(6)
    with raises(ValueError, "w1", "[6, mlp_dim]", "(10, 6)"):
        A.mlp(x, w1.T, b1, w2, b2)  # transposed weight
    with raises(ValueError, "w2", "(10, 6)", "(6, 10)"):
        A.mlp(x, w1, b1, w2.T, b2)
    with raises(ValueError, "b1", "(10,)"):
        A.mlp(x, w1, b2, w2, b2)
    with raises(ValueError, "w1", "2 dimension"):
        A.mlp(x, w1[None], b1, w2, b2)
    with raises(TypeError, "w2", "float64"):
        A.mlp(x, w1, b1, w2.double(), b2)


def test_attention_errors():
    d = 8
    w = [torch.randn(d, d) for _ in range(4)]
    b = [torch.randn(d) for _ in range(4)]
    args = [t for pair in zip(w, b) for t in pair]
    with raises(ValueError, "x", "3 dimension", "(5, 8)"):
        A.causal_self_attention(torch.randn(5, d), *args, n_head=2)
    with raises(ValueError, "divisible", "n_head"):
        A.causal_self_attention(torch.randn(1, 5, d), *args, n_head=3)
    with raises(ValueError, "w_k", "(8, 8)"):
        bad = list(args)
        bad[2] = torch.randn(d, d + 1)
        A.causal_self_attention(torch.randn(1, 5, d), *bad, n_head=2)
    with raises(TypeError, "n_head", "int"):
        A.causal_self_attention(torch.randn(1, 5, d), *args, n_head=2.0)


def test_config_errors():
    with raises(ValueError, "d_model (100)", "n_head (12)"):
        A.ModelConfig(d_model=100, n_head=12)
    with raises(ValueError, "norm_position"):
        A.ModelConfig(norm_position="middle")
    with raises(ValueError, "n_layer"):
        A.ModelConfig(n_layer=0)
    with raises(TypeError, "d_model", "int"):
        A.ModelConfig(d_model=768.0)
    with raises(ValueError, "ANDREA-120M"):
        A.get_config("ANDREA-100M")


def test_block_and_model_errors():
    cfg = A.ModelConfig(n_layer=1, n_head=2, d_model=8, vocab_size=10, context_length=4)
    blk = A.Block(cfg)
    with raises(ValueError, "x", "last dimension 8", "(1, 3, 6)"):
        blk(torch.randn(1, 3, 6))
    with raises(KeyError, "ln_1.gamma"):
        A.block(torch.randn(1, 3, 8), {}, cfg)
    with raises(TypeError, "config"):
        A.Block({"d_model": 8})
    model = A.AndreaModel(cfg)
    with raises(ValueError, "token_ids", "[0, 9]", "10"):
        model(torch.tensor([[1, 10]]))
    with raises(ValueError, "token_ids", "[0, 9]", "-1"):
        model(torch.tensor([[-1, 2]]))
    with raises(ValueError, "sequence length 5", "context_length 4"):
        model(torch.zeros(1, 5, dtype=torch.long))
    with raises(TypeError, "token_ids", "integer"):
        model(torch.zeros(1, 3))
    with raises(ValueError, "token_ids", "2 dimension"):
        model(torch.zeros(3, dtype=torch.long))
