"""Complex inputs and outputs through the Python API, with PyTorch's convention.

For a real loss L the gradient of a complex z is dL/dRe(z) + i dL/dIm(z); a complex output f with
grad_output v contributes L = sum(Re(conj(v) f)). A record writes a complex value as
{"real": ..., "imag": ...}.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.ledger.replay import replay_lines
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file
from support.complex_functions import Square, SquareForgetsConj

#: Three complex points; only the last has an imaginary part, so a backward that forgets the conj
#: (2z instead of conj(2z)) is wrong there and only there.
Z_ONE_IMAGINARY = torch.tensor([1.0 + 0.0j, -2.0 + 0.0j, 0.5 - 3.0j], dtype=torch.complex128)
Z = torch.tensor([1.0 + 2.0j, -0.5 + 0.25j, 3.0 - 1.0j], dtype=torch.complex128)
THETA = 0.7


def parts(tensor) -> dict:
    """A complex tensor in the record's form."""
    return {"real": tensor.real.tolist(), "imag": tensor.imag.tolist()}


class Polar(torch.autograd.Function):
    """r e^{i THETA} of a real r: grad_r = Re(conj(grad_output) e^{i THETA})."""

    @staticmethod
    def forward(ctx, r):
        return torch.polar(r, torch.full_like(r, THETA))

    @staticmethod
    def backward(ctx, grad_output):
        unit = torch.polar(torch.ones_like(grad_output.real), torch.full_like(grad_output.real, THETA))
        return (grad_output.conj() * unit).real


class PolarForgetsConj(Polar):
    """The same forward, its backward taking Re(grad_output e^{i THETA}): right only for a real grad_output."""

    @staticmethod
    def backward(ctx, grad_output):
        unit = torch.polar(torch.ones_like(grad_output.real), torch.full_like(grad_output.real, THETA))
        return (grad_output * unit).real


def test_a_real_loss_of_a_complex_input_passes_with_the_convention_stated():
    """Given L = sum(z * conj(z)) = sum(|z|^2), whose gradient dL/dRe + i dL/dIm is 2z,
    when it is checked with grad=2z written as a complex tensor,
    then it passes in complex128, autograd's value is exactly 2z in the record's complex form, the finite
    differences agree, torch.autograd.gradcheck passed, and the record states the convention."""
    result = check(lambda z: (z * z.conj()).real.sum(), grad=2 * Z, z=Z, ledger=False)
    record = result.record
    assert result.passed, result.summary()
    assert record["dtype"] == "complex128"
    assert record["inputs"]["z"] == parts(Z)
    autograd = record["observations"]["autograd_grad"]["gradients"]["z"]
    assert autograd["value"] == parts(2 * Z) and autograd["dtype"] == "complex128"
    assert record["observed_gradient"] == parts(2 * Z)
    fd = record["observations"]["finite_difference"]
    # central differences of a quadratic: exact up to rounding, ~eps |z|^2 / h ~ 1e-10 at these points
    assert fd["gradients"]["z"]["value"]["real"] == pytest.approx([2.0, -1.0, 6.0], abs=1e-8)
    assert fd["gradients"]["z"]["value"]["imag"] == pytest.approx([4.0, 0.5, -2.0], abs=1e-8)
    assert fd["convention"].startswith("PyTorch's convention: the gradient of the real loss")
    # two real differences per complex element, each a + and a - shift, on the general path
    assert fd["inputs"]["z"]["forward_evaluations"] == 2 * 2 * 3
    assert "complex values" in fd["inputs"]["z"]["structure_refused"]
    assert record["observations"]["torch_gradcheck"]["status"] == "passed"
    assert "not drawn for complex values" in record["step_sweep"]["note"]


def test_a_function_with_pytorchs_convention_passes_with_no_grad():
    """Given Square, z^2 with the backward grad_output * conj(2z),
    when it is checked with no grad= (its backward is the expectation),
    then it passes, the expectation held is exactly autograd's conj(2z), and gradcheck agrees."""
    result = check(Square, z=Z, ledger=False)
    record = result.record
    assert result.passed, result.summary()
    assert record["origin"].startswith("the backward of ")
    expected = parts((2 * Z).conj())
    assert record["analytical"]["z"]["value"] == expected
    assert record["observations"]["autograd_grad"]["gradients"]["z"]["value"] == expected
    assert record["observations"]["torch_gradcheck"]["status"] == "passed"


