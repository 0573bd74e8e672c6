"""The checks measure the property and nothing else: nan never matches a number (and a
nan in the reference excuses nothing), a function that computes nothing earns nothing
for it, every input stays inside what the notebook states, and an in-place change to
any input of any check is seen. (Which mistakes cost which points, and how they are
named, is tests/test_grading_catalogue.py.)"""
from __future__ import annotations

import contextlib
import hashlib
import io
import math

import pytest
import torch

from andrea_ref import grading
from andrea_ref.grading import core, compare, inputs
from andrea_ref.grading import block as block_checks
from andrea_ref.grading import gelu as gelu_checks
from grading_answers import RIGHT, block, failed_checks, layer_norm

CHECKS = {
    "layer_norm": (grading.check_layer_norm_shape, grading.check_layer_norm_normalises,
                   grading.check_layer_norm_affine, grading.check_layer_norm_eps),
    "gelu": (grading.check_gelu_shape, grading.check_gelu_values, grading.check_gelu_extremes),
    "mlp": (grading.check_mlp_shape, grading.check_mlp_layout, grading.check_mlp_activation, grading.check_mlp_bias),
    "block": (grading.check_block_shape, grading.check_block_residual, grading.check_block_norms,
              grading.check_block_values),
}
SEEDS = (0, 20261130)


pytestmark = pytest.mark.fast  # in `make test-fast`: no book, no browser, no sandboxed class


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.delenv("ANDREA_LANG", raising=False)
    yield
    torch.set_num_threads(threads)
    core._TIMED_OUT.clear()


def lost(kind, fn, seeds=SEEDS):
    """The indices (in CHECKS order) of the checks ``fn`` fails, with their messages."""
    return failed_checks(CHECKS[kind], fn, seeds)


# ---------------------------------------------------------------------------- comparisons
def test_nan_never_matches_a_number_and_a_nan_in_the_reference_excuses_nothing():
    nan, inf = float("nan"), float("inf")
    tol = (1e-5, 1e-5)
    ref = torch.tensor([1.0, nan, inf, -inf], dtype=torch.float64)
    assert compare.mismatch(ref.clone(), ref, tol) is None  # nan matches nan, inf matches inf
    for i, value in ((0, nan), (0, inf), (1, 1.0), (1, 0.0), (2, 1e300), (2, -inf), (3, nan)):
        out = ref.clone()
        out[i] = value
        assert compare.mismatch(out, ref, tol) is not None, (i, value)
    assert "expected nan exactly" in compare.mismatch(torch.tensor([0.0]), torch.tensor([nan]), tol)
    assert "got nan, expected 1" in compare.mismatch(torch.tensor([nan]), torch.tensor([1.0]), tol)
    # a broadcastable result of another shape is not "close"
    assert compare.mismatch(torch.zeros(1), torch.zeros(3), tol) is not None


# ---------------------------------------------------------------------------- gaming
def _zeros_for_large_eps(x, gamma, beta, eps=1e-5):
    return torch.zeros_like(x) if eps >= 1e-3 else layer_norm(x, gamma, beta, eps)


def _nan_for_large_eps(x, gamma, beta, eps=1e-5):
    return torch.full_like(x, float("nan")) if eps >= 1e-3 else layer_norm(x, gamma, beta, eps)


def _nan_for_small_eps(x, gamma, beta, eps=1e-5):
    return torch.full_like(x, float("nan")) if eps < 1e-3 else torch.zeros_like(x)


def _beta_only(x, gamma, beta, eps=1e-5):
    return beta.expand_as(x).clone()


GAMING = {
    # (kind, function, the checks it may pass: only what it really computed)
    "layer_norm zeros for large eps": ("layer_norm", _zeros_for_large_eps, {0, 1, 2}),
    "layer_norm nan for large eps": ("layer_norm", _nan_for_large_eps, {0, 1, 2}),
    "layer_norm nan or zeros by eps": ("layer_norm", _nan_for_small_eps, {0}),
    "layer_norm beta alone": ("layer_norm", _beta_only, {0}),
    "layer_norm zeros": ("layer_norm", lambda x, g, b, eps=1e-5: torch.zeros_like(x), {0}),
    "gelu zeros": ("gelu", torch.zeros_like, {0}),
    "gelu nan": ("gelu", lambda x: torch.full_like(x, float("nan")), {0}),
    "mlp zeros": ("mlp", lambda x, w1, b1, w2, b2: torch.zeros_like(x), {0}),
    "mlp b2 alone": ("mlp", lambda x, w1, b1, w2, b2: b2.expand_as(x).clone(), {0}),
    "mlp nan": ("mlp", lambda x, w1, b1, w2, b2: torch.full_like(x, float("nan")), {0}),
    "block zeros": ("block", lambda x, p, n_head: torch.zeros_like(x), {0}),
    "block x": ("block", lambda x, p, n_head: x.clone(), {0}),
    "block nan when a norm changes": ("block", lambda x, p, n_head: block(x, p, n_head) * (
        float("nan") if float(p["ln_1.gamma"].min()) >= 1.5 or float(p["ln_2.gamma"].min()) >= 1.5 else 1.0),
        {0, 1, 3}),
}


@pytest.mark.parametrize("case", GAMING, ids=list(GAMING))
def test_a_function_that_computes_nothing_earns_nothing_for_it(case):
    kind, fn, may_pass = GAMING[case]
    passed = set(range(len(CHECKS[kind]))) - set(lost(kind, fn))
    assert passed <= may_pass, {i: CHECKS[kind][i].__name__ for i in passed - may_pass}


