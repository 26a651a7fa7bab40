"""A step that crosses a kink or a jump of the function near x is diagnosed so, never a probable bug;
a linear op is never a kink; a wrong backward at a smooth point is still a probable bug.

The OpInfo float32 family found three: topk (the step crosses a change of order, a kink of the sorted
values) and round(decimals=3) (the step crosses a rounding jump) were called probable_bug.
"""

from __future__ import annotations

import torch

from benchmarks.opinfo_samples import cases
from benchmarks.opinfo_sweep import autograd_gradient, run_ours
from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.check.diagnosis import kink_evidence
from jupyterlab_gradcheck.core.i18n import localize
from support.diagnosis_context import float64_context


def _opinfo_float32(op: str, index: int):
    found, _ = cases(ops=[op], family="float32")
    (case,) = [c for c in found if c.index == index]
    return run_ours(case.function, case.inputs, autograd_gradient(case.function, case.inputs), dtype="float32")


def test_round_to_three_decimals_in_float32_is_a_jump_within_the_step():
    """Given OpInfo's round.decimals_3 sample 0 in float32 (piecewise constant: autograd gives 0, and
    the finite differences' steps cross rounding jumps every 1e-3), when it is checked against
    autograd's own gradient, then the failure is diagnosed kink, saying the step crosses a jump, and
    the element it names is the one whose differences failed."""
    result = _opinfo_float32("round.decimals_3", 0)
    failure = result["failure"]
    assert failure["diagnosis"] == "kink"
    assert failure["reason"].startswith("the step crosses a jump of the function near x0[14]")
    assert failure["right"] == 0.0  # autograd's gradient of round
    assert localize(failure["reason"], "es").startswith("el paso cruza un salto de la función cerca de x0[14]")


def test_topk_in_float32_is_a_change_of_order_within_the_step():
    """Given OpInfo's topk samples 1 and 2 in float32 (at x0[2, 9, 2] a step of 0.16 reorders the
    values), when each is checked against autograd's gradient, then the failure is a kink crossed
    within the step, never probable_bug."""
    for index in (1, 2):
        failure = _opinfo_float32("topk", index)["failure"]
        assert failure["diagnosis"] == "kink"
        assert failure["reason"].startswith("the step crosses a kink of the function near x0[2, 9, 2]")
        assert localize(failure["reason"], "es").startswith("el paso cruza un punto anguloso de la función")


class OffAtOneElement(torch.autograd.Function):
    """sum(sin(x) * x) with a backward off by `factor` at element 3."""

    factor = 1.0 + 1e-4

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (torch.sin(x) * x).sum()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        slope = torch.cos(x) * x + torch.sin(x)
        slope[3] = slope[3] * OffAtOneElement.factor
        return grad * slope


def test_a_backward_off_by_1e_4_at_a_smooth_point_is_still_a_probable_bug():
    """Given sum(sin(x) x) in float64 with a backward off by 1e-4 relative at x[3] (a smooth point),
    when it is checked against its own backward, then it fails at x[3] as probable_bug, not as a
    kink or a jump within the step."""
    x = torch.linspace(0.3, 2.1, 8, dtype=torch.float64)
    result = check(OffAtOneElement, x=x, ledger=False)
    assert result.failure["diagnosis"] == "probable_bug"
    assert result.failure["index"] == [3]


def test_a_backward_off_by_one_percent_in_float32_is_still_a_probable_bug():
    """Given the same function in float32 with the backward x1.01 at x[3] (float32's tolerance is
    ~2e-3 relative, so 1e-2 is what it can see), when it is checked, then it fails at x[3] as
    probable_bug."""
    x = torch.linspace(0.3, 2.1, 8, dtype=torch.float32)
    OffAtOneElement.factor = 1.01
    try:
        result = check(OffAtOneElement, x=x, ledger=False)
    finally:
        OffAtOneElement.factor = 1.0 + 1e-4
    assert result.failure["diagnosis"] == "probable_bug"
    assert result.failure["index"] == [3]