def test_a_backward_that_forgets_the_conj_fails_naming_the_element():
    """Given SquareForgetsConj, whose backward gives 2z instead of conj(2z),
    when it is checked at points where only z[2] = 0.5 - 3i has an imaginary part,
    then it fails against the finite differences at z[2], where autograd gives 1 - 6i and the
    differences 1 + 6i, and PyTorch's gradcheck fails too."""
    result = check(SquareForgetsConj, z=Z_ONE_IMAGINARY, ledger=False)
    failure = result.failure
    assert not result.passed
    assert (failure["comparison"], failure["index"]) == ("autograd_vs_finite_difference", [2])
    assert failure["right"] == {"real": 1.0, "imag": -6.0}
    # central differences of z^2 along each part: truncation zero, rounding ~eps * 9 / h ~ 1e-10
    assert failure["left"]["real"] == pytest.approx(1.0, abs=1e-8)
    assert failure["left"]["imag"] == pytest.approx(6.0, abs=1e-8)
    assert failure["abs_err"] == pytest.approx(12.0, rel=1e-8)  # |(1 + 6i) - (1 - 6i)|, up to the same rounding
    assert "z[2]" in failure["reason"] and "1-6i" in failure["reason"]
    # the summary and the table write complex values as the side panel does, a+bi
    assert "autograd_grad 1.0-6.0i" in result.summary()
    assert "1.0-6.0i" in result._repr_html_()
    assert [r["passed"] for r in result.record["comparisons"] if r["name"] == "autograd_vs_finite_difference"] == [
        False
    ]
    assert result.record["observations"]["torch_gradcheck"]["status"] == "failed"


def test_a_complex_expectation_given_as_a_tensor_is_held_against_autograd():
    """Given grad=conj(2z) as a complex tensor and z as Python complex numbers,
    when Square is checked, then the dtype is inferred as complex128, the record keeps the expectation in
    its complex form, and its value is exactly autograd's; with grad=2z (the conj forgotten in the
    hand derivation) the expectation is what fails, at the element with an imaginary part."""
    as_numbers = [complex(v) for v in Z_ONE_IMAGINARY.tolist()]
    result = check(lambda z: Square.apply(z), grad=(2 * Z_ONE_IMAGINARY).conj(), z=as_numbers, ledger=False)
    assert result.passed, result.summary()
    assert result.record["dtype"] == "complex128"
    assert result.record["analytical_gradient"] == parts((2 * Z_ONE_IMAGINARY).conj())
    assert (
        result.record["analytical"]["z"]["value"]
        == result.record["observations"]["autograd_grad"]["gradients"]["z"]["value"]
    )

    wrong = check(lambda z: Square.apply(z), grad=2 * Z_ONE_IMAGINARY, z=as_numbers, ledger=False)
    assert not wrong.passed
    assert (wrong.failure["comparison"], wrong.failure["index"]) == ("analytical_vs_backward_pass_1", [2])
    assert (wrong.failure["left"], wrong.failure["right"]) == ({"real": 1.0, "imag": -6.0}, {"real": 1.0, "imag": 6.0})
    assert wrong.failure["reason"].startswith("the hand derivation gives 1-6i at z[2], but autograd gives 1+6i")


