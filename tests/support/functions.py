"""Custom autograd Functions with planted mistakes, shared by the stories that must catch them."""

from __future__ import annotations

import torch


class CubeWrongAt(torch.autograd.Function):
    """x**3 with a hand-written backward that adds 1 at one element only (new-style Function,
    no vmap rule: vmap refuses it, so the finite differences fall back to the loop)."""

    wrong_at = 123

    @staticmethod
    def forward(x):
        return x**3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        slope = 3 * x**2
        slope[CubeWrongAt.wrong_at] += 1.0
        return grad * slope
