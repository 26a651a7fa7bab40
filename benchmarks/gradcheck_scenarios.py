"""PyTorch's own gradcheck test scenarios, re-expressed as small functions and run two ways.

Each scenario is one situation that PyTorch's test suite puts to `torch.autograd.gradcheck`
(`test/test_autograd.py`: the `test_gradcheck_*` family, a Function returning its input,
non-tensor inputs, `once_differentiable`, `mark_dirty`, `mark_non_differentiable`; and custom
ops in the style of `test/test_custom_ops.py`), written here in our own words. A scenario says
what PyTorch's test expects of gradcheck ("pass" or "fail"), and for a failure which input is at
fault and the words our record's reason must use to name the fault.

`tests/core/check/test_pytorch_scenarios.py` asserts each one through `api.check`;
`python -m benchmarks.gradcheck_scenarios` prints the agreement table that `benchmarks/results.md`
keeps: per family, how many of our verdicts agree with the verdict PyTorch's test expects, and
how many of gradcheck's own do (gradcheck run bare, as its tests call it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch
from torch.autograd.function import once_differentiable

from jupyterlab_gradcheck.core.errors import SpecError

# -------------------- the Functions
# Small custom Functions, each right or wrong in one way, as PyTorch's tests write them.


class Cube(torch.autograd.Function):
    """x^3 with its right backward."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2


class CubeWrong(Cube):
    """x^3 whose backward forgets the 3."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x**2


class CubeIgnoresGradOutput(Cube):
    """x^3 whose backward returns the Jacobian's diagonal without multiplying by grad_output."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 3 * x**2


class CubeOnceDifferentiable(Cube):
    """x^3 with a right backward marked once_differentiable."""

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2


class ReturnsInput(torch.autograd.Function):
    """The identity, returning its input tensor itself (test_function_returns_input)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class ReturnsInputWrong(ReturnsInput):
    """The identity returning its input, with a backward that doubles."""

    @staticmethod
    def backward(ctx, g):
        return 2 * g


class Product(torch.autograd.Function):
    """x * y with its right backward."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x


class ProductWrongY(Product):
    """x * y whose backward for y is off by a factor 2."""

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, 2 * g * x


class ProductNeedsInputGrad(Product):
    """x * y computing only the gradients asked for (ctx.needs_input_grad), None for the others."""

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return (g * y if ctx.needs_input_grad[0] else None), (g * x if ctx.needs_input_grad[1] else None)


class Scaled(torch.autograd.Function):
    """x * scale for a Python float scale (a non-tensor input): None is its gradient."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x * scale

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, None


class ScaledGradForScale(Scaled):
    """x * scale whose backward returns a tensor gradient for the float scale."""

    @staticmethod
    def backward(ctx, g):
        return g * ctx.scale, torch.ones(())


class SetupContextSquare(torch.autograd.Function):
    """x^2 in the forward/setup_context style, with its right backward and jvp."""

    @staticmethod
    def forward(x):
        return x**2

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return 2 * x * g

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return 2 * x * t


class CubeWithJvp(Cube):
    """x^3 with a right backward and a right jvp."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        ctx.save_for_forward(x)
        return x**3

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * t


class CubeWrongJvp(CubeWithJvp):
    """x^3 with a right backward and a jvp that forgets the 3."""

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return x**2 * t


class CubeRaisingJvp(CubeWithJvp):
    """x^3 whose jvp raises."""

    @staticmethod
    def jvp(ctx, t):
        raise RuntimeError("this jvp is not written yet")


class ProductWrongJvpY(torch.autograd.Function):
    """x * y with a right backward and a jvp wrong in y's tangent only."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        ctx.save_for_forward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x

    @staticmethod
    def jvp(ctx, tx, ty):
        x, y = ctx.saved_tensors
        return tx * y + 2 * ty * x


class RaisingBackward(Cube):
    """x^3 whose backward raises."""

    @staticmethod
    def backward(ctx, g):
        raise ValueError("the backward is not written yet")


class WrongShapeGrad(Cube):
    """x^3 whose backward returns a gradient one element short."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (g * 3 * x**2)[:-1]


class SparseGradForDense(Cube):
    """x^3 whose backward returns its (right) gradient as a sparse COO tensor for a dense x."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (g * 3 * x**2).to_sparse()


class TooManyGrads(Cube):
    """x^3 whose backward returns two gradients for its one input."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2, g