def test_a_real_input_with_a_complex_output_uses_the_real_part_of_conj_v_times_f():
    """Given Polar, r e^{i theta} of a real r, and the complex grad_output v = 1 + 2i,
    when it is checked with no grad=, then the gradient is real, Re(conj(v) e^{i theta}) =
    cos(theta) + 2 sin(theta), the finite differences agree and the convention is stated;
    PolarForgetsConj, which takes Re(v e^{i theta}) = cos(theta) - 2 sin(theta), fails."""
    r = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)
    v = torch.full((3,), 1.0 + 2.0j, dtype=torch.complex128)
    result = check(Polar, r=r, grad_output=v, ledger=False)
    record = result.record
    assert result.passed, result.summary()
    assert record["dtype"] == "float64"
    assert record["grad_output"] == parts(v)
    assert record["grad_output_used"]["value"] == parts(v) and record["grad_output_used"]["dtype"] == "complex128"
    expected = math.cos(THETA) + 2 * math.sin(THETA)
    autograd = record["observations"]["autograd_grad"]["gradients"]["r"]
    assert autograd["dtype"] == "float64"
    assert autograd["value"] == pytest.approx([expected] * 3, rel=1e-15)  # a few roundings of cos and sin
    fd = record["observations"]["finite_difference"]
    assert fd["gradients"]["r"]["value"] == pytest.approx([expected] * 3, abs=1e-8)  # linear in r: rounding only
    assert "conj(grad_output)" in fd["convention"]
    assert record["observations"]["torch_gradcheck"]["status"] == "passed"

    wrong = check(PolarForgetsConj, r=r, grad_output=v, ledger=False)
    assert not wrong.passed and wrong.failure["comparison"] == "autograd_vs_finite_difference"
    assert wrong.failure["right"] == pytest.approx(math.cos(THETA) - 2 * math.sin(THETA), rel=1e-15)


def test_a_complex_check_round_trips_through_the_ledger(tmp_path):
    """Given Square checked into a notebook's ledger,
    when the observation is read back, then its record is the result's record exactly (complex values in
    their {"real", "imag"} form), the ledger verifies, and replay lists the callable as skipped."""
    notebook = tmp_path / "lab.ipynb"
    result = check(Square, z=Z, notebook=notebook)
    ledger = tmp_path / "lab.gradcheck.jsonl"
    [observation] = [e for e in Ledger(ledger).entries() if e["kind"] == "observation"]
    stored = observation["data"]["record"]
    assert stored == json.loads(json.dumps(result.record))
    assert stored["observations"]["backward_pass_1"]["gradients"]["z"]["value"] == parts((2 * Z).conj())
    assert stored["comparisons"][0]["worst"]["right"] == {"real": 2.0, "imag": -4.0}
    assert verify_ledger_file(ledger, deep=True, with_notebook=False)["ok"]
    replayed = replay_lines(Ledger(ledger).iter_raw_lines())
    assert replayed["ok"] and not replayed["differs"] and len(replayed["skipped"]) == 1


def test_complex64_runs_at_float32s_tolerances_and_skips_gradcheck():
    """Given Square on complex64 inputs,
    when it is checked, then it passes with float32's tolerances, and gradcheck is skipped with its
    reason (its fixed step needs double precision)."""
    result = check(Square, z=Z.to(torch.complex64), ledger=False)
    record = result.record
    assert result.passed, result.summary()
    assert record["dtype"] == "complex64"
    assert (
        record["tolerance"]
        == check(lambda x: x**2, grad=lambda x: 2 * x, x=torch.ones(1, dtype=torch.float32), ledger=False).record[
            "tolerance"
        ]
    )
    gradcheck = record["observations"]["torch_gradcheck"]
    assert gradcheck["status"] == "skipped" and "complex64" in gradcheck["reason"]


