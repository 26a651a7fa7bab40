"""The engine's observations and comparisons, on the course's small functions."""

from __future__ import annotations

import pytest
import torch

from jupyterlab_gradcheck.core.check.engine import check_callable, run_check


def _comparison(record, name, input_name="x"):
    return next(c for c in record["comparisons"] if c["name"] == name and c["input"] == input_name)


def test_vector_sum_accumulates_and_clears():
    """Given (x**2).sum() on [1, 2, 3] declared as 2*x,
    when it runs,
    then it passes with shape [3]; pass 2 without clearing holds [4, 8, 12]; the pass after
    x.grad = None equals pass 1; autograd.grad left .grad untouched."""
    record = run_check({"function": "(x**2).sum()", "x": [1, 2, 3], "analytical_gradient": "2*x"})
    assert record["passed"] is True
    observations = record["observations"]
    pass_1 = observations["backward_pass_1"]["gradients"]["x"]
    assert pass_1["shape"] == [3] and pass_1["value"] == [2.0, 4.0, 6.0]
    assert observations["backward_pass_2_accumulated"]["gradients"]["x"]["value"] == [4.0, 8.0, 12.0]
    assert observations["after_clear_none"]["gradients"]["x"]["value"] == pass_1["value"]
    assert observations["autograd_grad"]["grad_attribute_untouched"] is True
    assert record["symbolic"]["status"] == "agrees"


def test_float32_tiny_fixed_step_is_precision_limited_and_default_step_passes():
    """Given sin at 1.0 in float32,
    when the finite difference uses a fixed central step of 1e-7,
    then that comparison fails, diagnosed precision_limited; with the default float32 step
    every comparison passes."""
    base = {"function": "torch.sin(x)", "x": 1.0, "dtype": "float32", "analytical_gradient": "torch.cos(x)"}
    tiny = run_check({**base, "finite_difference": {"scheme": "central", "step": 1e-7}})
    fd = _comparison(tiny, "autograd_vs_finite_difference")
    assert fd["passed"] is False
    assert tiny["failure"]["comparison"] == "autograd_vs_finite_difference"
    assert tiny["failure"]["diagnosis"] == "precision_limited"
    assert _comparison(tiny, "analytical_vs_autograd_grad")["passed"] is True
    default = run_check(base)
    assert default["passed"] is True
    assert default["observations"]["finite_difference"]["step"] == pytest.approx(0.0049, rel=0.01)
    assert default["observations"]["torch_gradcheck"]["status"] == "skipped"


def test_relu_at_zero_is_a_kink():
    """Given relu at 0 declared with derivative 0,
    when it runs,
    then the finite-difference comparison fails (central gives 0.5) and is diagnosed kink
    from one-sided differences 1 and 0."""
    record = run_check({"function": "torch.relu(x)", "x": 0, "analytical_gradient": 0})
    fd = _comparison(record, "autograd_vs_finite_difference")
    assert fd["passed"] is False and fd["worst"]["left"] == pytest.approx(0.5)
    failure = next(f for f in record["failures"] if f["comparison"] == "autograd_vs_finite_difference")
    assert failure["diagnosis"] == "kink"
    assert "forward 1" in failure["reason"] and "backward 0" in failure["reason"]
    assert record["observations"]["torch_gradcheck"]["status"] == "failed"


class _Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * 2 * x


class _SquareWrongAtOne(_Square):
    """The same forward, with a hand-written backward whose bug only shows at element 1."""

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        result = grad * 2 * x
        result[1] = result[1] * 3
        return result


def test_custom_autograd_function_through_the_python_api():
    """Given a custom autograd.Function whose backward triples element 1,
    when checked through check_callable against 2*x,
    then it fails pointing at index [1] with the hand derivation and finite differences
    agreeing on 4 while autograd says 12; the correct Function passes."""
    wrong = check_callable(lambda x: _SquareWrongAtOne.apply(x).sum(), {"x": [1.0, 2.0, 3.0]}, grad=lambda x: 2 * x)
    assert wrong["passed"] is False
    failure = wrong["failure"]
    assert failure["index"] == [1]
    assert (failure["left"], failure["right"]) == (4.0, 12.0)
    assert failure["diagnosis"] == "probable_bug" and "suspect the backward" in failure["reason"]
    fd = _comparison(wrong, "autograd_vs_finite_difference")
    assert fd["worst"]["index"] == [1]
    right = check_callable(lambda x: _Square.apply(x).sum(), {"x": [1.0, 2.0, 3.0]}, grad=lambda x: 2 * x)
    assert right["passed"] is True
    assert right["symbolic"]["status"] == "skipped"


def test_step_sweep_minimum_is_interior_near_cube_root_of_eps():
    """Given exp at 1.0 in float64,
    when the step sweep runs,
    then the smallest float64 error sits at an interior step within a decade of
    eps^(1/3) ~ 6e-6, and the float32 series bottoms out at a larger step."""
    record = run_check({"function": "torch.exp(x)", "x": 1.0, "analytical_gradient": "torch.exp(x)"})
    series = {s["dtype"]: s for s in record["step_sweep"]["series"]}
    f64 = series["float64"]
    best = f64["errors"].index(min(f64["errors"]))
    assert 0 < best < len(f64["steps"]) - 1
    # A decade either side of eps^(1/3) = 6.06e-6: the sweep samples whole decades only.
    assert 6.06e-7 <= f64["steps"][best] <= 6.06e-5
    assert f64["errors"][best] < 1e-9
    assert series["float32"]["best_step"] > f64["best_step"]