class MutatesInput(torch.autograd.Function):
    """2x computed by doubling x in place, without mark_dirty."""

    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return 2 * g


class DoubleInPlaceDirty(torch.autograd.Function):
    """2x in place on its input, marked with mark_dirty and returned (right when given a copy)."""

    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return 2 * g


class SortWithIndices(torch.autograd.Function):
    """sort(x): the sorted values and their indices, the indices marked non-differentiable."""

    @staticmethod
    def forward(ctx, x):
        values, indices = x.sort()
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        return values, indices

    @staticmethod
    def backward(ctx, g, _g_indices):
        (indices,) = ctx.saved_tensors
        out = torch.zeros_like(g)
        out[indices] = g
        return out


class MarkedNonDifferentiableButIs(torch.autograd.Function):
    """(2x, x^2) with the second output marked non-differentiable though it depends on x."""

    @staticmethod
    def forward(ctx, x):
        square = x**2
        ctx.mark_non_differentiable(square)
        return 2 * x, square

    @staticmethod
    def backward(ctx, g, _g_square):
        return 2 * g


class HandlesUndefined(torch.autograd.Function):
    """(2x, 3x) whose backward handles an undefined grad_output (None) as zeros."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        ctx.shape = x.shape
        return 2 * x, 3 * x

    @staticmethod
    def backward(ctx, g1, g2):
        total = torch.zeros(ctx.shape, dtype=torch.float64)
        if g1 is not None:
            total = total + 2 * g1
        if g2 is not None:
            total = total + 3 * g2
        return total


class FailsOnUndefined(HandlesUndefined):
    """(2x, 3x) whose backward assumes both grad_outputs are defined."""

    @staticmethod
    def backward(ctx, g1, g2):
        return 2 * g1 + 3 * g2


class NoisyBackward(Cube):
    """x^3 whose backward adds a random error of 1e-4 relative on each call."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        exact = g * 3 * x**2
        return exact * (1 + 1e-4 * torch.randn_like(exact))


class RandomBackward(Cube):
    """x^3 whose backward multiplies its right gradient by a random sign-free factor near 1 per call
    (a dropout-like mask): deterministic only when seeded, wrong under batched gradients."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2 * (1 + 0.1 * torch.rand(()))


class RandomMaskJvp(CubeWithJvp):
    """x^3 whose jvp draws a dropout-like random mask that leaves this result unchanged: right one at a time,
    and refused by vmap (a random operation under vmap is batch-dependent)."""

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        keep = torch.rand(t.shape, dtype=t.dtype, device=t.device) >= 0.0  # every element kept
        return 3 * x**2 * t * keep


#: A workspace shared by every call, as a hand-written kernel keeps one.
WORKSPACE = torch.zeros(3, dtype=torch.float64)


class SharedWorkspaceJvp(CubeWithJvp):
    """x^3 whose jvp stages its tangent in a workspace shared by every call: right one tangent at a time,
    wrong for a batch of them (the batch cannot share one workspace)."""

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        WORKSPACE.copy_(t)
        return 3 * x**2 * WORKSPACE


class SharedWorkspaceBackward(Cube):
    """x^3 whose backward stages its grad_output in a workspace shared by every call: right one grad_output
    at a time, wrong for a batch of them."""

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        WORKSPACE.copy_(g)
        return 3 * x**2 * WORKSPACE


class ValueShape(torch.autograd.Function):
    """2x, or its first two elements once x[0] passes 1 (the shape depends on the values; checked at x[0] = 1)."""

    @staticmethod
    def forward(ctx, x):
        ctx.n = x.numel()
        return 2 * x if x[0] <= 1 else (2 * x)[:2]

    @staticmethod
    def backward(ctx, g):
        return torch.nn.functional.pad(2 * g, (0, ctx.n - g.numel()))


def value_dtype(x):
    """x * 2, in float32 once x[0] passes 1 (the dtype depends on the values; checked at x[0] = 1)."""
    y = x * 2
    return y if x[0] <= 1 else y.float()


class JvpOnly(torch.autograd.Function):
    """x^3 with a jvp and no backward (checked in forward mode only)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_forward(x)
        return x**3

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return 3 * x**2 * t


