"""Eight hand-written autograd Functions of the kind real codebases carry, each with a planted-bug knob.

Each entry of `FUNCTIONS` is a `torch.autograd.Function` whose `backward` is a written formula (no
autograd inside it), wrapped as a Python callable taking its inputs by keyword, with seeded inputs
small enough that a float64 check of it takes well under a second. The backward code is the same
for every floating dtype, so one Function can be checked in float64 (where finite differences are
sharp) and in float32 (where real models run it).

`make(rel)` gives the callable with the gradient of the first input multiplied by (1 + rel) at
one element, the first in flat order of the largest |gradient| (`plant`); `make(0.0)` is the
correct Function. The eight, in order: layer norm, softmax cross-entropy, GELU (erf form),
scaled dot-product attention, depthwise conv1d, rotary position embedding, bias + SiLU, RMSNorm.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

#: Added to the variance (layer norm) and the mean square (RMSNorm), as the usual modules add it.
NORM_EPS = 1e-5


@dataclass(frozen=True)
class HandWritten:
    """One hand-written Function: its name, `make(rel) -> f(**inputs)` and `inputs(dtype) -> {name: tensor}`."""

    name: str
    make: Callable[[float], Callable]
    inputs: Callable[[torch.dtype], dict[str, torch.Tensor]]


def plant(gradient: torch.Tensor, rel: float) -> torch.Tensor:
    """`gradient` with its largest-magnitude element (the first in flat order on a tie) times (1 + rel).

    The one planted bug of every Function here: a backward wrong by a known relative error at one
    known element, the element where a check has the most room to see it."""
    if rel == 0:
        return gradient
    flat = gradient.flatten().clone()
    index = flat.abs().argmax()
    flat[index] = flat[index] * (1 + rel)
    return flat.reshape(gradient.shape)


def _over_leading(tensor: torch.Tensor) -> torch.Tensor:
    """Sum over every dimension but the last: the gradient of a parameter broadcast along the last one."""
    return tensor.reshape(-1, tensor.shape[-1]).sum(0)


def _drawn(seed: int, dtype: torch.dtype, *shapes) -> list[torch.Tensor]:
    """Standard normal tensors of `shapes` drawn in float64 from one seed, then rounded to `dtype`, so
    that every dtype sees the same values."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype) for shape in shapes]


# -------------------- 1. layer norm


class LayerNorm(torch.autograd.Function):
    """y = (x - mean) / sqrt(var + eps) * weight + bias over the last dimension."""

    @staticmethod
    def forward(ctx, x, weight, bias, rel):
        mean = x.mean(-1, keepdim=True)
        centred = x - mean
        rstd = ((centred * centred).mean(-1, keepdim=True) + NORM_EPS).rsqrt()
        normed = centred * rstd
        ctx.save_for_backward(normed, rstd, weight)
        ctx.rel = rel
        return normed * weight + bias

    @staticmethod
    def backward(ctx, grad):
        normed, rstd, weight = ctx.saved_tensors
        scaled = grad * weight
        dx = rstd * (scaled - scaled.mean(-1, keepdim=True) - normed * (scaled * normed).mean(-1, keepdim=True))
        return plant(dx, ctx.rel), _over_leading(grad * normed), _over_leading(grad), None


def _layer_norm(rel: float) -> Callable:
    def layer_norm(x, weight, bias):
        return LayerNorm.apply(x, weight, bias, rel)

    return layer_norm


def _layer_norm_inputs(dtype: torch.dtype) -> dict:
    x, weight, bias = _drawn(1, dtype, (4, 8), (8,), (8,))
    return {"x": x, "weight": 1 + 0.5 * weight, "bias": bias}


# -------------------- 2. softmax cross-entropy


class CrossEntropy(torch.autograd.Function):
    """The mean over rows of -log softmax(x)[row, target[row]]; the integer target gets no gradient."""

    @staticmethod
    def forward(ctx, x, target, rel):
        log_normaliser = torch.logsumexp(x, -1, keepdim=True)
        picked = x.gather(-1, target.unsqueeze(-1))
        ctx.save_for_backward(x, log_normaliser, target)
        ctx.rel = rel
        return (log_normaliser - picked).mean()

    @staticmethod
    def backward(ctx, grad):
        x, log_normaliser, target = ctx.saved_tensors
        probabilities = (x - log_normaliser).exp()
        one_hot = torch.zeros_like(x).scatter_(-1, target.unsqueeze(-1), 1)
        dx = (probabilities - one_hot) * (grad / x.shape[0])
        return plant(dx, ctx.rel), None, None


