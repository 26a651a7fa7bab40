"""Complex values in the core: the record's {"real", "imag"} form, finite differences of each part,
comparisons by the modulus of the difference, and real records exactly as before."""

from __future__ import annotations

import json

import pytest
import torch

from jupyterlab_gradcheck.core.check.compare.comparison import compare
from jupyterlab_gradcheck.core.check.engine import run_check
from jupyterlab_gradcheck.core.check.fd.finite_difference import FdOptions, fd_gradients
from jupyterlab_gradcheck.core.check.record import spec as defaults
from jupyterlab_gradcheck.core.check.record.spec import parse_spec
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.values.form import as_record_value, shape_of
from jupyterlab_gradcheck.core.values.tensors import describe, to_tensor, with_complex_kept
from support.complex_functions import SquareForgetsConj

Z = torch.tensor([[1.0 + 2.0j, -0.5 + 0.25j], [3.0 - 1.0j, 0.0 + 1.5j]], dtype=torch.complex128)


def test_a_complex_value_round_trips_between_tensor_record_and_json():
    """Given a 2x2 complex128 tensor,
    when it is described, written as JSON, read back and made a tensor again,
    then the record's value is {"real", "imag"} of its parts, the tensor comes back bit for bit, and
    its shape is read from the parts; Python complex numbers take the same form."""
    described = describe(Z)
    assert described == {
        "value": {"real": [[1.0, -0.5], [3.0, 0.0]], "imag": [[2.0, 0.25], [-1.0, 1.5]]},
        "shape": [2, 2],
        "dtype": "complex128",
        "device": "cpu",
    }
    value = json.loads(json.dumps(described["value"]))
    assert torch.equal(to_tensor(value, "complex128", "cpu"), Z)
    assert shape_of(value, "inputs.z") == [2, 2]
    assert as_record_value(Z.tolist()) == described["value"]
    assert as_record_value([1, 2.5j]) == {"real": [1, 0.0], "imag": [0.0, 2.5]}


def test_a_real_tensor_is_described_exactly_as_before():
    """Given a float64 and a float32 tensor, when described, the value is the plain float or nested
    list it always was (old records keep their form)."""
    assert describe(torch.tensor(3.0, dtype=torch.float64))["value"] == 3.0
    assert describe(torch.tensor([0.1, 2.0], dtype=torch.float32))["value"] == [
        float(torch.tensor(0.1, dtype=torch.float32)),
        2.0,
    ]


def test_a_real_record_is_unchanged_by_complex_support():
    """Given the seed record, when it runs, its record has no convention and its values are plain
    numbers: a single-output real record comes out as it did before complex values existed."""
    record = run_check({"function": "x*x", "x": 3, "analytical_gradient": 6})
    assert record["observed_gradient"] == 6.0 and record["passed"]
    assert "convention" not in record["observations"]["finite_difference"]
    assert record["comparisons"][0]["worst"]["left"] == 6.0


@pytest.mark.parametrize(
    "value, message",
    [
        (
            {"real": [1.0, 2.0], "imag": [1.0]},
            "inputs.z: the real part has shape [2] but the imaginary part has shape [1]",
        ),
        ({"real": [1.0], "imag": ["a"]}, "inputs.z.imag: expected a number or a list of numbers, found string 'a'"),
        ({"real": [1.0]}, "inputs.z: expected a number or a list of numbers, found dict"),
    ],
)
def test_a_malformed_complex_value_is_refused_naming_its_part(value, message):
    """Given a complex value whose parts differ in shape, hold a string, or lack the imaginary part,
    when the record is parsed, then the one-line refusal names the field and the part."""
    with pytest.raises(SpecError) as refused:
        parse_spec({"function": lambda z: z, "inputs": {"z": value}, "analytical_gradient": 1.0, "dtype": "complex128"})
    assert str(refused.value) == message