class JvpOnlyWrong(JvpOnly):
    """x^3 with a jvp that forgets the 3, and no backward."""

    @staticmethod
    def jvp(ctx, t):
        (x,) = ctx.saved_tensors
        return x**2 * t


def _custom_ops():
    """Two torch.library custom ops: a right one with its autograd formula, and one with none."""
    lib = "gradcheck_scenarios"

    @torch.library.custom_op(f"{lib}::cube", mutates_args=())
    def cube(x: torch.Tensor) -> torch.Tensor:
        return x**3

    def cube_setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    def cube_backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x**2

    cube.register_autograd(cube_backward, setup_context=cube_setup)

    @torch.library.custom_op(f"{lib}::cube_no_autograd", mutates_args=())
    def cube_no_autograd(x: torch.Tensor) -> torch.Tensor:
        return x**3

    return cube, cube_no_autograd


CUSTOM_CUBE, CUSTOM_CUBE_NO_AUTOGRAD = _custom_ops()


def _cube_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _cube_backward(ctx, g):
    (x,) = ctx.saved_tensors
    return g * 3 * x**2


def _registration_ops() -> dict:
    """torch.library custom ops whose schema or autograd registration is wrong in one way, as
    test_custom_ops.py's opcheck tests write them (test_incorrect_schema_mutation,
    test_autograd_registered_at_backend), and two right ones: {name: op}."""
    lib = "gradcheck_scenarios"

    @torch.library.custom_op(f"{lib}::cube_writes_x", mutates_args=())
    def cube_writes_x(x: torch.Tensor) -> torch.Tensor:
        y = x**3
        x.mul_(2)  # the schema says x is only read
        return y

    cube_writes_x.register_autograd(_cube_backward, setup_context=_cube_setup)

    @torch.library.custom_op(f"{lib}::cube_declares_x", mutates_args=("x",))
    def cube_declares_x(x: torch.Tensor) -> torch.Tensor:
        return x**3  # declares a write into x it does not make

    @torch.library.custom_op(f"{lib}::running_max", mutates_args=("out",))
    def running_max(x: torch.Tensor, out: torch.Tensor) -> None:
        out.copy_(torch.maximum(out, x))  # a buffer, declared: what mutates_args is for

    @torch.library.custom_op(f"{lib}::cube_wrong", mutates_args=())
    def cube_wrong(x: torch.Tensor) -> torch.Tensor:
        return x**3

    cube_wrong.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0] ** 2, setup_context=_cube_setup)

    # a kernel on the CPU key alone: autograd runs through its body, and no autograd kernel is registered
    backend = torch.library.Library(lib, "FRAGMENT")
    backend.define("cube_on_cpu(Tensor x) -> Tensor")
    backend.impl("cube_on_cpu", lambda x: x**3, "CPU")
    return {
        "writes_x": cube_writes_x,
        "declares_x": cube_declares_x,
        "running_max": running_max,
        "wrong": cube_wrong,
        "on_cpu": torch.ops.gradcheck_scenarios.cube_on_cpu.default,
        "library": backend,  # kept: the registration lasts as long as its Library
    }


REGISTRATION_OPS = _registration_ops()


def _tracks_max(x, out):
    """x^3 summed, beside a running maximum of x kept in the buffer `out` by a custom op."""
    REGISTRATION_OPS["running_max"](x, out)
    return (x**3).sum()


# -------------------- the scenarios

X = [0.5, 1.0, 1.5]
Y = [2.0, -1.0, 0.25]


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One of PyTorch's gradcheck test situations, in our words."""

    #: A short name, unique.
    name: str
    #: The family in PyTorch's tests it comes from.
    family: str
    #: What PyTorch's test expects of gradcheck: "pass" or "fail".
    pytorch: str
    #: The function as a user hands it to `check` (a callable of keyword inputs, or a Function).
    function: Callable
    #: The inputs as keyword arguments.
    inputs: dict
    #: Further keywords for `check` (fixed=, grad=, hessian=...).
    options: dict = dataclasses.field(default_factory=dict)
    #: For a failure: words our record's reason (or its failure's comparison) must contain.
    reason: tuple = ()
    #: For a failure: the input the failure names (None where the fault has no input).
    input: str | None = None
    #: Whether our answer is a refusal (bad input, nothing run), as gradcheck's is.
    refused: bool = False
    #: The keywords PyTorch's test passes to gradcheck (check_forward_ad=True, say).
    torch_options: dict = dataclasses.field(default_factory=dict)
    #: The custom op PyTorch's test also puts to `torch.library.opcheck` (OPCHECK_TESTS), called with the
    #: inputs and the fixed values as keywords.
    opcheck: Callable | None = None


