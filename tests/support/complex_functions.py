"""Complex custom autograd Functions: z^2 with PyTorch's convention, and the same with the conj forgotten."""

from __future__ import annotations

import torch


class Square(torch.autograd.Function):
    """z^2 with PyTorch's convention: grad_z = grad_output * conj(2z)."""

    @staticmethod
    def forward(ctx, z):
        ctx.save_for_backward(z)
        return z * z

    @staticmethod
    def backward(ctx, grad_output):
        (z,) = ctx.saved_tensors
        return grad_output * (2 * z).conj()


class SquareForgetsConj(Square):
    """z^2 whose backward returns grad_output * 2z: the holomorphic derivative, not PyTorch's gradient."""

    @staticmethod
    def backward(ctx, grad_output):
        (z,) = ctx.saved_tensors
        return grad_output * 2 * z
