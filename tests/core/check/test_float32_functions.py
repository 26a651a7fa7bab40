"""Eight hand-written autograd Functions (benchmarks/float32_functions.py): their backwards are right, the
one-element bug each can carry sits where it is said to, and check() finds it in float64 at that element.

The catalogue is what float32 figures are measured on; these stories hold it to its word in float64 first,
where finite differences are sharp enough to judge a backward to well below the planted 1e-4.
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.float32_functions import FUNCTIONS, HandWritten
from jupyterlab_gradcheck import check

#: The planted relative error of the stories: far above float64's finite-difference allowance (about 4e-9
#: relative, core/check/record/spec.py), below gradcheck's default rtol of 1e-3.
REL = 1e-4

CASES = [pytest.param(function, id=function.name) for function in FUNCTIONS]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One intra-op thread while these run: tensors of a few hundred elements gain nothing from more, and on
    a shared machine the threads' contention is most of their time."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _leaves(function: HandWritten, dtype=torch.float64) -> dict[str, torch.Tensor]:
    return {name: value.clone().requires_grad_() for name, value in function.inputs(dtype).items()}


def _gradcheck(function: HandWritten, rel: float) -> bool:
    """torch.autograd.gradcheck at its defaults (slow mode, atol 1e-5, rtol 1e-3) on the float64 inputs."""
    leaves = _leaves(function)
    names, call = list(leaves), function.make(rel)
    return torch.autograd.gradcheck(
        lambda *values: call(**dict(zip(names, values))), tuple(leaves.values()), raise_exception=False
    )


def _first_gradient(function: HandWritten, rel: float, cotangent: str, dtype=torch.float64) -> torch.Tensor:
    """The backward's gradient of the first input, for a cotangent of ones (what check() uses) or a seeded
    normal one."""
    leaves = _leaves(function, dtype)
    output = function.make(rel)(**leaves)
    if cotangent == "ones":
        v = torch.ones_like(output)
    else:
        v = torch.randn(output.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(dtype)
    (gradient,) = torch.autograd.grad(output, next(iter(leaves.values())), v)
    return gradient


def _largest(gradient: torch.Tensor) -> list[int]:
    """The index of the first largest |element|, as a record writes an index."""
    return [int(i) for i in torch.unravel_index(gradient.abs().argmax(), gradient.shape)]


def test_the_catalogue_holds_the_eight_in_order_and_small():
    """Given the catalogue, when it is read, then it holds the eight Functions in the order they were asked
    for, each input in float64 is at most a few hundred elements, and every callable's output is one tensor."""
    assert [function.name for function in FUNCTIONS] == [
        "layer norm",
        "softmax cross-entropy",
        "GELU",
        "scaled dot-product attention",
        "depthwise conv1d",
        "rotary position embedding",
        "bias + SiLU",
        "RMSNorm",
    ]
    for function in FUNCTIONS:
        inputs = function.inputs(torch.float64)
        assert all(value.dtype == torch.float64 and value.numel() <= 300 for value in inputs.values())
        assert isinstance(function.make(0.0)(**inputs), torch.Tensor)


@pytest.mark.parametrize("function", CASES)
def test_each_correct_backward_passes_gradcheck_in_float64(function):
    """Given one of the eight with no planted error, when torch.autograd.gradcheck runs on it in float64
    at its defaults, then it passes: the hand-written backward is the derivative of the forward."""
    assert _gradcheck(function, 0.0) is True


@pytest.mark.parametrize("function", CASES)
def test_gradcheck_at_its_defaults_misses_a_1e4_error_and_finds_a_1e2_one(function):
    """Given one of the eight with its first input's largest gradient element 1e-4 too big,
    when torch.autograd.gradcheck runs on it in float64 at its defaults,
    then it still passes (each Jacobian entry is allowed 1e-5 + 1e-3 of its size, ten times the error);
    with the element 1e-2 too big it fails. check() finds the 1e-4 one (the stories below)."""
    assert _gradcheck(function, REL) is True
    assert _gradcheck(function, 1e-2) is False


@pytest.mark.parametrize("cotangent", ["ones", "normal"])
@pytest.mark.parametrize("function", CASES)
def test_the_planted_error_is_one_element_at_the_largest_gradient(function, cotangent):
    """Given one of the eight, correct and with rel=1e-4, when both backwards run on the same inputs and the
    same cotangent, then their first-input gradients differ at one element alone, the first largest |correct
    gradient|, and by 1e-4 of it; the backward's gradients keep the inputs' dtype in float32 and float64."""
    right = _first_gradient(function, 0.0, cotangent)
    wrong = _first_gradient(function, REL, cotangent)
    differing = (wrong != right).nonzero().tolist()
    assert differing == [_largest(right)]
    at = tuple(differing[0])
    # wrong[at] is right[at] * (1 + 1e-4) rounded once: off by eps|right[at]| = 2e-16 of it, 2e-12 of the
    # difference; 1e-9 leaves room for that rounding alone
    assert (wrong[at] - right[at]).item() == pytest.approx(REL * right[at].item(), rel=1e-9)
    for dtype in (torch.float32, torch.float64):
        assert _first_gradient(function, REL, cotangent, dtype).dtype == dtype


@pytest.mark.parametrize("function", CASES)
def test_check_passes_each_correct_one_in_float64_against_its_own_backward(function):
    """Given one of the eight with no planted error, when check() runs it in float64 with no grad=, then it
    passes, its expectation named as the backward of that Function."""
    result = check(function.make(0.0), ledger=False, **function.inputs(torch.float64))
    assert result.passed, result.failure
    assert result.record["dtype"] == "float64"
    assert result.record["origin"].startswith("the backward of benchmarks.float32_functions.")


@pytest.mark.parametrize("function", CASES)
def test_check_fails_each_1e4_wrong_one_in_float64_at_the_planted_element(function):
    """Given one of the eight with its first input's largest gradient element 1e-4 too big,
    when check() runs it in float64 with no grad=,
    then it fails: finite differences disagree with the backward at that input and that element (the first
    largest |gradient| under check()'s cotangent of ones), called a probable bug."""
    inputs = function.inputs(torch.float64)
    result = check(function.make(REL), ledger=False, **inputs)
    assert not result.passed
    failure = result.failure
    assert (failure["comparison"], failure["input"], failure["index"], failure["diagnosis"]) == (
        "autograd_vs_finite_difference",
        next(iter(inputs)),
        _largest(_first_gradient(function, 0.0, "ones")),
        "probable_bug",
    )