def _tensor(values, **kw):
    return torch.tensor(values, dtype=torch.float64, **kw)


def _sparse():
    return _tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]]).to_sparse()


def _sum_of(function):
    return lambda x: function(x).sum()


SCENARIOS: list[Scenario] = [
    # ---- expected to pass
    Scenario(
        "built-in elementwise",
        "test_gradcheck_*",
        "pass",
        lambda x: torch.sin(x) * x,
        {"x": X},
        {"grad": "torch.cos(x)*x + torch.sin(x)"},
    ),
    Scenario("Function, right backward", "test_gradcheck_*", "pass", Cube, {"x": X}),
    Scenario("Function returns its input", "test_function_returns_input", "pass", ReturnsInput, {"x": X}),
    Scenario(
        "Function returns a view of its input",
        "test_function_returns_input",
        "pass",
        lambda x: ReturnsInput.apply(x[1:]),
        {"x": X},
    ),
    Scenario("once_differentiable, first order", "once_differentiable", "pass", CubeOnceDifferentiable, {"x": X}),
    Scenario("two inputs, right backward", "test_gradcheck_*", "pass", Product, {"x": X, "y": Y}),
    Scenario(
        "needs_input_grad, None for the others", "test_gradcheck_*", "pass", ProductNeedsInputGrad, {"x": X, "y": Y}
    ),
    Scenario(
        "non-tensor input, None as its gradient",
        "non-tensor inputs",
        "pass",
        Scaled,
        {"x": X},
        {"fixed": {"scale": 2.5}},
    ),
    Scenario(
        "setup_context style with a jvp",
        "test_gradcheck_forward_ad",
        "pass",
        SetupContextSquare,
        {"x": X},
        torch_options={"check_forward_ad": True},
    ),
    Scenario(
        "right jvp beside a right backward",
        "test_gradcheck_forward_ad",
        "pass",
        CubeWithJvp,
        {"x": X},
        torch_options={"check_forward_ad": True},
    ),
    Scenario("mark_dirty on a copy", "mark_dirty", "pass", lambda x: DoubleInPlaceDirty.apply(x.clone()), {"x": X}),
    Scenario(
        "mark_non_differentiable indices",
        "mark_non_differentiable",
        "pass",
        lambda x: SortWithIndices.apply(x)[0],
        {"x": [1.5, 0.5, 1.0]},
    ),
    Scenario(
        "undefined grad_output handled",
        "test_gradcheck_undefined_grad",
        "pass",
        lambda x: HandlesUndefined.apply(x)[0],
        {"x": X},
    ),
    Scenario(
        "custom op with its autograd formula", "test_custom_ops", "pass", CUSTOM_CUBE, {"x": X}, {"grad": "3*x**2"}
    ),
    Scenario(
        "complex input",
        "test_gradcheck_*",
        "pass",
        lambda x: (x * x.conj()).real.sum(),
        {"x": torch.tensor([1 + 2j, -0.5 + 0.25j], dtype=torch.complex128)},
        {"grad": lambda x: 2 * x},
    ),
    Scenario(
        "sparse COO input, dense semantics",
        "test_gradcheck_sparse_input",
        "pass",
        lambda x: (x.to_dense() ** 2).sum(),
        {"x": _sparse()},
        {"grad": "2*x.to_dense()"},
    ),
    Scenario(
        "sparse COO input, masked semantics",
        "test_gradcheck_sparse_input",
        "pass",
        lambda x: 2 * x.to_dense(),
        {"x": _sparse()},
        {"grad": lambda x: 2 * torch.ones_like(x.to_dense())},
        torch_options={"masked": True},
    ),
    Scenario(
        "jvp-only Function in forward mode",
        "test_gradcheck_check_forward_or_backward_only",
        "pass",
        JvpOnly,
        {"x": X},
        {"grad": "3*x**2"},
        torch_options={
            "check_forward_ad": True,
            "check_backward_ad": False,
            "check_undefined_grad": False,
            "check_batched_grad": False,
        },
    ),
    Scenario(
        "jvp-only Function, wrong jvp",
        "test_gradcheck_check_forward_or_backward_only",
        "fail",
        JvpOnlyWrong,
        {"x": X},
        {"grad": "3*x**2"},
        reason=("finite",),
        input="x",
        torch_options={
            "check_forward_ad": True,
            "check_backward_ad": False,
            "check_undefined_grad": False,
            "check_batched_grad": False,
        },
    ),
    # ---- expected to fail
    Scenario(
        "wrong backward",
        "test_gradcheck_jacobian_mismatch",
        "fail",
        CubeWrong,
        {"x": X},
        reason=("backward",),
        input="x",
    ),
    Scenario(
        "backward ignores grad_output",
        "test_gradcheck_backward_mul_by_grad_output",
        "fail",
        _sum_of(CubeIgnoresGradOutput.apply),
        {"x": X},
        reason=("grad_output",),
        input="x",
    ),
    Scenario(
        "wrong backward for the second input",
        "test_gradcheck_jacobian_mismatch",
        "fail",
        ProductWrongY,
        {"x": X, "y": Y},
        reason=("backward",),
        input="y",
    ),
    Scenario(
        "Function returns its input, wrong backward",
        "test_function_returns_input",
        "fail",
        ReturnsInputWrong,
        {"x": X},
        reason=("backward",),
        input="x",
    ),
    Scenario(
        "backward raises",
        "test_gradcheck_*",
        "fail",
        RaisingBackward,
        {"x": X},
        reason=("RaisingBackward.backward raised ValueError",),
    ),
    Scenario(
        "gradient of the wrong shape",
        "test_gradcheck_*",
        "fail",
        WrongShapeGrad,
        {"x": X},
        reason=("invalid gradient",),
    ),
    Scenario(
        "sparse gradient for a dense input",
        "test_gradcheck_sparse_input",
        "fail",
        SparseGradForDense,
        {"x": X},
        reason=("layout sparse_coo",),
    ),
    Scenario(
        "too many gradients",
        "test_gradcheck_*",
        "fail",
        TooManyGrads,
        {"x": X},
        reason=("incorrect number of gradients",),
    ),
    Scenario(
        "gradient for a fixed float argument",
        "non-tensor inputs",
        "fail",
        ScaledGradForScale,
        {"x": X},
        {"fixed": {"scale": 2.5}},
        reason=("scale",),
    ),
    Scenario(
        "input modified without mark_dirty",
        "mark_dirty",
        "fail",
        MutatesInput,
        {"x": X},
        reason=("modified its input x in place",),
        input="x",
    ),
    Scenario(
        "wrong jvp",
        "test_gradcheck_forward_ad",
        "fail",
        CubeWrongJvp,
        {"x": X},
        reason=("forward",),
        input="x",
        torch_options={"check_forward_ad": True},
    ),
    Scenario(
        "wrong jvp for the second input",
        "test_gradcheck_forward_ad",
        "fail",
        ProductWrongJvpY,
        {"x": X, "y": Y},
        reason=("forward",),
        input="y",
        torch_options={"check_forward_ad": True},
    ),
    Scenario(
        "jvp raises",
        "test_gradcheck_forward_ad",
        "fail",
        CubeRaisingJvp,
        {"x": X},
        reason=("jvp",),
        torch_options={"check_forward_ad": True},
    ),
    Scenario(
        "undefined grad_output not handled",
        "test_gradcheck_undefined_grad",
        "fail",
        lambda x: FailsOnUndefined.apply(x)[0],
        {"x": X},
        reason=("undefined (None)",),
    ),
    Scenario(
        "once_differentiable, second order",
        "once_differentiable",
        "fail",
        CubeOnceDifferentiable,
        {"x": X},
        {"hessian": "double_backward"},
        reason=("double backward",),
    ),
    Scenario(
        "nondeterministic backward",
        "test_gradcheck_nondeterministic",
        "fail",
        _sum_of(NoisyBackward.apply),
        {"x": X},
        reason=("nondetermin",),
    ),
    Scenario(
        "output shape depends on the values",
        "test_gradcheck_*",
        "fail",
        ValueShape,
        {"x": [1.0, 2.0, 3.0]},
        reason=("shape",),
    ),
    Scenario(
        "output dtype depends on the values",
        "test_gradcheck_*",
        "fail",
        value_dtype,
        {"x": [1.0, 2.0, 3.0]},
        {"grad": lambda x: 2 * torch.ones_like(x)},
        reason=("dtype",),
    ),
    Scenario(
        "non-differentiable output beside a differentiable one",
        "mark_non_differentiable",
        "pass",
        MarkedNonDifferentiableButIs,
        {"x": X},
        {"grad": (lambda x: 2 * torch.ones_like(x), None)},
    ),
    Scenario(
        "every output marked non-differentiable",
        "mark_non_differentiable",
        "fail",
        lambda x: MarkedNonDifferentiableButIs.apply(x)[1],
        {"x": X},
        {"grad": lambda x: 2 * x},
        reason=("non-differentiable",),
    ),
    Scenario(
        "custom op without an autograd formula",
        "test_custom_ops",
        "fail",
        CUSTOM_CUBE_NO_AUTOGRAD,
        {"x": X},
        {"grad": "3*x**2"},
        reason=("no autograd formula", "torch.library.register_autograd"),
    ),
    # ---- custom ops' schema and autograd registration, as torch.library.opcheck tests them
    Scenario(
        "custom op writes its input, schema says it only reads",
        "test_custom_ops",
        "fail",
        REGISTRATION_OPS["writes_x"],
        {"x": X},
        {"grad": "3*x**2"},
        reason=("writes into its argument x in place", "does not declare x mutable"),
        input="x",
        opcheck=REGISTRATION_OPS["writes_x"],
    ),
    Scenario(
        "custom op declares a write into its differentiable input",
        "test_custom_ops",
        "fail",
        REGISTRATION_OPS["declares_x"],
        {"x": X},
        {"grad": "3*x**2"},
        reason=("declares in mutates_args that it writes into x", "drop 'x' from mutates_args"),
        input="x",
        opcheck=REGISTRATION_OPS["declares_x"],
    ),
    Scenario(
        "custom op writes a buffer it declares",
        "test_custom_ops",
        "pass",
        _tracks_max,
        {"x": X},
        {"grad": "3*x**2", "fixed": {"out": torch.zeros(3, dtype=torch.float64)}},
        opcheck=REGISTRATION_OPS["running_max"],
    ),
    Scenario(
        "custom op kernel on the CPU key only",
        "test_custom_ops",
        "fail",
        REGISTRATION_OPS["on_cpu"],
        {"x": X},
        {"grad": "3*x**2"},
        reason=("test_autograd_registration", "no autograd kernel", "torch.library.register_autograd"),
        opcheck=REGISTRATION_OPS["on_cpu"],
    ),
    Scenario(
        "custom op with a wrong register_autograd",
        "test_custom_ops",
        "fail",
        REGISTRATION_OPS["wrong"],
        {"x": X},
        {"grad": "3*x**2"},
        reason=("suspect the backward",),
        input="x",
        opcheck=REGISTRATION_OPS["wrong"],
    ),
    Scenario(
        "random backward under batched gradients",
        "test_gradcheck_check_batched_grad",
        "fail",
        RandomBackward,
        {"x": X},
        reason=("nondeterministic",),
        input="x",
        torch_options={"check_batched_grad": True},
    ),
    Scenario(
        "backward with a shared workspace under batched gradients",
        "test_gradcheck_check_batched_grad",
        "fail",
        SharedWorkspaceBackward,
        {"x": X},
        reason=("batched_grad", "depends on the batch"),
        torch_options={"check_batched_grad": True},
    ),
    Scenario(
        "right jvp under batched forward gradients",
        "test_gradcheck_forward_ad_batched_grad",
        "pass",
        CubeWithJvp,
        {"x": X},
        torch_options={"check_forward_ad": True, "check_batched_forward_grad": True},
    ),
    Scenario(
        "random jvp under batched forward gradients",
        "test_gradcheck_forward_ad_batched_grad",
        "fail",
        RandomMaskJvp,
        {"x": X},
        reason=("batched_forward_grad", "the jvp draws random numbers"),
        torch_options={"check_forward_ad": True, "check_batched_forward_grad": True},
    ),
    Scenario(
        "jvp with a shared workspace under batched forward gradients",
        "test_gradcheck_forward_ad_batched_grad",
        "fail",
        SharedWorkspaceJvp,
        {"x": X},
        reason=("batched_forward_grad", "the jvp depends on the batch"),
        torch_options={"check_forward_ad": True, "check_batched_forward_grad": True},
    ),
    Scenario(
        "stride-0 input",
        "test_gradcheck_*",
        "fail",
        lambda x: x * 2.0,
        {"x": torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64).expand(2, 3)},
        {"grad": lambda x: 2 * torch.ones_like(x)},
        reason=("stride 0",),
        refused=True,
    ),
    Scenario(
        "no differentiable output",
        "test_gradcheck_check_no_differentiable_outputs",
        "fail",
        lambda x: torch.tensor(x.tolist(), dtype=torch.float64) * 2,
        {"x": X},
        {"grad": lambda x: 2 * torch.ones_like(x)},
        reason=("differentiabl",),
    ),
]


