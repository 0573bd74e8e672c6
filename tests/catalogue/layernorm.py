"""LayerNorm answers: ``layer_norm(x, gamma, beta, eps=1e-5)``."""
from __future__ import annotations

from . import ALL, Entry

NB = "02_layernorm"
SHAPE, NORM, AFFINE, EPS = "ln_shape", "ln_normalise", "ln_affine", "ln_eps"


def ln(body: str, head: str = "", signature: str = "x, gamma, beta, eps=1e-5") -> str:
    return f"{head}def layer_norm({signature}):\n" + body


def stats(var: str = "((x - mean) ** 2).mean(dim=-1, keepdim=True)") -> str:
    return f"    mean = x.mean(dim=-1, keepdim=True)\n    var = {var}\n"


RIGHT = "    return gamma * (x - mean) / torch.sqrt(var + eps) + beta\n"


def mistake(name, source, lost, likely, **kw):
    return Entry(NB, name, source, frozenset(lost) if lost != ALL else ALL, likely, **kw)


MISTAKES = [
    # -- the normalisation
    mistake("ln_unbiased_var", ln(stats("x.var(dim=-1, keepdim=True)") + RIGHT), {NORM}, "unbiased"),
    mistake("ln_unbiased_std", ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    std = x.std(dim=-1, keepdim=True)\n"
        "    return gamma * (x - mean) / torch.sqrt(std ** 2 + eps) + beta\n"), {NORM}, "unbiased"),
    mistake("ln_unbiased_manual", ln(stats(
        "((x - mean) ** 2).sum(dim=-1, keepdim=True) / (x.shape[-1] - 1)") + RIGHT), {NORM}, "unbiased"),
    mistake("ln_axis_0", ln(
        "    mean = x.mean(dim=0, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=0, keepdim=True)\n" + RIGHT), {NORM}, "over dimension 0"),
    mistake("ln_axis_1", ln(
        "    mean = x.mean(dim=1, keepdim=True)\n"
        "    var = ((x - mean) ** 2).mean(dim=1, keepdim=True)\n" + RIGHT), {NORM}, "over dimension 1",
        note="dim=1 is the last axis of the 2-D inputs: only the 3-D ones show it"),
    mistake("ln_whole_tensor", ln(
        "    mean = x.mean()\n"
        "    var = ((x - mean) ** 2).mean()\n" + RIGHT), {NORM}, "whole tensor"),
    mistake("ln_not_centred", ln(stats() + "    return gamma * x / torch.sqrt(var + eps) + beta\n"),
            {NORM}, "mean is not subtracted"),
    mistake("ln_rmsnorm", ln(
        "    rms = torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)\n"
        "    return gamma * x / rms + beta\n"), {NORM}, "root mean square (RMSNorm)"),
    mistake("ln_var_not_std", ln(stats() + "    return gamma * (x - mean) / (var + eps) + beta\n"),
            {NORM}, "divided by the variance instead of its square root"),
    mistake("ln_mad_as_variance", ln(stats("(x - mean).abs().mean(dim=-1, keepdim=True)") + RIGHT),
            {NORM}, "is used as the variance",
            note="eps is inside the square root: only the normalisation is wrong"),
    mistake("ln_mad_as_std", ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    mad = (x - mean).abs().mean(dim=-1, keepdim=True)\n"
        "    return gamma * (x - mean) / (mad + eps) + beta\n"), {NORM, EPS},
        {NORM: "mean absolute deviation, mean(|x - mean|), not the standard deviation",
         EPS: "eps is added to the spread itself"},
        note="no square root at all: eps is added to the spread, which the eps check charges too"),
    mistake("ln_mad_squared", ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    mad = (x - mean).abs().mean(dim=-1, keepdim=True)\n"
        "    return gamma * (x - mean) / torch.sqrt(mad ** 2 + eps) + beta\n"), {NORM},
        "mean absolute deviation, mean(|x - mean|), not the standard deviation"),
    # -- the affine step
    mistake("ln_no_gamma", ln(stats() + "    return (x - mean) / torch.sqrt(var + eps) + beta\n"),
            {AFFINE}, "gamma is never applied"),
    mistake("ln_no_beta", ln(stats() + "    return gamma * (x - mean) / torch.sqrt(var + eps)\n"),
            {AFFINE}, "beta is never applied"),
    mistake("ln_no_affine", ln(stats() + "    return (x - mean) / torch.sqrt(var + eps)\n"),
            {AFFINE}, "neither gamma nor beta"),
    mistake("ln_swapped_affine", ln(stats() + "    return beta * (x - mean) / torch.sqrt(var + eps) + gamma\n"),
            {AFFINE}, "gamma and beta are swapped"),
    mistake("ln_beta_before_gamma", ln(stats() + "    return gamma * ((x - mean) / torch.sqrt(var + eps) + beta)\n"),
            {AFFINE}, "beta is added before scaling"),
    mistake("ln_gamma_added", ln(stats() + "    return (x - mean) / torch.sqrt(var + eps) + gamma + beta\n"),
            {AFFINE}, "gamma is added instead of multiplied"),
    mistake("ln_gamma_before_norm", ln(
        "    x = gamma * x\n" + stats() + "    return (x - mean) / torch.sqrt(var + eps) + beta\n"),
        {AFFINE}, "gamma scales x before it is normalised"),
    # -- eps
    mistake("ln_eps_outside", ln(stats() + "    return gamma * (x - mean) / (torch.sqrt(var) + eps) + beta\n"),
            {EPS}, "outside the square root"),
    mistake("ln_eps_outside_std", ln(
        "    mean = x.mean(dim=-1, keepdim=True)\n"
        "    std = x.std(dim=-1, keepdim=True, unbiased=False)\n"
        "    return gamma * (x - mean) / (std + eps) + beta\n"), {EPS}, "outside the square root"),
    mistake("ln_eps_squared", ln(stats() + "    return gamma * (x - mean) / torch.sqrt(var + eps ** 2) + beta\n"),
            {EPS}, "eps is squared"),
    mistake("ln_eps_root", ln(stats() + "    return gamma * (x - mean) / torch.sqrt(var + eps ** 0.5) + beta\n"),
            {EPS}, "square root of eps"),
    mistake("ln_eps_missing", ln(stats() + "    return gamma * (x - mean) / torch.sqrt(var) + beta\n"),
            {EPS}, "eps is missing"),
    mistake("ln_eps_fixed", ln(stats() + "    return gamma * (x - mean) / torch.sqrt(var + 1e-5) + beta\n"),
            {EPS}, "eps argument is ignored"),
    mistake("ln_eps_fixed_large", ln(stats() + "    return gamma * (x - mean) / torch.sqrt(var + 1e-3) + beta\n"),
            {EPS}, "eps argument is ignored"),
    mistake("ln_eps_clamp", ln(stats() + "    return gamma * (x - mean) / torch.sqrt(torch.clamp(var, min=1e-5)) + beta\n"),
            {EPS}, "eps argument is ignored",
            note="a floor instead of eps: variances here are all above it"),
    mistake("ln_default_eps_1e6", ln(stats() + RIGHT, signature="x, gamma, beta, eps=1e-6"),
            {EPS}, "default value of eps in the signature is not 1e-5 (your default acts like eps = 1e-06)"),
    mistake("ln_default_eps_1e3", ln(stats() + RIGHT, signature="x, gamma, beta, eps=1e-3"),
            {EPS}, "default value of eps in the signature is not 1e-5 (your default acts like eps = 0.001)"),
    mistake("ln_no_default_eps", ln(stats() + RIGHT, signature="x, gamma, beta, eps"),
            {EPS}, "eps has no default value"),
    # -- shapes and broadcasting
    mistake("ln_keepdim_missing", ln(
        "    mean = x.mean(dim=-1)\n"
        "    var = ((x - mean.unsqueeze(-1)) ** 2).mean(dim=-1)\n"
        "    return gamma * (x - mean) / torch.sqrt(var + eps) + beta\n"), ALL, "keepdim=True is missing"),
    # -- the first property: dtype, a new tensor, inputs left alone
    mistake("ln_float64_result", ln("    x = x.double()\n" + stats() + RIGHT), {SHAPE},
            "returned dtype torch.float64 for torch.float32 input"),
    mistake("ln_float32_result", ln(
        "    x, gamma, beta = x.float(), gamma.float(), beta.float()\n" + stats() + RIGHT), {SHAPE},
        "returned dtype torch.float32 for torch.float64 input"),
    mistake("ln_tensor_constant", ln(stats(
        "((x - mean) ** 2).sum(dim=-1, keepdim=True) / torch.tensor([float(x.shape[-1])], dtype=torch.float64)")
        + RIGHT), {SHAPE}, "returned dtype torch.float64 for torch.float32 input"),
    mistake("ln_reused_buffer", ln(
        "    key = (x.shape, x.dtype, x.device)\n"
        "    if key not in _out:\n"
        "        _out[key] = torch.empty_like(x)\n" + stats() +
        "    return torch.add(gamma * (x - mean) / torch.sqrt(var + eps), beta, out=_out[key])\n",
        head="_out = {}\n\n"), {SHAPE}, "a second time changed the tensor"),
    mistake("ln_in_place_centre", ln(
        "    x -= x.mean(dim=-1, keepdim=True)\n"
        "    var = (x * x).mean(dim=-1, keepdim=True)\n"
        "    return gamma * x / torch.sqrt(var + eps) + beta\n"), {SHAPE}, "changed its argument `x` in place"),
    mistake("ln_in_place_clamp", ln(
        stats() + "    out = gamma * (x - mean) / torch.sqrt(var + eps) + beta\n"
        "    x.clamp_(-10.0, 10.0)  # keep later calls in range\n"
        "    return out\n"), {SHAPE}, "changed its argument `x` in place",
        note="changes nothing on the shape check's own inputs, only on the normalisation check's"),
    mistake("ln_in_place_unsqueeze", ln(
        "    gamma.unsqueeze_(0)  # [1, d], to broadcast over the tokens\n" + stats() + RIGHT),
        {SHAPE}, "changed its argument `gamma` in place"),
]