#: The fixed classes of the cross-entropy's six rows (five classes each).
TARGET = torch.randint(0, 5, (6,), generator=torch.Generator().manual_seed(2))


def _cross_entropy(rel: float) -> Callable:
    def cross_entropy(x):
        return CrossEntropy.apply(x, TARGET, rel)

    return cross_entropy


def _cross_entropy_inputs(dtype: torch.dtype) -> dict:
    (x,) = _drawn(2, dtype, (6, 5))
    return {"x": x}


# -------------------- 3. GELU


class Gelu(torch.autograd.Function):
    """y = x * Phi(x), Phi the standard normal distribution function (the exact erf form)."""

    @staticmethod
    def forward(ctx, x, rel):
        ctx.save_for_backward(x)
        ctx.rel = rel
        return x * 0.5 * (1 + torch.erf(x / math.sqrt(2)))

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        distribution = 0.5 * (1 + torch.erf(x / math.sqrt(2)))
        density = torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        return plant(grad * (distribution + x * density), ctx.rel), None


def _gelu(rel: float) -> Callable:
    def gelu(x):
        return Gelu.apply(x, rel)

    return gelu


def _gelu_inputs(dtype: torch.dtype) -> dict:
    (x,) = _drawn(3, dtype, (4, 6))
    return {"x": 1.5 * x}


# -------------------- 4. scaled dot-product attention


class Attention(torch.autograd.Function):
    """softmax(q k^T / sqrt(d)) v over the last two dimensions."""

    @staticmethod
    def forward(ctx, q, k, v, rel):
        scale = q.shape[-1] ** -0.5
        weights = torch.softmax(q @ k.transpose(-2, -1) * scale, -1)
        ctx.save_for_backward(q, k, v, weights)
        ctx.scale, ctx.rel = scale, rel
        return weights @ v

    @staticmethod
    def backward(ctx, grad):
        q, k, v, weights = ctx.saved_tensors
        dv = weights.transpose(-2, -1) @ grad
        dweights = grad @ v.transpose(-2, -1)
        dscores = weights * (dweights - (dweights * weights).sum(-1, keepdim=True)) * ctx.scale
        dq = dscores @ k
        dk = dscores.transpose(-2, -1) @ q
        return plant(dq, ctx.rel), dk, dv, None


def _attention(rel: float) -> Callable:
    def attention(q, k, v):
        return Attention.apply(q, k, v, rel)

    return attention


def _attention_inputs(dtype: torch.dtype) -> dict:
    q, k, v = _drawn(4, dtype, (2, 4, 8), (2, 5, 8), (2, 5, 6))
    return {"q": q, "k": k, "v": v}


# -------------------- 5. depthwise conv1d


class DepthwiseConv1d(torch.autograd.Function):
    """Each channel of x (batch, channels, length) cross-correlated with its own kernel (channels, 1, k),
    zero-padded by `padding` on each side."""

    @staticmethod
    def forward(ctx, x, weight, padding, rel):
        ctx.save_for_backward(x, weight)
        ctx.padding, ctx.rel = padding, rel
        return F.conv1d(x, weight, padding=padding, groups=x.shape[1])

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        padding, width = ctx.padding, weight.shape[-1]
        # x[l] met kernel tap j in output l - j + padding: the transposed convolution sums those
        dx = F.conv_transpose1d(grad, weight, padding=padding, groups=x.shape[1])
        # tap j met padded x[l + j] in output l: every window of the padded input against the output
        windows = F.pad(x, (padding, padding)).unfold(-1, width, 1)  # (batch, channels, out, k)
        dweight = (windows * grad.unsqueeze(-1)).sum((0, 2)).unsqueeze(1)
        return plant(dx, ctx.rel), dweight, None, None


def _depthwise_conv1d(rel: float) -> Callable:
    def depthwise_conv1d(x, weight):
        return DepthwiseConv1d.apply(x, weight, 1, rel)

    return depthwise_conv1d


def _depthwise_conv1d_inputs(dtype: torch.dtype) -> dict:
    x, weight = _drawn(5, dtype, (2, 3, 10), (3, 1, 3))
    return {"x": x, "weight": weight}


