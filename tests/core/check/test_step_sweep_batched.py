"""The step sweep evaluates both series in one batched evaluation, with the same values, and
falls back to evaluating each step on its own, saying why, where batching is refused.
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.fd.finite_difference import step_sweep
from support.checks import check_against_autograd


def _weighted_tanh(x):
    return (torch.tanh(x) * torch.linspace(1.0, 2.0, x.numel(), dtype=x.dtype).reshape(x.shape)).sum()


def _as_strided_sum(x):
    """A correct operator that reads x's storage at an absolute offset (storage_offset=0)."""
    weights = torch.linspace(0.5, 1.5, 6, dtype=x.dtype)
    return (torch.as_strided(x, (2, 3), (1, 2), 0).reshape(-1) * weights).sum()


def test_both_series_from_one_batch_equal_each_series_alone():
    """Given a 2x3 input of a weighted tanh sum and autograd's gradient as the reference,
    when the sweep draws float32 and float64 together and then each dtype alone,
    then every step and every error is identical (each series' copies are stacked and evaluated
    as they are alone, so not even rounding differs)."""
    x = torch.linspace(-0.9, 1.3, 6, dtype=torch.float64).reshape(2, 3)
    v = torch.ones((), dtype=torch.float64)
    reference = torch.func.grad(_weighted_tanh)(x)
    together = step_sweep(_weighted_tanh, {"x": x}, v, "x", 4, reference=reference)
    alone = {
        dtype: step_sweep(_weighted_tanh, {"x": x}, v, "x", 4, reference=reference, dtypes=(dtype,))["series"][0]
        for dtype in ("float32", "float64")
    }
    assert [s["dtype"] for s in together["series"]] == ["float32", "float64"]
    for series in together["series"]:
        assert series["steps"] == alone[series["dtype"]]["steps"] and len(series["steps"]) == 17
        assert series["errors"] == alone[series["dtype"]]["errors"]
    assert "note" not in together
    # 1e-9: float64's best central difference of tanh errs by ~eps^(2/3) ~ 1e-11
    assert min(together["series"][1]["errors"]) < 1e-9


def test_a_storage_reader_has_its_steps_evaluated_one_by_one_with_the_reason():
    """Given as_strided with an explicit storage_offset on 7 elements (the check's finite
    differences loop over so few copies, so the sweep runs the batch guard itself) and on 16
    (the finite differences' guard already refused batching),
    when the full check runs,
    then it passes, the sweep's note says each step was evaluated on its own because the function
    reads its input's storage, and the float64 series still reaches a tiny error."""
    for size in (7, 16):
        record = check_against_autograd(_as_strided_sum, {"x": torch.linspace(-1.0, 1.0, size, dtype=torch.float64)})
        assert record["failures"] == []
        sweep = record["step_sweep"]
        assert sweep["note"].startswith("each step evaluated on its own")
        assert "reads its input's storage" in sweep["note"]
        float64 = next(s for s in sweep["series"] if s["dtype"] == "float64")
        # 1e-12: a linear function's central difference rounds to ~1e-16 at a step of 1
        assert len(float64["steps"]) == 17 and float64["best_error"] < 1e-12


def test_a_function_holding_float64_tensors_is_swept_in_one_batched_call():
    """Given x @ W with W a float64 tensor the function holds (float32 x @ float64 W raises),
    when the sweep draws float32 and float64 together,
    then the float32 series is evaluated with every operand cast, in the same batched call as
    float64: the function body runs four times (a first batched attempt, where float32 raises at
    once; the second attempt's trace of each series; one batch-guard evaluation), not once per
    shifted copy nor in two more batched calls, and each series equals the same series drawn
    alone."""
    weights = torch.linspace(0.5, 1.5, 6, dtype=torch.float64).reshape(3, 2)
    calls = []

    def held(x):
        calls.append(x.dtype)
        return torch.tanh(x @ weights).sum()

    x = torch.linspace(-0.9, 1.3, 6, dtype=torch.float64).reshape(2, 3)
    v = torch.ones((), dtype=torch.float64)
    reference = torch.func.grad(held)(x)
    calls.clear()
    together = step_sweep(held, {"x": x}, v, "x", 1, reference=reference)
    # 68 shifted copies (17 decades x 2 shifts x 2 dtypes) evaluated one by one would be 68
    assert len(calls) == 4
    assert (
        together["note"]
        == "float32: evaluated with every float64 operand cast to float32 (the function holds its own tensors)"
    )
    for dtype in ("float32", "float64"):
        alone = step_sweep(held, {"x": x}, v, "x", 1, reference=reference, dtypes=(dtype,))["series"][0]
        series = next(s for s in together["series"] if s["dtype"] == dtype)
        assert series["steps"] == alone["steps"] and len(series["steps"]) == 17
        assert series["errors"] == alone["errors"]
