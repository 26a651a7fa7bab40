"""The OpInfo sweep's families with several outputs and complex128 (benchmarks/opinfo_*.py, B5).

These stories pin what the benchmark's figures rest on and a run of it cannot show: which
samples enter each family and with which grad_output, that a mutated backward is a backward
of a wrong Jacobian (linear in grad_output, so gradcheck's one-hot probes and our weighted
check see the same mistake) and wrong exactly where it says, and that the report counts
each family apart and all of them together.
"""

from __future__ import annotations

import math

import pytest
import torch

from benchmarks import bench_opinfo
from benchmarks.opinfo_mutations import change, choose, per_output, vjp, wrapped
from benchmarks.opinfo_samples import cases
from benchmarks.opinfo_sweep import expectation_of, run_gradcheck

SEVERAL = "float64, several outputs"


def _w(start: int, n: int) -> torch.Tensor:
    return 1.0 + 0.5 * torch.sin(torch.arange(start, start + n, dtype=torch.float64))


def test_the_several_outputs_family_takes_only_samples_with_two_tracked_outputs():
    """Given var_mean and split (two or more differentiable outputs), cummax (values and
    integer indices: one differentiable output) and sin (one output),
    when the several-outputs family is enumerated over them,
    then only var_mean and split are in it, each function returns a tuple with one grad_output
    tensor per output shaped like it, the weights numbered on from one output to the next (so
    the equal halves of a split are not weighted alike), and the inputs are float64."""
    found, _ = cases(ops=["var_mean", "split", "cummax", "sin"], family=SEVERAL, samples_per_op=1)
    assert sorted({c.op.split(".")[0] for c in found}) == ["split", "var_mean"]
    for case in found:
        outputs = case.function(**case.inputs)
        assert isinstance(outputs, tuple) and len(outputs) == case.outputs >= 2
        assert [w.shape for w in case.grad_output] == [o.shape for o in outputs]
        first = case.grad_output[0].numel()
        assert torch.equal(case.grad_output[0].reshape(-1), _w(0, first))
        assert torch.equal(case.grad_output[1].reshape(-1), _w(first, case.grad_output[1].numel()))
        assert all(t.dtype == torch.float64 for t in case.inputs.values())
        assert case.dtype == "float64" and case.family == SEVERAL


def test_the_complex_family_checks_complex_inputs_with_real_weights():
    """Given mul and abs sampled in complex128,
    when the complex family is enumerated,
    then every input is a complex128 tensor, the grad_output is real float64 weights shaped
    like the (complex or real) output, and the expectation is autograd's own gradient at
    those weights (for abs: w * x / |x|, PyTorch's convention for a real function of z)."""
    found, _ = cases(ops=["mul", "abs"], family="complex128", samples_per_op=1)
    assert sorted(c.op for c in found) == ["abs", "mul"]
    for case in found:
        assert all(t.dtype == torch.complex128 for t in case.inputs.values())
        output = case.function(**case.inputs)
        assert case.grad_output.dtype == torch.float64 and case.grad_output.shape == output.shape
    (abs_case,) = [c for c in found if c.op == "abs"]
    x = abs_case.inputs["x0"]
    expected = abs_case.grad_output * x / x.abs()
    # 1e-12: autograd computes the same quotient in another order; rounding only
    assert torch.allclose(
        expectation_of(abs_case.function, abs_case.inputs, abs_case.grad_output)["x0"], expected, rtol=1e-12, atol=0
    )


def _var_mean_case():
    return [c for c in cases(ops=["var_mean"], family=SEVERAL, samples_per_op=1)[0] if c.op == "var_mean"][0]


@pytest.mark.parametrize("kind", ["x1.01", "+1e-4", "swap"])
def test_a_mutated_backward_is_linear_and_wrong_at_one_place_of_one_output(kind):
    """Given var_mean (two outputs) and each mutation kind,
    when its wrong backward is called with the check's weights and with two other grad_outputs,
    then it is linear in grad_output (gradcheck's one-hot probes see one fixed wrong Jacobian),
    output k's gradient at g = w differs from autograd's at the drawn element(s) of the drawn
    input alone, by the kind's change (1% of the element, 1e-4 of the gradient's scale, or the
    two elements exchanged), and the other output's gradient is autograd's."""
    case = _var_mean_case()
    parts = per_output(case.function, case.inputs, case.grad_output)
    mutation = choose(parts, case.grad_output, kind, seed=3)
    assert mutation is not None
    mutated = wrapped(case.function, list(case.inputs), mutation, case.grad_output)
    wrong = expectation_of(mutated, case.inputs, case.grad_output)
    k, name = mutation.output, mutation.name
    right = parts[k][name].reshape(-1)
    difference = (wrong[k][name].reshape(-1) - right).abs()
    changed = sorted(int(i) for i in torch.nonzero(difference > 0).reshape(-1))
    scale = float(right.abs().max())
    if kind == "x1.01":
        assert changed == [mutation.i]
        assert float(difference[mutation.i]) == pytest.approx(0.01 * abs(float(right[mutation.i])), rel=1e-12)
    elif kind == "+1e-4":
        assert changed == [mutation.i]
        assert float(difference[mutation.i]) == pytest.approx(1e-4 * scale, rel=1e-9)
    else:
        assert changed == sorted([mutation.i, mutation.j])
        assert float(wrong[k][name].reshape(-1)[mutation.i]) == float(right[mutation.j])
    other = 1 - k
    assert all(torch.equal(wrong[other][n], parts[other][n]) for n in case.inputs)
    generator = torch.Generator().manual_seed(0)
    g1 = [torch.randn(w.shape, generator=generator, dtype=torch.float64) for w in case.grad_output]
    g2 = [torch.randn(w.shape, generator=generator, dtype=torch.float64) for w in case.grad_output]
    mixed = [2.0 * a - 3.0 * b for a, b in zip(g1, g2)]
    at1, at2, at_mixed = (vjp(mutated, case.inputs, g) for g in (g1, g2, mixed))
    for n in case.inputs:
        # 1e-12: the two sides add the same terms in another order; rounding only
        assert torch.allclose(at_mixed[n], 2.0 * at1[n] - 3.0 * at2[n], rtol=1e-12, atol=1e-12)


