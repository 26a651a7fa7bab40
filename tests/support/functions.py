"""Custom autograd Functions with planted mistakes, shared by the stories that must catch them."""

from __future__ import annotations

import torch


class NewStyleCube(torch.autograd.Function):
    """x**3 as a new-style Function (forward without ctx, setup_context), for subclasses to give a backward."""

    @staticmethod
    def forward(x):
        return x**3

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.x = inputs[0]


class NewStyleDouble(torch.autograd.Function):
    """2x as a new-style Function (forward without ctx, setup_context saving nothing), for subclasses to give a
    backward."""

    @staticmethod
    def forward(x):
        return 2 * x

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass


class CubeWrongAt(NewStyleCube):
    """x**3 with a hand-written backward that adds 1 at one element only (new-style Function,
    no vmap rule: vmap refuses it, so the finite differences fall back to the loop)."""

    wrong_at = 123

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        slope = 3 * x**2
        slope[CubeWrongAt.wrong_at] += 1.0
        return grad * slope


class Cube(torch.autograd.Function):
    """x^3 with the derivative written correctly: 3 x^2."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        derivative = 3 * x * x
        pass  # a story may put a planted mistake on this line (tests/test_api_backward_expectation.py)
        return derivative * grad_output


class CubeDetachedBackward(Cube):
    """x^3 whose backward is right in value but cut from the graph: 3 x.detach()^2 (no double backward)."""

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x.detach() ** 2


class CubeWithJvp(NewStyleCube):
    """x^3 with a backward, a jvp and a vmap rule; `jvp_scale` plants a jvp mistake."""

    jvp_scale = 1.0

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 3 * x**2

    @staticmethod
    def jvp(ctx, tangent):
        return 3 * ctx.x**2 * tangent * CubeWithJvp.jvp_scale

    @staticmethod
    def vmap(info, in_dims, x):
        return x**3, in_dims[0]


def save_inputs_for_both_modes(ctx, inputs, output):
    """A new-style Function's setup_context that keeps its inputs for the backward and for the jvp."""
    ctx.save_for_backward(*inputs)
    ctx.save_for_forward(*inputs)


def planted(relative: float, at: int):
    """x*sin(x) as a Function whose backward is off by `relative` of its value at element `at` (right at 0)."""

    class Planted(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * torch.sin(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            slope = torch.sin(x) + x * torch.cos(x)
            slope[at] = slope[at] * (1 + relative)
            return g * slope

    return Planted
