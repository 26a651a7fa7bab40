"""A custom autograd Function whose backward is wrong at one element only: the bug the checks must name."""

from __future__ import annotations

import torch


def wrong_at(forward, gradient, index: int, error: float, *, scaled: bool = False):
    """A Function computing `forward(x)` whose backward is `gradient(x)` (times grad_output) plus `error` at `index`.

    With `scaled`, the planted error is also multiplied by grad_output[index] (one wrong diagonal
    entry of J, so the backward stays linear in grad_output); otherwise it is added to v^T J as is
    (for a scalar output, where both are the same).
    """

    class WrongAt(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return forward(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            result = gradient(x, grad)
            result[index] += error * (grad[index] if scaled else 1.0)
            return result

    return WrongAt
