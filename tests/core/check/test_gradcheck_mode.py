"""Which mode of torch.autograd.gradcheck a check embeds: fast mode above one Jacobian entry, slow mode for a
scalar function of one scalar, whose one Jacobian entry slow mode compares exactly for less time than fast mode's
projection; and whether its undefined-gradient test runs (only where the graph holds more than PyTorch's own
derivative formulas)."""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.engine import run_check
from jupyterlab_gradcheck.core.check.record.spec import RULES
from support.functions import Cube


def _settings(record: dict) -> dict:
    return record["observations"]["torch_gradcheck"]["settings"]


def test_the_seed_record_gets_gradcheck_in_slow_mode():
    """Given the mission's seed record x*x at 3, as written, when it runs, then it names today's rules (0.4.0) and
    PyTorch's verdict comes from slow mode, with its usual eps, atol and rtol, without the undefined-gradient test
    (x*x's graph is one of PyTorch's formulas; the record says why it was left out), and it passes."""
    record = run_check(
        {"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": None, "executed": False}
    )
    assert record["rules"] == RULES == "0.4.0"
    assert "policy" not in record
    assert _settings(record) == {
        "eps": 1e-6,
        "atol": 1e-5,
        "rtol": 1e-3,
        "fast_mode": False,
        "check_undefined_grad": False,
    }
    assert "PyTorch's own derivative formulas" in record["observations"]["torch_gradcheck"]["left_out"]
    assert record["observations"]["torch_gradcheck"]["status"] == "passed"
    assert record["passed"] is True


def test_a_custom_function_keeps_the_undefined_gradient_test():
    """Given a function going through a custom Function, when it runs, then gradcheck's undefined-gradient test
    runs: the settings carry no check_undefined_grad, so torch's default (on) applied, and nothing is said to be
    left out."""
    declared = {"function": lambda x: Cube.apply(x).sum(), "x": [0.5, 1.5], "analytical_gradient": lambda x: 3 * x**2}
    record = run_check(declared)
    assert "check_undefined_grad" not in _settings(record)
    assert "left_out" not in record["observations"]["torch_gradcheck"]
    assert record["observations"]["torch_gradcheck"]["status"] == "passed"
    assert record["rules"] == RULES


def test_more_than_one_jacobian_entry_keeps_fast_mode():
    """Given a scalar loss of three elements, and a function of one scalar with three outputs, when each
    runs, then gradcheck runs in fast mode for both: slow mode would cost a pass per entry."""
    loss = run_check(
        {
            "function": lambda x: (torch.sin(x) * x).sum(),
            "x": [0.1, 0.2, 0.3],
            "analytical_gradient": lambda x: torch.cos(x) * x + torch.sin(x),
        }
    )
    spread = run_check(
        {"function": lambda x: x * torch.arange(1.0, 4.0, dtype=torch.float64), "x": 0.5, "analytical_gradient": 6.0}
    )
    assert _settings(loss)["fast_mode"] is True and _settings(spread)["fast_mode"] is True