# -------------------- the two runs


def _as_tensor(value):
    return value if isinstance(value, torch.Tensor) else _tensor(value)


def _own_copy(tensor):
    """A copy gradcheck may perturb; an expanded view stays one (a copy would make it contiguous)."""
    if tensor.layout == torch.strided and 0 in tensor.stride():
        return tensor.detach()
    return tensor.detach().clone()


def ours(scenario: Scenario) -> dict:
    """Our record of the scenario, as a user runs it: `api.check`, no ledger."""
    from jupyterlab_gradcheck.api import check

    return check(scenario.function, **scenario.options, ledger=False, **scenario.inputs).record


#: The tests of torch.library.opcheck that a custom-op scenario's PyTorch side runs (its others are torch.compile's).
OPCHECK_TESTS = ("test_schema", "test_autograd_registration")


def theirs(scenario: Scenario) -> str:
    """gradcheck's verdict, called as PyTorch's tests call it: "pass", "fail" (GradcheckError or a
    raised error, which is how gradcheck fails), with its batched-gradient and forward-mode checks
    where the Function has a jvp, gradgradcheck where the scenario asks for the second order, and
    torch.library.opcheck where the scenario names a custom op."""
    function = getattr(scenario.function, "apply", scenario.function)
    names = list(scenario.inputs)
    fixed = scenario.options.get("fixed", {})
    tensors = tuple(_own_copy(_as_tensor(scenario.inputs[n])).requires_grad_(True) for n in names)

    def positional(*args):
        kwargs = dict(zip(names, args))
        if isinstance(scenario.function, type):
            return function(*args, *fixed.values())
        return function(**kwargs, **fixed)

    try:
        torch.autograd.gradcheck(positional, tensors, **scenario.torch_options)
        if "hessian" in scenario.options:
            torch.autograd.gradgradcheck(positional, tensors)
        if scenario.opcheck is not None:
            arguments = {n: _own_copy(_as_tensor(scenario.inputs[n])).requires_grad_(True) for n in names}
            arguments.update({n: _own_copy(v) if isinstance(v, torch.Tensor) else v for n, v in fixed.items()})
            torch.library.opcheck(scenario.opcheck, (), arguments, test_utils=OPCHECK_TESTS)
    except Exception:  # noqa: BLE001 (gradcheck fails by raising: GradcheckError or the function's own error)
        return "fail"
    return "pass"


