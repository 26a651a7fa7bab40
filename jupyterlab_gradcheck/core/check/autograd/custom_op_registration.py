"""A `torch.library.custom_op` in the graph, checked the way `torch.library.opcheck` checks its autograd registration.

A custom op's backward comes from `register_autograd`, and PyTorch's own test of that registration is
`torch.library.opcheck`: `test_schema` (the op mutates and aliases only what its schema says) and
`test_autograd_registration` (an input that requires grad reaches an autograd kernel). Its other tests
(`test_faketensor`, `test_aot_dispatch_dynamic`) are about torch.compile, not gradients, and are left
out. The check finds each custom op the function calls (one forward pass under a dispatch mode that
sees every operator below autograd), runs opcheck on the first call of each with the same arguments,
and records the result beside forward mode and batched gradients; a test that fails is a failure.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_map

from ...errors import exception_line
from ...i18n import Message
from .failures import event_failure

#: opcheck's tests that concern a custom op's autograd registration.
TESTS = ("test_schema", "test_autograd_registration")
#: Operator namespaces of PyTorch itself, which are not custom ops.
BUILT_IN = ("aten", "prim", "prims", "_c10d_functional", "profiler")


class _CustomOpCalls(TorchDispatchMode):
    """Records the first call of each operator outside PyTorch's own namespaces."""

    def __init__(self):
        super().__init__()
        self.calls = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace not in BUILT_IN and str(func) not in self.calls:
            self.calls[str(func)] = (func, args, kwargs or {})
        return func(*args, **(kwargs or {}))


def _fresh(value):
    """A tensor argument as opcheck needs it: detached, a copy, needing grad where the call's did."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    return value


def custom_op_calls(function, leaves: dict) -> dict:
    """{operator name: (operator, args, kwargs)} of the custom ops one forward pass of `function` calls."""
    seen = _CustomOpCalls()
    with torch.enable_grad(), seen:
        function(**{n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()})
    return seen.calls


def opcheck_registration(function, leaves: dict) -> dict | None:
    """The `custom_op` observation: opcheck's TESTS on each custom op the function calls, its failures; None where
    it calls none."""
    calls = custom_op_calls(function, leaves)
    if not calls:
        return None
    results, failures = {}, []
    for name, (op, args, kwargs) in calls.items():
        try:
            results[name] = torch.library.opcheck(
                op, tree_map(_fresh, args), tree_map(_fresh, kwargs), test_utils=TESTS
            )
        except Exception as exc:  # opcheck raises on the first test that fails
            reason = Message(
                "torch.library.opcheck fails {op}'s autograd registration: {error}", op=name, error=exception_line(exc)
            )
            results[name] = {"error": exception_line(exc)}
            failures.append(event_failure("custom_op_opcheck", reason, op=name))
    return {
        "status": "failed" if failures else "observed",
        "description": Message("torch.library.opcheck's {tests} on each custom op called", tests=", ".join(TESTS)),
        "ops": results,
        "failures": failures,
    }
