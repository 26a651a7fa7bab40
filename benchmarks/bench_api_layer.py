"""B12, the API layer: what a check costs above the engine's own work, at 10^4 elements.

Workload, float64: elementwise `sin(x) * x` at n = 10^4, its derivative written by hand. Timed in one
run, interleaved (benchmarks.interleaved_medians), with one torch thread:

- engine: `core.check.engine.run_check` on a spec parsed once beforehand: the observations, the finite
  differences, the comparisons and the record, the work a check is;
- API: `jupyterlab_gradcheck.api.check(f, grad, x=x, ledger=False)`, as a user calls it: the engine's
  work and the layer around it (the record built from the arguments, parsed, placed, admitted);
- record: `core.run.run_spec` of the JSON record, x as a list of 10^4 numbers, as the CLI and the
  server's worker receive it;
- gradcheck fast: `torch.autograd.gradcheck(f, (x,), fast_mode=True)`, for scale.

The API layer is API minus engine (goal < 0.2 ms); the record's layer is record minus engine, reported.
A profile of the API path names where the layer's time goes.
"""

from __future__ import annotations

from . import format_seconds, graded, interleaved_medians, profile_text, row

N = 10**4
#: The issue's goal for the API layer above the engine, in seconds.
LAYER_GOAL = 2e-4


def function(x):
    import torch

    return torch.sin(x) * x


def gradient(x):
    import torch

    return torch.cos(x) * x + torch.sin(x)


def candidates(n: int) -> dict:
    """The four interleaved calls (see the module)."""
    import torch

    from jupyterlab_gradcheck import api
    from jupyterlab_gradcheck.core.check.engine import run_check
    from jupyterlab_gradcheck.core.check.environment import available_devices
    from jupyterlab_gradcheck.core.run import Admission, admit, run_spec

    x = torch.linspace(-1.0, 1.0, n, dtype=torch.float64)
    admission = Admission(devices=available_devices())
    record = {"id": "layer", "function": "sin(x)*x", "x": x.tolist(), "analytical_gradient": "cos(x)*x+sin(x)"}
    spec = admit(dict(record), admission).spec
    return {
        "engine": lambda: run_check(spec, devices=admission.devices),
        "API": lambda: api.check(function, gradient, x=x, ledger=False),
        "record": lambda: run_spec(dict(record), None, admission=admission),
        "gradcheck fast": lambda: torch.autograd.gradcheck(function, (x.clone().requires_grad_(True),), fast_mode=True),
    }


def run(quick: bool) -> list[dict]:
    import torch

    torch.set_num_threads(1)
    calls = candidates(N)
    medians = interleaved_medians(calls, rounds=5 if quick else 21)
    engine = medians["engine"]["median"]
    api_layer = medians["API"]["median"] - engine
    record_layer = medians["record"]["median"] - engine
    times = ", ".join(f"{name} {format_seconds(m['median'])}" for name, m in medians.items())
    rows = [
        graded(
            f"B12 API layer, sin(x)*x, n={N}: api.check - engine",
            round(api_layer * 1e3, 3),
            "ms",
            f"< {LAYER_GOAL * 1e3:g} ms",
            api_layer < LAYER_GOAL,
            f"{times} (medians of interleaved rounds, one torch thread)",
        ),
        row(
            f"B12 record layer, sin(x)*x, n={N}: run_spec(JSON record) - engine",
            round(record_layer * 1e3, 3),
            "ms",
            "-",
            "INFO",
            "x arrives as a list of 10^4 numbers, as on the CLI and in the server's worker",
        ),
    ]
    if not quick and api_layer >= LAYER_GOAL:
        rows[0]["profile"] = profile_text(calls["API"], 20, "api.check at 10^4")
    return rows