def test_the_right_answers_get_everything():
    for kind, fn in RIGHT.items():
        assert lost(kind, fn) == {}, kind


# ---------------------------------------------------------------------------- ranges
class Spy:
    """The right answer, recording every argument tuple it is called with."""

    def __init__(self, kind):
        self.fn = RIGHT[kind]
        self.calls = []

    def __call__(self, *args):
        # copied with the test's own code: the checks' package is out of bounds for any
        # function they grade (a learner calling inputs.copy_args would be caught too)
        self.calls.append(tuple(_copied(a) for a in args))
        return self.fn(*args)


def _copied(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) for v in value)
    return value


def recorded(kind, check, seed):
    spy = Spy(kind)
    with contextlib.redirect_stdout(io.StringIO()):
        check(spy, seed=seed)
    return spy.calls


@pytest.mark.parametrize("seed", [0, 1, 7, 12345, 20261130, 99999999])
def test_the_gelu_value_grid_stays_inside_minus_six_six(seed):
    assert float(gelu_checks._grid(seed).abs().max()) <= 6.0
    calls = recorded("gelu", grading.check_gelu_values, seed)
    assert calls and all(float(x.abs().max()) <= 6.0 for (x,) in calls)


def test_a_correct_gelu_built_from_exp_gets_the_values_points():
    def exp_gelu(x):
        z = math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)
        t = (torch.exp(z) - torch.exp(-z)) / (torch.exp(z) + torch.exp(-z))
        return 0.5 * x * (1 + t)

    assert set(lost("gelu", exp_gelu)) == {2}  # only the huge inputs, where exp overflows


@pytest.mark.parametrize("seed", SEEDS)
def test_every_input_is_inside_what_the_notebooks_state(seed):
    for check in CHECKS["layer_norm"]:
        for x, gamma, beta, *eps in recorded("layer_norm", check, seed):
            assert x.dtype in (torch.float32, torch.float64) and x.dim() >= 1
            assert gamma.shape == beta.shape == x.shape[-1:] and gamma.dtype == beta.dtype == x.dtype
            assert all(isinstance(e, float) and e > 0 for e in eps)
    extremes = {float(v) for v in (*gelu_checks._BIG, *gelu_checks._BIG_HALF)}
    for check in CHECKS["gelu"]:
        for (x,) in recorded("gelu", check, seed):
            assert x.dtype in (torch.float16, torch.float32, torch.float64)
            if check is grading.check_gelu_values:
                assert float(x.abs().max()) <= 6.0
            if check is grading.check_gelu_extremes:
                assert {float(v) for v in x.double()} <= extremes and float(x.abs().max()) <= 1e4
            assert x.numel() == 0 or float(x.abs().max()) <= 1e4  # the shape check sweeps all inputs
    for check in CHECKS["mlp"]:
        for x, w1, b1, w2, b2 in recorded("mlp", check, seed):
            d, h = w1.shape
            assert x.dim() == 3 and x.shape[-1] == d and b1.shape == (h,) and w2.shape == (h, d) and b2.shape == (d,)
            assert x.dtype in (torch.float32, torch.float64)
    names = set(block_checks.make_params(inputs.generator(0), 8, 32))
    for check in CHECKS["block"]:
        for x, params, n_head in recorded("block", check, seed):
            assert set(params) == names and x.dim() == 3 and x.shape[-1] % n_head == 0
            assert x.dtype in (torch.float32, torch.float64)


# ---------------------------------------------------------------------------- in place
def _fingerprint(args):
    h = hashlib.sha256()
    for a in args:
        for t in (a.values() if isinstance(a, dict) else (a,)):
            if isinstance(t, torch.Tensor):
                h.update(str((t.dtype, tuple(t.shape))).encode())
                h.update(t.detach().double().cpu().numpy().tobytes())
            else:
                h.update(repr(t).encode())
    return h.hexdigest()


def _mutate(kind, args):
    """Change one argument of ``args`` in place, the way a slip would."""
    if kind == "layer_norm":
        args[2].add_(1.0)
    elif kind == "gelu":
        args[0].clamp_(-1.0, 1.0) if float(args[0].abs().max()) > 1 else args[0].add_(1.0)
    elif kind == "mlp":
        args[3].mul_(2.0)
    else:
        args[1]["mlp.b1"].add_(1.0)


@pytest.mark.parametrize("kind", list(CHECKS))
def test_an_in_place_change_on_any_check_s_inputs_is_seen_by_the_first_check(kind):
    """For every check, an answer that is right but changes an argument in place only
    when it is called with that check's inputs: the first check (the one whose property
    says the inputs are left alone) fails, naming the argument, and every other check
    passes."""
    first, *others = CHECKS[kind]
    for check in others:
        targets = {_fingerprint(a) for seed in SEEDS for a in recorded(kind, check, seed)}

        def sneaky(*args, _targets=targets):
            out = RIGHT[kind](*args)
            if _fingerprint(args) in _targets:
                _mutate(kind, args)
            return out

        failed = lost(kind, sneaky)
        assert set(failed) == {0}, (check.__name__, {i: m.splitlines()[0] for i, m in failed.items()})
        assert "in place" in failed[0] or "changed its argument" in failed[0], failed[0]