# -------------------- 6. rotary position embedding


def rotary_tables(x: torch.Tensor, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin (seq, dim/2) of position p times frequency base^(-2i/dim), in x's dtype and device."""
    seq, dim = x.shape
    frequencies = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    angles = torch.arange(seq, dtype=torch.float64).unsqueeze(-1) * frequencies
    return angles.cos().to(x), angles.sin().to(x)


class Rotary(torch.autograd.Function):
    """Each pair (x[:, i], x[:, i + dim/2]) of x (seq, dim) rotated by its position's angle."""

    @staticmethod
    def forward(ctx, x, cos, sin, rel):
        first, second = x.chunk(2, -1)
        ctx.save_for_backward(cos, sin)
        ctx.rel = rel
        return torch.cat((first * cos - second * sin, first * sin + second * cos), -1)

    @staticmethod
    def backward(ctx, grad):
        cos, sin = ctx.saved_tensors
        first, second = grad.chunk(2, -1)
        # a rotation's transpose is the rotation by the opposite angle
        dx = torch.cat((first * cos + second * sin, second * cos - first * sin), -1)
        return plant(dx, ctx.rel), None, None, None


def _rotary(rel: float) -> Callable:
    def rotary(x):
        return Rotary.apply(x, *rotary_tables(x), rel)

    return rotary


def _rotary_inputs(dtype: torch.dtype) -> dict:
    (x,) = _drawn(6, dtype, (6, 8))
    return {"x": x}


# -------------------- 7. bias + SiLU


class BiasSilu(torch.autograd.Function):
    """y = z * sigmoid(z) for z = x + bias, the bias broadcast along the last dimension."""

    @staticmethod
    def forward(ctx, x, bias, rel):
        z = x + bias
        ctx.save_for_backward(z)
        ctx.rel = rel
        return z * torch.sigmoid(z)

    @staticmethod
    def backward(ctx, grad):
        (z,) = ctx.saved_tensors
        gate = torch.sigmoid(z)
        dz = grad * gate * (1 + z * (1 - gate))
        return plant(dz, ctx.rel), _over_leading(dz), None


def _bias_silu(rel: float) -> Callable:
    def bias_silu(x, bias):
        return BiasSilu.apply(x, bias, rel)

    return bias_silu


def _bias_silu_inputs(dtype: torch.dtype) -> dict:
    x, bias = _drawn(7, dtype, (4, 8), (8,))
    return {"x": x, "bias": 0.5 * bias}


# -------------------- 8. RMSNorm


class RmsNorm(torch.autograd.Function):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dimension."""

    @staticmethod
    def forward(ctx, x, weight, rel):
        rstd = ((x * x).mean(-1, keepdim=True) + NORM_EPS).rsqrt()
        normed = x * rstd
        ctx.save_for_backward(normed, rstd, weight)
        ctx.rel = rel
        return normed * weight

    @staticmethod
    def backward(ctx, grad):
        normed, rstd, weight = ctx.saved_tensors
        scaled = grad * weight
        dx = rstd * (scaled - normed * (scaled * normed).mean(-1, keepdim=True))
        return plant(dx, ctx.rel), _over_leading(grad * normed), None


def _rms_norm(rel: float) -> Callable:
    def rms_norm(x, weight):
        return RmsNorm.apply(x, weight, rel)

    return rms_norm


def _rms_norm_inputs(dtype: torch.dtype) -> dict:
    x, weight = _drawn(8, dtype, (4, 8), (8,))
    return {"x": x, "weight": 1 + 0.5 * weight}


FUNCTIONS: list[HandWritten] = [
    HandWritten("layer norm", _layer_norm, _layer_norm_inputs),
    HandWritten("softmax cross-entropy", _cross_entropy, _cross_entropy_inputs),
    HandWritten("GELU", _gelu, _gelu_inputs),
    HandWritten("scaled dot-product attention", _attention, _attention_inputs),
    HandWritten("depthwise conv1d", _depthwise_conv1d, _depthwise_conv1d_inputs),
    HandWritten("rotary position embedding", _rotary, _rotary_inputs),
    HandWritten("bias + SiLU", _bias_silu, _bias_silu_inputs),
    HandWritten("RMSNorm", _rms_norm, _rms_norm_inputs),
]
