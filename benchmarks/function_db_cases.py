"""The entries of PyTorch's custom-Function database, each turned into a function of named inputs.

`torch.testing._internal.autograd_function_db.autograd_function_db` lists custom
`torch.autograd.Function`s written as OpInfos (saving inputs, outputs or intermediates, several
outputs, `mark_dirty`, `mark_non_differentiable`, `once_differentiable`, generated vmap rules).
For each entry and each of its samples we build an `Entry`: the outer Function class, a call
that takes the class as a parameter (so that a mutant class can stand in for it,
benchmarks/function_db_mutants.py), the sample's differentiable tensors by name (`x0, x1, ...`)
and its other arguments held by the call, and the flags PyTorch's own tests pass to gradcheck
(`supports_forward_ad`, `check_batched_grad`, `supports_gradgrad`, ...).

The entries PyTorch's file itself gets wrong are flagged `apart` with the reason (WRONG_IN_FILE),
so that the benchmark lists them apart instead of counting them for or against anyone.
"""

from __future__ import annotations

import inspect
import types
from dataclasses import dataclass, field

#: Entries whose Function (or OpInfo) PyTorch's file gets wrong, and why (read from the file).
WRONG_IN_FILE = {
    "CubeGenVmapAutogradFunction": "its backward returns grad_output * 3x^2 + 6 * 3x^2: the second term "
    "should be 6 * grad_saved * x (the gradient of the 3x^2 output), so it is wrong at every x",
    "NumpySortAutogradFunction": "its forward returns the input unsorted (`torch.tensor(x)` of the numpy "
    "array it never sorted) while its backward and jvp permute by the sort's indices, so both are wrong for "
    "the function it computes (SortGenVmap, the same Function in torch ops, is right)",
    "NumpyCubeNotComposableAutogradFunction": "its once_differentiable backward returns 3x^2 without "
    "multiplying by grad_output (a forgotten grad_output), hidden wherever grad_output is 1",
    "ScaleGradGenVmapAutogradFunction": "a deliberate scaled gradient: the backward of x.clone() returns "
    "3.14 * grad_output (the true gradient is grad_output), on purpose, for vmap tests",
    "ZeroGradientsGenVmapAutogradFunction": "a deliberate test of zero gradients: the backward of "
    "(x.clone(), y.clone()) returns zeros (the true gradient is grad_output), on purpose, for vmap tests",
}


@dataclass
class Entry:
    """One sample of one entry: the outer Function, how to call it, its inputs and PyTorch's flags."""

    name: str  #: the OpInfo name, without the "AutogradFunction" suffix
    index: int  #: which sample of the entry
    function_class: type  #: the outer torch.autograd.Function
    call: object  #: (function_class, *differentiable tensors) -> output(s)
    inputs: dict  #: name -> detached tensor, on the device, in the dtype
    dtype: str
    device: str
    forward_ad: bool = False
    batched_grad: bool = False
    batched_forward_grad: bool = False
    gradgrad: bool = False
    fwgrad_bwgrad: bool = False
    once_differentiable: bool = False
    apart: str = ""  #: why PyTorch's file gets this entry wrong, or ""
    positions: list = field(default_factory=list)  #: the slot of each input among the Function's arguments
    extra: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.name}#{self.index}"

    def function(self, function_class=None):
        """The entry as a function of the named inputs, through `function_class` (default: its own)."""
        chosen = function_class or self.function_class
        names = list(self.inputs)

        def entry_function(**values):
            return self.call(chosen, *(values[n] for n in names))

        entry_function.__qualname__ = entry_function.__name__ = f"{self.name}_{self.index}"
        return entry_function


def _outer_class(op):
    """The outer Function of an OpInfo's op: the owner of `apply`, or the Function a lambda calls."""
    import torch

    owner = getattr(op, "__self__", None)
    if inspect.isclass(owner) and issubclass(owner, torch.autograd.Function):
        return owner, "apply"
    for name in op.__code__.co_names:
        found = op.__globals__.get(name)
        if inspect.isclass(found) and issubclass(found, torch.autograd.Function):
            return found, name
    raise ValueError(f"no autograd.Function found in the op of {op!r}")


def _caller(op, class_name: str):
    """(function_class, *args) -> op(*args) with `function_class` in place of the entry's own."""
    if class_name == "apply":
        return lambda function_class, *args: function_class.apply(*args)

    def call(function_class, *args):
        rebound = types.FunctionType(op.__code__, {**op.__globals__, class_name: function_class})
        return rebound(*args)

    return call


def _is_once_differentiable(function_class) -> bool:
    """A backward under `@once_differentiable` is a wrapper of the written one (functools.wraps)."""
    return hasattr(function_class.backward, "__wrapped__")


def _sample_call(call, sample, positions: list[int]):
    """A call taking only the differentiable tensors; the sample's other arguments held as they are."""
    every = [sample.input, *sample.args]
    kwargs = dict(sample.kwargs)

    def held(function_class, *tensors):
        args = list(every)
        for position, tensor in zip(positions, tensors):
            args[position] = tensor
        return call(function_class, *args, **kwargs)

    return held


def entries(*, dtype: str = "float64", device: str = "cpu", names: list[str] | None = None) -> list[Entry]:
    """Every sample of every entry (or of the entries `names`, short or full), in `dtype` on `device`."""
    import torch
    from torch.testing._internal.autograd_function_db import autograd_function_db

    found = []
    for op in autograd_function_db:
        short = op.name.removesuffix("AutogradFunction")
        if names and short not in names and op.name not in names:
            continue
        function_class, class_name = _outer_class(op.op)
        call = _caller(op.op, class_name)
        torch.manual_seed(0)
        for index, sample in enumerate(op.sample_inputs(device, getattr(torch, dtype), requires_grad=True)):
            every = [sample.input, *sample.args]
            positions = [
                k
                for k, v in enumerate(every)
                if isinstance(v, torch.Tensor) and v.requires_grad and v.is_floating_point()
            ]
            inputs = {f"x{k}": every[p].detach().clone() for k, p in enumerate(positions)}
            found.append(
                Entry(
                    short,
                    index,
                    function_class,
                    _sample_call(call, sample, positions),
                    inputs,
                    dtype,
                    device,
                    forward_ad=bool(op.supports_forward_ad),
                    batched_grad=bool(op.check_batched_grad),
                    batched_forward_grad=bool(op.check_batched_forward_grad),
                    gradgrad=bool(op.supports_gradgrad),
                    fwgrad_bwgrad=bool(op.supports_fwgrad_bwgrad),
                    once_differentiable=_is_once_differentiable(function_class),
                    apart=WRONG_IN_FILE.get(op.name, ""),
                    positions=positions,
                )
            )
    return found
