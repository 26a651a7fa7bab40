"""A DiagnosisContext for one float64 input `x`, as the engine builds it, for stories of the kink test."""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.core.check.diagnosis import DiagnosisContext
from jupyterlab_gradcheck.core.check.record import spec as defaults


def float64_context(function, x) -> DiagnosisContext:
    """The context of a scalar float64 function of `x` at the default central step and tolerance."""
    return DiagnosisContext(
        function=function,
        fd_values={"x": x},
        fd_v=torch.ones(()),
        dtype="float64",
        scheme="central",
        step=None,
        fd_tolerance=defaults.fd_tolerance("float64", "central"),
        grads={},
    )
