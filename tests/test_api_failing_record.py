"""Every failing record says why: `passed: false` comes with a `failure` holding its comparison, diagnosis and
reason, on every path a record can fail by: the embedded gradcheck or gradgradcheck alone, a mode that crashed,
a second order, and a backward that is not reentrant (nondeterministic, never a probable bug)."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.check.engine import ensure_failure
from support.functions import CubeWithJvp, NewStyleCube, NewStyleDouble

X = torch.linspace(0.5, 1.5, 4, dtype=torch.float64)


def _says_why(record: dict) -> dict:
    """The invariant itself: a failed record has a failure with a comparison, a diagnosis and a reason."""
    assert record["passed"] is False
    failure = record["failure"]
    assert failure is not None and failure == record["failures"][0]
    assert failure["comparison"] and failure["diagnosis"] and str(failure["reason"])
    return failure


class NoisyBackward(NewStyleDouble):
    """2x with a backward that adds run-to-run noise of 1e-13 relative, as cuDNN's or atomics' kernels do."""

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad * (1 + 1e-13 * torch.rand(()).item())


class WrongDoubleBackward(NewStyleCube):
    """x^3 whose backward has the right value but a wrong derivative: g + (g*g - (g*g).detach()) / 2."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        g = grad * 3 * x**2
        return g + (g * g - (g * g).detach()) / 2


class RaisingJvp(CubeWithJvp):
    """x^3 with a right backward and a jvp that returns the wrong shape (so forward AD raises)."""

    @staticmethod
    def jvp(ctx, tangent):
        return (3 * ctx.x**2 * tangent)[:-1]


def test_a_backward_that_is_not_reentrant_is_nondeterministic_and_names_the_setting():
    """Given a backward that adds noise of 1e-13 relative on each run (our comparisons pass within their
    tolerances, gradcheck's zero nondeterminism tolerance does not),
    when it is checked,
    then the record fails first on its repeats (two identical backward calls differ, beyond float64's repeat
    tolerance of zero), diagnosed nondeterministic, whose reason names torch.use_deterministic_algorithms(True)
    and cudnn.deterministic; gradcheck fails it too, and it is never a probable bug."""
    result = check(lambda x: NoisyBackward.apply(x).sum(), x=X, ledger=False)
    failure = _says_why(result.record)
    assert result.record["observations"]["torch_gradcheck"]["status"] == "failed"
    assert failure["comparison"] == "repeats"
    assert 0 < result.record["nondeterminism"]["largest_difference"] < 1e-10  # noise of 1e-13 relative
    assert failure["diagnosis"] == "nondeterministic"
    assert "torch.use_deterministic_algorithms(True)" in failure["reason"]
    assert "torch.backends.cudnn.deterministic" in failure["reason"]
    assert all(f["diagnosis"] != "probable_bug" for f in result.record["failures"])


def test_a_wrong_double_backward_seen_by_gradgradcheck_alone_still_says_why():
    """Given a backward whose value is right and whose derivative is wrong, checked with the second order,
    when the check runs,
    then the record fails with a failure naming a second-order comparison or gradgradcheck, with a reason."""
    result = check(lambda x: WrongDoubleBackward.apply(x).sum(), x=X, hessian="double_backward", ledger=False)
    failure = _says_why(result.record)
    assert all(row["passed"] for row in result.record["comparisons"])  # the first order is right
    assert failure["comparison"] in (
        "hessian_autograd_vs_finite_difference",
        "double_backward_in_grad_output_vs_finite_difference",
    )
    assert failure["diagnosis"] == "probable_bug" and failure["index"] is not None


def test_gradgradcheck_failing_alone_becomes_the_failure_naming_its_input():
    """Given a record whose comparisons all passed but whose embedded gradgradcheck failed (a second order no
    comparison of ours covers),
    when the invariant is enforced,
    then the record's failure is torch_gradgradcheck's, a probable bug naming the input its message names and
    quoting it."""
    record = {
        "passed": False,
        "inputs": {"x": [1.0], "w": [2.0]},
        "observations": {"torch_gradcheck": {"name": "torch_gradcheck", "status": "passed"}},
        "second_order": {
            "observations": {
                "torch_gradgradcheck": {
                    "name": "torch_gradgradcheck",
                    "status": "failed",
                    "reason": "Jacobian mismatch for output 0 with respect to input 1, numerical:tensor([[1.0]])",
                }
            }
        },
        "failures": [],
        "failure": None,
    }
    failure = _says_why(ensure_failure(record))
    assert failure["comparison"] == "torch_gradgradcheck" and failure["input"] == "w"
    assert failure["diagnosis"] == "probable_bug"
    assert "with respect to input 1" in failure["reason"]


def test_a_jvp_that_raises_is_a_failure_not_a_skip():
    """Given a Function with a right backward and a jvp returning a tangent of the wrong shape,
    when it is checked,
    then forward mode is failed (as gradcheck(check_forward_ad=True) fails it), not skipped, and the record's
    failure is forward_ad, a probable bug whose reason says the jvp raised."""
    result = check(lambda x: RaisingJvp.apply(x).sum(), x=X, ledger=False)
    failure = _says_why(result.record)
    assert result.record["function_modes"]["forward_ad"]["status"] == "failed"
    assert failure["comparison"] == "forward_ad"
    assert failure["diagnosis"] == "probable_bug"
    assert "forward-mode AD raised" in failure["reason"] and "RuntimeError" in failure["reason"]


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_conv2d_on_cuda_that_is_not_reentrant_is_nondeterministic():
    """Given a correct float64 conv2d on cuda with cuDNN free to pick nondeterministic algorithms,
    when it is checked,
    then a record that fails says why: every failure is nondeterministic (naming the setting), none a probable
    bug; and where gradcheck found it reentrant the record passes."""
    torch.backends.cudnn.deterministic = False
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    w = torch.randn(4, 3, 3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    result = check(lambda x, w: torch.nn.functional.conv2d(x, w).sum(), x=x, w=w, device="cuda", ledger=False)
    if result.record["passed"]:
        assert result.record["failure"] is None
        return
    failure = _says_why(result.record)
    assert failure["diagnosis"] == "nondeterministic"
    assert "torch.use_deterministic_algorithms(True)" in failure["reason"]
    assert all(f["diagnosis"] != "probable_bug" for f in result.record["failures"])