def test_a_linear_op_whose_sum_cancels_is_not_a_kink():
    """Given w * ((x + 1e4) - 1e4), linear in x, whose intermediate 1e4 rounds the differenced values by
    ~eps * 1e4 / h (far above the bound from |phi| ~ 30 that the kink test allows), when the kink test
    runs at x[24] (where the one-sided differences agree to six digits, 1.32759 both), then it finds no
    kink, and the one-sided differences it reports agree to 1e-5 (that rounding, ~2e-16 * 1e4 / 1e-5)."""
    w = torch.linspace(0.5, 1.5, 30, dtype=torch.float64)
    x = torch.linspace(-1, 1, 30, dtype=torch.float64)
    context = float64_context(lambda x: (w * ((x + 1e4) - 1e4)).sum(), x)
    is_kink, forward, backward = kink_evidence(context, "x", 24)
    assert is_kink is False
    assert abs(forward - backward) < 1e-5 and abs(forward - float(w[24])) < 1e-5


def test_a_float64_conv_transpose3d_passes_with_no_element_called_a_kink():
    """Given conv_transpose3d (stride 2, padding 1), linear in each of its input, weight and bias, in
    float64 with a weighted sum over its 1,029 outputs, and autograd's gradient written as the expectation,
    when it is checked, then it passes with no failure and no element is diagnosed at all: a linear op is
    never a kink."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 4, 4, dtype=torch.float64)
    w = torch.randn(2, 3, 3, 3, 3, dtype=torch.float64)
    b = torch.randn(3, dtype=torch.float64)
    weights = torch.linspace(-1, 1, 3 * 7 * 7 * 7, dtype=torch.float64).reshape(1, 3, 7, 7, 7)

    def loss(x, w, b):
        return (torch.nn.functional.conv_transpose3d(x, w, b, stride=2, padding=1) * weights).sum()

    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    grads = torch.autograd.grad(loss(*leaves), leaves)
    result = check(loss, grad=dict(zip("xwb", grads)), x=x, w=w, b=b, ledger=False)
    assert (result.passed, result.failure) == (True, None)
    assert result.record["failures"] == []


def test_an_expectation_tensor_with_unallocated_storage_is_accepted():
    """Given sgn's autograd gradient (a zero tensor with no storage, autograd's placeholder) given to
    check() as the expectation, when it runs, then it is read as zeros and the check passes, as it
    does for OpInfo's sgn sample 0."""
    x = torch.tensor([1.5, -2.0, 0.25], dtype=torch.float64, requires_grad=True)
    (gradient,) = torch.autograd.grad(torch.sgn(x).sum(), x)
    assert gradient._is_zerotensor()  # the placeholder the API once could not read
    result = check(lambda x: torch.sgn(x).sum(), gradient, x=x.detach(), ledger=False)
    assert result.passed, result.summary()
    assert result.record["analytical_gradient"] == [0.0, 0.0, 0.0]
    found, _ = cases(ops=["sgn"], samples_per_op=1)
    (case,) = found
    sample = check(
        case.function, autograd_gradient(case.function, case.inputs)["x0"], x0=case.inputs["x0"], ledger=False
    )
    assert sample.passed, sample.summary()


def test_a_pole_and_a_rounding_jump_at_x_stay_kinks():
    """Given OpInfo's float32 tan sample 0 (x0[13, 3] next to a pole, where the one-sided quotients never
    settle) and round.decimals_3 sample 2 (x at a rounding jump), when each is checked, then each is
    still diagnosed kink by the one-sided test: the noise allowance for a linear op applies only where
    both sides' quotients have settled between the two steps."""
    tan = _opinfo_float32("tan", 0)["failure"]
    assert tan["diagnosis"] == "kink" and tan["reason"].startswith("one-sided differences at x0[13, 3] disagree")
    rounding = _opinfo_float32("round.decimals_3", 2)["failure"]
    assert rounding["diagnosis"] == "kink" and rounding["reason"].startswith("one-sided differences at x0 disagree")