def ours_verdict(record: dict) -> str:
    return "pass" if record.get("passed") else "fail"


def agreement() -> list[dict]:
    """Per family: scenarios, ours agreeing with PyTorch's expectation, gradcheck agreeing with it."""
    families: dict[str, dict] = {}
    for scenario in SCENARIOS:
        row = families.setdefault(
            scenario.family, {"family": scenario.family, "scenarios": 0, "ours": 0, "gradcheck": 0}
        )
        row["scenarios"] += 1
        try:
            verdict = ours_verdict(ours(scenario))
        except SpecError:
            verdict = "fail" if scenario.refused else "refused"
        except Exception:  # noqa: BLE001 (a crash never agrees)
            verdict = "crash"
        row["ours"] += verdict == scenario.pytorch
        row["gradcheck"] += theirs(scenario) == scenario.pytorch
    return list(families.values())


def main() -> None:
    rows = agreement()
    print("| family | scenarios | ours agree | gradcheck agrees |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['family']} | {row['scenarios']} | {row['ours']} | {row['gradcheck']} |")
    total = {k: sum(r[k] for r in rows) for k in ("scenarios", "ours", "gradcheck")}
    print(f"| all | {total['scenarios']} | {total['ours']} | {total['gradcheck']} |")


if __name__ == "__main__":
    main()