def test_complex_dtypes_take_the_eps_steps_and_tolerances_of_their_parts():
    """Given complex128 and complex64, their default tolerances and steps are float64's and float32's."""
    for complex_dtype, real in (("complex128", "float64"), ("complex64", "float32")):
        assert defaults.EPS[complex_dtype] == defaults.EPS[real]
        assert defaults.comparison_tolerance(complex_dtype) == defaults.comparison_tolerance(real)
        assert defaults.fd_tolerance(complex_dtype, "central") == defaults.fd_tolerance(real, "central")
        assert defaults.fd_step(complex_dtype, "central") == defaults.fd_step(real, "central")


def test_finite_differences_of_a_complex_input_follow_pytorchs_convention():
    """Given f(z) = z^2 (complex output, an elementwise chain) and grad_output v = 1 - 2i,
    when its finite differences are taken, then each element is d/dRe + i d/dIm of Re(conj(v) z^2),
    which is v * conj(2z) (PyTorch's gradient), from the diagonal path: every element's real part
    shifted at once, then every imaginary part (3 evaluations each); the general path, one element at
    a time (two central differences each), gives the same."""
    v = torch.full(Z.shape, 1.0 - 2.0j, dtype=torch.complex128)
    expected = v * (2 * Z).conj()
    grads, info, _ = fd_gradients(
        lambda z: z * z, {"z": Z}, v, FdOptions(dtype="complex128", scheme="central", step=None)
    )
    general, general_info, _ = fd_gradients(
        lambda z: z * z, {"z": Z}, v, FdOptions(dtype="complex128", scheme="central", step=None, structured=False)
    )
    assert grads["z"].dtype == torch.complex128
    # central differences of a quadratic: no truncation, rounding ~eps |v||z|^2 / h ~ 1e-10
    assert torch.allclose(grads["z"], expected, rtol=0, atol=1e-8)
    assert torch.allclose(general["z"], expected, rtol=0, atol=1e-8)
    assert (info["inputs"]["z"]["structure"], info["inputs"]["z"]["forward_evaluations"]) == ("elementwise", 6)
    assert (general_info["inputs"]["z"]["structure"], general_info["inputs"]["z"]["forward_evaluations"]) == (
        "general",
        2 * 2 * Z.numel(),
    )
    assert info["convention"].startswith("PyTorch's convention")


def test_a_complex_function_that_mixes_elements_takes_the_general_path():
    """Given f(z) = A z for a complex 2x2 A (no elementwise chain) and v = 1 + 1i,
    when its finite differences are taken, then the gradient is A^H v, one element at a time, and the
    record says why no structured path applied."""
    a = torch.tensor([[1.0 + 1.0j, 2.0], [0.5j, -1.0]], dtype=torch.complex128)
    z = Z[0]
    v = torch.full((2,), 1.0 + 1.0j, dtype=torch.complex128)
    grads, info, _ = fd_gradients(
        lambda z: a @ z, {"z": z}, v, FdOptions(dtype="complex128", scheme="central", step=None)
    )
    assert torch.allclose(grads["z"], a.conj().T @ v, rtol=0, atol=1e-8)  # linear: rounding only, ~1e-10
    assert info["inputs"]["z"]["structure"] == "general"
    assert info["inputs"]["z"]["forward_evaluations"] == 2 * 2 * 2
    assert "no elementwise chain was observed" in info["inputs"]["z"]["structure_refused"]


def test_a_real_input_with_a_complex_output_gets_a_real_gradient():
    """Given f(x) = x * (2 + 3i) of a real x and v = 1 + 1i,
    when its finite differences are taken, then the gradient is real: Re(conj(v) (2 + 3i)) = 5."""
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
    v = with_complex_kept(torch.full((3,), 1.0 + 1.0j, dtype=torch.complex128), torch.float64)
    grads, info, _ = fd_gradients(
        lambda x: x * (2 + 3j), {"x": x}, v, FdOptions(dtype="float64", scheme="central", step=None)
    )
    assert grads["x"].dtype == torch.float64
    assert torch.allclose(
        grads["x"], torch.full((3,), 5.0, dtype=torch.float64), rtol=0, atol=1e-8
    )  # linear: rounding only
    assert "convention" in info


