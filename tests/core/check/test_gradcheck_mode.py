"""Which mode of torch.autograd.gradcheck a check embeds: fast mode (policies 2 and 3, and 4 above one
Jacobian entry), and under policy 4 slow mode for a scalar function of one scalar, whose one Jacobian
entry slow mode compares exactly for less time than fast mode's projection."""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.engine import run_check
from jupyterlab_gradcheck.core.check.policy import CURRENT


def _settings(record: dict) -> dict:
    return record["observations"]["torch_gradcheck"]["settings"]


def test_the_seed_record_gets_gradcheck_in_slow_mode_under_the_current_policy():
    """Given the mission's seed record x*x at 3, when it runs, then it is made by policy 4 and PyTorch's
    verdict comes from slow mode, with its usual eps, atol and rtol, and it passes."""
    record = run_check({"function": "x*x", "x": 3, "analytical_gradient": 6, "observed_gradient": None,
                        "executed": False})
    assert record["policy"] == CURRENT == 4
    assert _settings(record) == {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3, "fast_mode": False}
    assert record["observations"]["torch_gradcheck"]["status"] == "passed"


def test_more_than_one_jacobian_entry_keeps_fast_mode():
    """Given a scalar loss of three elements, and a function of one scalar with three outputs, when each
    runs, then gradcheck runs in fast mode for both: slow mode would cost a pass per entry."""
    loss = run_check({"function": lambda x: (torch.sin(x) * x).sum(), "x": [0.1, 0.2, 0.3],
                      "analytical_gradient": lambda x: torch.cos(x) * x + torch.sin(x)})
    spread = run_check({"function": lambda x: x * torch.arange(1.0, 4.0, dtype=torch.float64), "x": 0.5,
                        "analytical_gradient": 6.0})
    assert _settings(loss)["fast_mode"] is True and _settings(spread)["fast_mode"] is True


def test_a_policy_3_record_replays_with_the_fast_mode_it_was_made_with():
    """Given the seed record asking for policy 3 (as a record made before policy 4 does on replay), when it
    runs, then gradcheck runs in fast mode as it did when the record was made."""
    record = run_check({"function": "x*x", "x": 3, "analytical_gradient": 6, "policy": 3})
    assert record["policy"] == 3 and _settings(record)["fast_mode"] is True
