"""Do two devices observe the same gradients? `python -m benchmarks.agreement [--devices cpu,cuda]`.

Runs the same checks through `core.check.engine.run_check` on each device and compares every
observed gradient element by element: the four autograd observations within the dtype's
comparison tolerance, the finite-difference observation within the dtype's
finite-difference tolerance for its scheme (core/check/record/spec.py), and the verdicts (`passed`,
torch's gradcheck status) exactly. scripts/gpu-check.sh runs it as cpu against cuda; cpu
against cpu is its own control (everything must agree, bit for bit as it happens).
Exit status 0 when every check agrees, 1 when one does not.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

#: The same checks on every device: scalar, vector sum, elementwise, reduction, two inputs,
#: both float dtypes and three schemes, and a wrong hand derivation (a failure must agree too).
CHECKS = [
    {"id": "square", "function": "x*x", "x": 3, "analytical_gradient": 6},
    {"id": "vector-sum", "function": "(x**2).sum()", "x": [1, 2, 3], "analytical_gradient": "2*x"},
    {
        "id": "sin-times-x",
        "function": "torch.sin(x)*x",
        "x": [-2.0, -0.5, 0.25, 1.0, 3.0],
        "analytical_gradient": "torch.cos(x)*x + torch.sin(x)",
    },
    {
        "id": "tanh-squared-sum",
        "function": "torch.sum(torch.tanh(x)**2)",
        "x": [[0.1, -0.7], [1.3, 2.0]],
        "analytical_gradient": "2*torch.tanh(x)*(1 - torch.tanh(x)**2)",
    },
    {
        "id": "two-inputs",
        "function": "(w*x).sum()",
        "inputs": {"x": [1.0, 2.0], "w": [0.5, -1.5]},
        "analytical_gradient": {"x": "w", "w": "x"},
    },
    {
        "id": "exp-float32",
        "function": "torch.exp(x)",
        "x": [0.5, 1.0],
        "dtype": "float32",
        "analytical_gradient": "torch.exp(x)",
    },
    {
        "id": "log-richardson",
        "function": "torch.log(x)",
        "x": [0.5, 2.0],
        "analytical_gradient": "1/x",
        "finite_difference": {"scheme": "richardson"},
    },
    {
        "id": "cube-complex-step",
        "function": "x**3",
        "x": 1.5,
        "analytical_gradient": "3*x**2",
        "finite_difference": {"scheme": "complex_step"},
    },
    {"id": "wrong-expectation", "function": "x*x", "x": 3, "analytical_gradient": 5},
]

AUTOGRAD_OBSERVATIONS = ("backward_pass_1", "backward_pass_2_accumulated", "after_clear_none", "autograd_grad")


def _deviation(left, right, rtol: float, atol: float) -> tuple[float, bool]:
    """(largest |left - right|, whether every element is within atol + rtol * |left|)."""
    import torch

    a = torch.as_tensor(left, dtype=torch.float64)
    b = torch.as_tensor(right, dtype=torch.float64)
    if a.shape != b.shape:
        return float("inf"), False
    error = (a - b).abs()
    return (float(error.max()) if error.numel() else 0.0), bool((error <= atol + rtol * a.abs()).all())


def compare_records(first: dict, second: dict) -> list[dict]:
    """One row per observed gradient (observation x input), plus one for the verdicts."""
    from jupyterlab_gradcheck.core.check.record import spec as defaults

    dtype = first["dtype"]
    scheme = first["finite_difference"]["scheme"]
    rows = []
    for name in AUTOGRAD_OBSERVATIONS + ("finite_difference",):
        tolerance = (
            defaults.fd_tolerance(dtype, scheme)
            if name == "finite_difference"
            else defaults.comparison_tolerance(dtype)
        )
        for input_name, left in first["observations"][name]["gradients"].items():
            right = second["observations"][name]["gradients"][input_name]
            deviation, ok = _deviation(left["value"], right["value"], tolerance["rtol"], tolerance["atol"])
            rows.append(
                {
                    "check": first["id"],
                    "observation": name,
                    "input": input_name,
                    "dtype": dtype,
                    "max_abs_deviation": deviation,
                    "rtol": tolerance["rtol"],
                    "atol": tolerance["atol"],
                    "agrees": ok,
                }
            )
    verdicts = [
        (first["passed"], second["passed"]),
        (first["observations"]["torch_gradcheck"]["status"], second["observations"]["torch_gradcheck"]["status"]),
    ]
    same = all(a == b for a, b in verdicts)
    rows.append(
        {
            "check": first["id"],
            "observation": "verdicts (passed, torch_gradcheck)",
            "input": "-",
            "dtype": dtype,
            "max_abs_deviation": 0.0 if same else float("inf"),
            "rtol": 0.0,
            "atol": 0.0,
            "agrees": same,
            "values": [list(v) for v in verdicts],
        }
    )
    return rows


def agreement(devices: tuple[str, str]) -> list[dict]:
    """Every comparison row for CHECKS run on the two devices."""
    from jupyterlab_gradcheck.core.check.engine import run_check

    rows = []
    for check in CHECKS:
        first = run_check({**check, "device": devices[0]}, sweep=False)
        second = run_check({**check, "device": devices[1]}, sweep=False)
        rows += compare_records(first, second)
    return rows


def markdown(rows: list[dict], devices: tuple[str, str]) -> str:
    """The agreement table, with a one-line verdict on top."""
    disagreements = [r for r in rows if not r["agrees"]]
    lines = [
        f"# Agreement of {devices[0]} and {devices[1]} observations",
        "",
        f"{len(rows) - len(disagreements)} of {len(rows)} comparisons agree within the dtype's tolerance "
        f"over {len(CHECKS)} checks.",
        "",
        "| check | observation | input | dtype | max abs deviation | rtol | atol | agrees |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['check']} | {r['observation']} | {r['input']} | {r['dtype']} | "
            f"{r['max_abs_deviation']:.3g} | {r['rtol']:.3g} | {r['atol']:.3g} | {r['agrees']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.agreement", description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", default="cpu,cuda", help="two devices, comma-separated (default cpu,cuda)")
    parser.add_argument("--out", type=Path, default=None, help="folder for agreement.md and agreement.json")
    args = parser.parse_args(argv)
    devices = tuple(d.strip() for d in args.devices.split(","))
    if len(devices) != 2:
        parser.error("--devices takes exactly two devices, e.g. cpu,cuda")
    rows = agreement(devices)
    text = markdown(rows, devices)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "agreement.md").write_text(text, encoding="utf-8")
        (args.out / "agreement.json").write_text(
            json.dumps({"devices": devices, "rows": rows}, indent=1, default=str), encoding="utf-8"
        )
    return 0 if all(r["agrees"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
