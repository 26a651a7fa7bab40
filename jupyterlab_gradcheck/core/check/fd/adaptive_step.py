"""The adaptive step: the step per decade whose estimated error, truncation plus rounding, is smallest.

Moved out of core/check/fd/finite_difference.py, which evaluates the quotients it compares.
"""

from __future__ import annotations

import torch

from ..record import defaults


def adaptive(probe, scheme: str, dtype: str, difference_quotient):
    """Pick the step with the smallest estimated error; return it with the telemetry.

    The estimate at step h is |D(h) - D(h/2)| (truncation) plus the rounding,
    eps * (|phi| + |x_i| |D_i|) / h: the first term from the values of phi, the second from
    x_i + h itself being rounded, which dominates where phi is zero (log at 1). The rounding
    term matters: at tiny steps D(h) and D(h/2) can coincide by quantisation, which alone
    would look like a perfect step. `difference_quotient` is core/check/fd/finite_difference.py's, passed
    in by it (that module evaluates the quotients this one compares).
    """
    import math

    eps = defaults.EPS[defaults.FD_DTYPE[dtype]]
    x = probe.values[probe.name]
    scale = torch.clamp(x.reshape(-1).abs(), min=1.0)
    magnitude = float(torch.sum((probe.v * probe.function(**probe.values)).abs()))
    telemetry, best = [], None
    for k in range(1, int(-math.log10(eps)) + 1):
        relative = 10.0**-k
        h = relative * scale
        estimate = difference_quotient(probe, scheme, h)
        halved = difference_quotient(probe, scheme, h / 2)
        truncation = float((estimate - halved).abs().max())
        representation = float((x.reshape(-1).abs() / scale * halved.abs()).max()) if x.numel() else 0.0
        rounding = eps * (magnitude + representation) / relative
        total = truncation + rounding
        telemetry.append(
            {"step": relative, "change_when_halved": truncation, "rounding_estimate": rounding, "error_estimate": total}
        )
        if best is None or total < best[0]:
            best = (total, relative, halved)
    total, relative, estimate = best
    return (
        estimate,
        relative,
        {
            "rule": "step minimising |D(h) - D(h/2)| + eps*(|phi| + |x_i||D_i|)/h over decades; the estimate at h/2 is kept",
            "candidates": telemetry,
            "chosen_step": relative,
            "error_estimate": total,
        },
    )