def test_several_inputs_and_non_scalar_output_record_grad_output():
    """Given sin(x)*y with a vector x and a vector y of the same shape (non-scalar output),
    when it runs with the default grad_output,
    then gradients are reported per input, the grad_output used is ones of the output
    shape, and the expectations written as a mapping pass."""
    record = run_check(
        {
            "function": "torch.sin(x)*y",
            "inputs": {"x": [0.5, 1.0], "y": [2.0, 3.0]},
            "analytical_gradient": {"x": "torch.cos(x)*y", "y": "torch.sin(x)"},
        }
    )
    assert record["passed"] is True
    assert record["grad_output_used"]["value"] == [1.0, 1.0]
    assert set(record["observed_gradient"]) == {"x", "y"}
    assert {c["input"] for c in record["comparisons"]} == {"x", "y"}


@pytest.mark.parametrize("scheme", ["forward", "richardson", "complex_step"])
def test_every_scheme_agrees_on_a_smooth_function(scheme):
    """Given tanh at 0.3 in float64, when each finite-difference scheme runs with its
    default step, then autograd and the finite difference agree within the default."""
    record = run_check(
        {
            "function": "torch.tanh(x)",
            "x": 0.3,
            "analytical_gradient": "1 - torch.tanh(x)**2",
            "finite_difference": {"scheme": scheme},
        }
    )
    assert record["passed"] is True, record["failures"]
    assert record["observations"]["finite_difference"]["scheme"] == scheme


def test_adaptive_step_records_its_telemetry():
    """Given log at 2.0 with an adaptive step, when it runs, then the step chosen and the
    candidates that justify it are recorded, and the check passes."""
    record = run_check(
        {"function": "torch.log(x)", "x": 2.0, "analytical_gradient": "1/x", "finite_difference": {"step": "adaptive"}}
    )
    info = record["observations"]["finite_difference"]["inputs"]["x"]
    assert info["step_kind"] == "adaptive"
    telemetry = info["telemetry"]
    assert telemetry["chosen_step"] == min(telemetry["candidates"], key=lambda c: c["error_estimate"])["step"]
    assert record["passed"] is True


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_differences_are_taken_in_float32(dtype):
    """Given sin at 1.0 in a half-precision dtype, when it runs, then the observations are
    in that dtype, the finite difference is evaluated in float32 and says so, and it passes."""
    record = run_check({"function": "torch.sin(x)", "x": 1.0, "dtype": dtype, "analytical_gradient": "torch.cos(x)"})
    assert record["observations"]["backward_pass_1"]["gradients"]["x"]["dtype"] == dtype
    assert record["observations"]["finite_difference"]["fd_dtype"] == "float32"
    assert "float32" in record["observations"]["finite_difference"]["note"]
    assert record["passed"] is True


def test_environment_is_recorded():
    """Given any check, when it runs, then torch and python versions and the device are recorded."""
    record = run_check({"function": "x*x", "x": 3, "analytical_gradient": 6})
    env = record["environment"]
    assert env["torch"] == torch.__version__
    assert env["device"] == "cpu" and env["cuda"] is None


@pytest.mark.cuda
def test_cuda_observations_match_cpu():
    """Given the vector sum on CUDA, when it runs, then every observation is on cuda and the
    gradient equals the CPU one."""
    cpu = run_check({"function": "(x**2).sum()", "x": [1, 2, 3], "analytical_gradient": "2*x"})
    gpu = run_check({"function": "(x**2).sum()", "x": [1, 2, 3], "analytical_gradient": "2*x", "device": "cuda"})
    assert gpu["observations"]["backward_pass_1"]["gradients"]["x"]["device"] == "cuda:0"
    assert gpu["observed_gradient"] == cpu["observed_gradient"]
    assert gpu["environment"]["cuda"] is not None


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental")
def test_a_failing_complex_half_output_is_recorded_not_a_crash():
    """Given z.chalf() (a complex-half output of a complex128 input), whose finite differences see its
    half-precision rounding and so disagree with autograd's gradient of 1,
    when it is checked,
    then the failure is recorded in a completed record (the nondeterminism probe, which compares two
    forward passes, used to raise: torch.equal has no complex-half kernel), and the two passes agree."""
    record = run_check(
        {
            "function": lambda z: z.chalf(),
            "inputs": {"z": torch.tensor([0.5 + 0.25j], dtype=torch.complex128)},
            "dtype": "complex128",
            "analytical_gradient": {"z": lambda **_: torch.tensor([1.0 + 0j], dtype=torch.complex128)},
        }
    )
    assert record["executed"] is True and record["passed"] is False
    assert [f["comparison"] for f in record["failures"]] == ["autograd_vs_finite_difference"]
    assert "not deterministic" not in record["failures"][0]["reason"]