def test_the_complex_step_is_refused_for_complex_values():
    """Given a complex output, when the complex step is asked for, it is refused in one line (its
    imaginary part already carries the function's value)."""
    x = torch.tensor([0.5], dtype=torch.float64)
    v = torch.ones(1, dtype=torch.complex128)
    with pytest.raises(SpecError, match="complex_step needs real inputs and a real output"):
        fd_gradients(lambda x: x * 1j, {"x": x}, v, FdOptions(dtype="float64", scheme="complex_step", step=None))


def test_complex_comparisons_use_the_modulus_and_name_the_worst_element():
    """Given two complex tensors equal but for the imaginary part of element [1, 0],
    when compared, then that element is the worst, the error is the modulus of the difference, and the
    worst values are written in the record's complex form (JSON-serialisable)."""
    other = Z.clone()
    other[1, 0] += 3e-3j
    row = compare("c", "z", other, Z, left_label="left", right_label="right", rtol=1e-7, atol=1e-10)
    assert not row["passed"]
    assert row["worst"]["index"] == [1, 0]
    assert row["worst"]["left"] == {"real": 3.0, "imag": -1.0 + 3e-3}
    assert row["worst"]["right"] == {"real": 3.0, "imag": -1.0}
    assert row["worst"]["abs_err"] == pytest.approx(3e-3, rel=1e-12)  # the imaginary part's difference, rounded once
    assert row["max_rel_err"] == pytest.approx(3e-3 / abs(3.0 - 1.0j), rel=1e-12)
    json.dumps(row)
    assert compare("c", "z", Z, Z, left_label="l", right_label="r", rtol=0.0, atol=0.0)["passed"]


class _ScaleForgetsConj(torch.autograd.Function):
    """r (1 + 2i) of a real r whose backward takes Re(v (1 + 2i)) instead of Re(conj(v) (1 + 2i))."""

    @staticmethod
    def forward(ctx, r):
        return r * (1 + 2j)

    @staticmethod
    def backward(ctx, grad_output):
        return (grad_output * (1 + 2j)).real


def test_the_projected_mode_takes_the_real_loss_of_a_complex_output():
    """Given f(r) = r (1 + 2i) of a real r and grad_output v = 1 + 1i,
    when it is checked in the projected mode, then the right gradient Re(conj(v)(1 + 2i)) = 3 passes,
    and a backward that forgets the conj (giving -1) fails its projection."""
    r = torch.linspace(0.5, 2.0, 6, dtype=torch.float64).tolist()
    common = {
        "inputs": {"r": r},
        "grad_output": {"real": [1.0] * 6, "imag": [1.0] * 6},
        "finite_difference": {"mode": "projected"},
    }
    right = run_check({"function": lambda r: r * (1 + 2j), "analytical_gradient": [3.0] * 6, **common})
    assert right["passed"], right["failures"]
    row = next(row for row in right["comparisons"] if row["name"] == "autograd_vs_finite_difference")
    assert row["mode"] == "projected"
    wrong = run_check({"function": lambda r: _ScaleForgetsConj.apply(r), "analytical_gradient": [-1.0] * 6, **common})
    assert not wrong["passed"]
    assert wrong["failure"]["comparison"] == "autograd_vs_finite_difference" and wrong["failure"]["right"] == -1.0


def test_the_numerical_verdict_takes_complex_inputs_as_gradcheck_does():
    """Given z^2 on complex128 inputs (a complex output, grad_output ones) and |z|^2 summed (a real output),
    when numerical_verdict runs, both pass; with a backward that forgets the conj it fails at the
    element with an imaginary part."""
    from jupyterlab_gradcheck.core.check.first_order import numerical_verdict

    z = torch.tensor([1.0 + 0.0j, 0.5 - 3.0j], dtype=torch.complex128)
    assert numerical_verdict(lambda z: z * z, {"z": z})["passed"]
    assert numerical_verdict(lambda z: (z * z.conj()).real.sum(), {"z": z})["passed"]

    verdict = numerical_verdict(lambda z: SquareForgetsConj.apply(z), {"z": z})
    assert not verdict["passed"] and verdict["worst"]["index"] == [1]
    assert verdict["worst"]["right"] == {"real": 1.0, "imag": -6.0}