@pytest.mark.parametrize(
    "arguments, message",
    [
        (
            {"fn": "z*z", "grad": 1.0, "z": 1 + 2j},
            "dtype complex128 needs a Python callable: expressions are real-valued",
        ),
        (
            {"fn": lambda z: z * z, "grad": 1.0, "z": [1 + 2j], "dtype": "float64"},
            "inputs.z is complex but dtype float64 is real: use complex128 or complex64",
        ),
        (
            {"fn": lambda z: z * z, "grad": "2*z", "z": [1 + 2j]},
            "analytical_gradient: with dtype complex128 write a value or a callable, not an expression",
        ),
        (
            {"fn": lambda z: z * z, "grad": [1.0], "z": [1 + 2j], "finite_difference": {"scheme": "complex_step"}},
            "finite_difference.scheme is for real inputs; with dtype complex128 leave it out",
        ),
        (
            {"fn": lambda z: z * z, "grad": {"real": [1.0], "imag": [1.0, 2.0]}, "z": [1 + 2j]},
            "analytical_gradient: the real part has shape [1] but the imaginary part has shape [2]",
        ),
        (
            {"fn": lambda x: x * x, "grad": [2.0], "x": [1.0], "grad_output": [1 + 1j]},
            "grad_output is complex but the output is real (float64)",
        ),
    ],
)
def test_what_a_complex_check_cannot_do_is_refused_in_one_line(tmp_path, arguments, message):
    """Given a complex check written wrongly (an expression, a real dtype for complex values, an
    expression as expectation, the complex step, ragged parts, a complex grad_output of a real output),
    when check() is called on a notebook, then it raises one line naming the problem and the ledger
    holds no observation."""
    arguments = dict(arguments)
    fn = arguments.pop("fn")
    notebook = tmp_path / "lab.ipynb"
    with pytest.raises(SpecError) as refused:
        check(fn, notebook=notebook, **arguments)
    assert message in str(refused.value) and "\n" not in str(refused.value)
    ledger = tmp_path / "lab.gradcheck.jsonl"
    entries = Ledger(ledger).entries() if ledger.exists() else []
    assert not [e for e in entries if e["kind"] == "observation"]


class SquareWithJvp(torch.autograd.Function):
    """z^2 with a backward (PyTorch's convention), a jvp (2z t) and a vmap rule."""

    @staticmethod
    def forward(z):
        return z * z

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.z = inputs[0]

    @staticmethod
    def backward(ctx, grad_output):
        (z,) = ctx.saved_tensors
        return grad_output * (2 * z).conj()

    @staticmethod
    def jvp(ctx, tangent):
        return 2 * ctx.z * tangent

    @staticmethod
    def vmap(info, in_dims, z):
        return z * z, in_dims[0]


def test_forward_mode_and_the_backward_agree_through_the_real_inner_product():
    """Given SquareWithJvp on complex inputs,
    when it is checked with no grad=, then forward mode is held against the backward through
    grad . u = sum(Re(conj(v) J u)), which holds for a correct pair, and every block passes."""
    result = check(lambda z: SquareWithJvp.apply(z), z=Z, ledger=False)
    modes = result.record["function_modes"]
    assert result.passed, result.summary()
    rows = {row["name"]: row for row in modes["forward_ad"]["comparisons"]}
    assert rows["forward_ad_vs_backward"]["passed"] and rows["forward_ad_vs_finite_difference"]["passed"]
    assert isinstance(rows["forward_ad_vs_backward"]["worst"]["right"], float)  # a real number: Re(...)
    assert modes["batched_grad"]["status"] == "observed"
    json.dumps(result.record)


def test_several_complex_outputs_take_one_complex_grad_output_each():
    """Given f(z) = (z^2, 3z) and complex grad_outputs v0, v1, written as one list or, with an output
    whose grad_output is None (ones), one entry per output,
    when f is checked with the gradients v0 conj(2z) and 3 v1, then both outputs pass, and the
    record keeps the grad_outputs in the complex form (one value when they form one, else a list)."""
    v0 = torch.tensor([1 + 1j, 2 - 1j], dtype=torch.complex128)
    v1 = torch.tensor([0.5j, 1.0], dtype=torch.complex128)
    z = Z[:2]
    result = check(
        lambda z: (z * z, 3 * z), grad=(v0 * (2 * z).conj(), 3 * v1), z=z, grad_output=[v0, v1], ledger=False
    )
    assert result.passed, result.summary()
    assert result.record["grad_output"] == {"real": [[1.0, 2.0], [0.0, 1.0]], "imag": [[1.0, -1.0], [0.5, 0.0]]}
    assert [entry["grad_output_used"]["value"] for entry in result.record["outputs"]] == [parts(v0), parts(v1)]

    ones_for_the_sum = check(
        lambda z: (z * z, (3 * z).real.sum()),
        grad=(v0 * (2 * z).conj(), torch.full_like(z, 3)),
        z=z,
        grad_output=[v0, None],
        ledger=False,
    )
    assert ones_for_the_sum.passed, ones_for_the_sum.summary()
    assert ones_for_the_sum.record["grad_output"] == [parts(v0), None]