def test_a_complex_shift_has_the_drawn_phase_and_gradcheck_slow_sees_a_one_percent_error():
    """Given abs in complex128 (one output, complex input),
    when the +1e-4 mutation is drawn, and then the x1.01 one is run through gradcheck,
    then the shift moves one complex element by exactly 1e-4 of the gradient's scale with a
    non-zero imaginary part, and gradcheck's slow mode rejects the x1.01 backward while it
    accepts the correct function: the wrong backward is a real, detectable change."""
    (case,) = cases(ops=["abs"], family="complex128", samples_per_op=1)[0]
    parts = per_output(case.function, case.inputs, case.grad_output)
    shift = choose(parts, case.grad_output, "+1e-4", seed=1)
    scale = float(parts[0][shift.name].abs().max())
    assert abs(shift.shift) == pytest.approx(1e-4 * scale, rel=1e-12)
    assert abs(shift.shift.imag) > 0
    delta = change(shift, parts[0][shift.name], case.grad_output.to(torch.complex128), case.grad_output)
    assert torch.count_nonzero(delta) == 1
    assert complex(delta.reshape(-1)[shift.i]) == pytest.approx(shift.shift, rel=1e-12)
    scaled = wrapped(
        case.function, list(case.inputs), choose(parts, case.grad_output, "x1.01", seed=1), case.grad_output
    )
    assert run_gradcheck(case.function, case.inputs, fast=False)["accepts"] is True
    assert run_gradcheck(scaled, case.inputs, fast=False)["accepts"] is False


def _result(family: str, case: str, ours, slow, marked: str = "") -> dict:
    def side(accepts):
        return {
            "accepts": accepts,
            "seconds": 1.0,
            "failure": None if accepts else {"diagnosis": "probable_bug", "reason": "differs"},
            "error": "" if accepts is not None else "boom",
        }

    return {
        "case": case,
        "op": case.split("#")[0],
        "numel": 4,
        "marked_wrong": marked,
        "family": family,
        "outputs": 2 if family == SEVERAL else 1,
        "ours": side(ours),
        "slow": side(slow),
        "fast": side(slow),
    }


def test_the_report_grades_each_family_and_all_of_them():
    """Given a sweep's data with one false failure in the several-outputs family (of two
    samples slow accepts there), none in float64, and complex mutations where ours finds
    what slow mode misses,
    when the rows are made,
    then the several-outputs family misses the 1% goal naming the sample and its family, the
    float64 family passes it, the row over all families counts 1 of 4, the complex family's
    +1e-4 detection passes at 100% against slow's 0%, and a family with no swap mutation
    gets an INFO row rather than a grade on no samples."""
    results = [
        _result("float64", "sin#0", True, True),
        _result("float64", "cos#0", True, True),
        _result(SEVERAL, "split#0", True, True),
        _result(SEVERAL, "var_mean#0", False, True),
        _result("complex128", "abs#0", True, False),
    ]
    found = {"ours": True, "ours_crashed": False, "ours_diagnosis": "probable_bug", "slow": False, "fast": False}
    mutations = [{"case": "abs#0", "family": "complex128", "x1.01": found, "+1e-4": found, "swap": None}]
    data = {
        "results": results,
        "mutations": mutations,
        "seconds": 9.0,
        "family_seconds": {},
        "counts": {f: {"outside_contract": 1} for f in bench_opinfo.FAMILIES},
    }
    rows = {r["name"]: r for r in bench_opinfo.all_rows(data, quick=False)}
    several = rows["B5 OpInfo [float64, several outputs]: false failures / samples slow mode accepts"]
    assert several["status"] == "MISS" and several["value"] == 50.0
    assert "var_mean#0 [float64, several outputs] (4 elements, 2 outputs)" in several["note"]
    assert rows["B5 OpInfo [float64]: false failures / samples slow mode accepts"]["status"] == "PASS"
    overall = rows["B5 OpInfo [all families]: false failures / samples slow mode accepts"]
    assert overall["note"].startswith("1 of 4:") and overall["value"] == 25.0
    assert "3 samples with empty or non-finite inputs" in rows["B5 OpInfo [all families]: samples"]["note"]
    detected = rows["B5 OpInfo [complex128]: mutation +1e-4 detected, ours"]
    assert detected["status"] == "PASS" and detected["value"] == 100.0 and "slow 0.0%" in detected["note"]
    assert rows["B5 OpInfo [complex128]: mutation swap detected, ours"]["status"] == "INFO"
    assert math.isnan(bench_opinfo.summarise(bench_opinfo.of_family(data, "float64"))["detection"]["swap"]["ours"])
    text = bench_opinfo.markdown(data)
    assert "## Family float64, several outputs" in text and "## All families" in text