def right(name, body, head="", **kw):
    return Entry(NB, name, ln(body, head), **kw)


CORRECT = [
    right("ln_ok_solution", stats() + RIGHT),
    right("ln_ok_var_mean", "    var, mean = torch.var_mean(x, dim=-1, keepdim=True, unbiased=False)\n"
          "    return torch.mul(x - mean, gamma) / (var + eps) ** 0.5 + beta\n"),
    right("ln_ok_rsqrt_in_place", "    out = x - x.mean(dim=-1, keepdim=True)\n"
          "    var = torch.var(out, dim=-1, keepdim=True, correction=0)\n"
          "    out *= torch.rsqrt(var.add_(eps))\n"
          "    out.mul_(gamma).add_(beta)\n"
          "    return out\n"),
    right("ln_ok_float64_inside", "    x64 = x.double()\n"
          "    mean = x64.mean(dim=-1, keepdim=True)\n"
          "    var = ((x64 - mean) ** 2).mean(dim=-1, keepdim=True)\n"
          "    y = (x64 - mean) / torch.sqrt(var + eps)\n"
          "    return (gamma.double() * y + beta.double()).to(x.dtype)\n"),
    right("ln_ok_float32_inside", "    x32, g32, b32 = x.float(), gamma.float(), beta.float()\n"
          "    mean = x32.mean(dim=-1, keepdim=True)\n"
          "    var = ((x32 - mean) ** 2).mean(dim=-1, keepdim=True)\n"
          "    return (g32 * (x32 - mean) / torch.sqrt(var + eps) + b32).to(x.dtype)\n",
          note="float32 arithmetic for float64 input stays within the stated 1e-5, eps law included"),
    right("ln_ok_moments", "    mean = x.mean(dim=-1, keepdim=True)\n"
          "    var = ((x * x).mean(dim=-1, keepdim=True) - mean * mean).clamp(min=0)\n" + RIGHT),
    right("ln_ok_sum_over_d", "    d = x.shape[-1]\n"
          "    mean = x.sum(dim=-1, keepdim=True) / d\n"
          "    var = ((x - mean) ** 2).sum(dim=-1, keepdim=True) / d\n" + RIGHT),
    right("ln_ok_std_biased", "    mean = x.mean(-1, True)\n"
          "    std = x.std(-1, unbiased=False, keepdim=True)\n"
          "    return gamma * (x - mean) / torch.sqrt(std * std + eps) + beta\n"),
    right("ln_ok_einsum", "    d = x.shape[-1]\n"
          "    mean = torch.einsum('...d->...', x).unsqueeze(-1) / d\n"
          "    c = x - mean\n"
          "    var = torch.einsum('...d,...d->...', c, c).unsqueeze(-1) / d\n"
          "    return torch.einsum('d,...d->...d', gamma, c / torch.sqrt(var + eps)) + beta\n"),
    right("ln_ok_methods", "    c = x.sub(x.mean(dim=-1, keepdim=True))\n"
          "    return c.div(c.pow(2).mean(dim=-1, keepdim=True).add(eps).sqrt()).mul(gamma).add(beta)\n"),
    right("ln_ok_unsqueeze", "    mean = x.mean(dim=-1).unsqueeze(-1)\n"
          "    var = ((x - mean) ** 2).mean(dim=-1)[..., None]\n" + RIGHT),
    right("ln_ok_helpers", "    centred = _centre(x)\n"
          "    return gamma * centred / torch.sqrt(_mean_last(centred * centred) + eps) + beta\n",
          head="def _mean_last(t):\n    return t.mean(dim=-1, keepdim=True)\n\n"
               "def _centre(t):\n    return t - _mean_last(t)\n\n"),
    right("ln_ok_eps_inside_mean", "    mean = x.mean(dim=-1, keepdim=True)\n"
          "    var_eps = ((x - mean) ** 2 + eps).mean(dim=-1, keepdim=True)\n"
          "    return gamma * (x - mean) / var_eps.sqrt() + beta\n"),
    right("ln_ok_reshape_2d", "    shape = x.shape\n"
          "    rows = x.reshape(-1, shape[-1])\n"
          "    mean = rows.mean(dim=1, keepdim=True)\n"
          "    var = ((rows - mean) ** 2).mean(dim=1, keepdim=True)\n"
          "    out = (rows - mean) / torch.sqrt(var + eps)\n"
          "    return (out * gamma + beta).reshape(shape)\n"),
]
