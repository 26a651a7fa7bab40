"""Write the side panel's test fixture: real ledger entries of custom-Function checks.

    .venv/bin/python scripts/function_checks_fixture.py

The jest tests of the side panel (src/__tests__/functionChecksView.spec.ts) render these entries,
so the panel is tested against what the Python API really records, not against hand-written
JSON. Six checks run through `check()` into a scratch notebook's ledger, and its expectation
and observation entries are saved to src/__tests__/fixtures/function-checks.json:

- `cube_double_backward`: an old-style Function with no jvp, `hessian="double_backward"`: the
  second order observed, forward mode skipped (PyTorch's reason), batched gradients observed;
- `cube_jvp_hessian`: a Function with a jvp and a vmap rule and a declared Hessian: every row
  observed and every comparison passed;
- `cube_jvp_wrong`: the same Function with its jvp off by 1 %: the forward-mode comparisons fail
  and the failure is kept;
- `two_outputs`: a function returning (x^2, x^3, an int64 tensor) with the derivative of x^3
  written wrong (3x for 3x^2): checked output by output, output 1 fails, output 2 is listed as
  not differentiable;
- `complex_norm`: sum |z|^2 over a complex128 input, its gradient 2z declared as a complex
  tensor: the expectation and the observation are complex values `{"real": ..., "imag": ...}`;
- `cube_detached`: x^3 whose backward detaches x, with `hessian="double_backward"`: autograd
  has no Hessian to give, and the failure says the backward is not differentiable.

Run it again only when the record's shape changes; the fixture is data, committed.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "__tests__" / "fixtures" / "function-checks.json"
sys.path.insert(0, str(ROOT / "tests"))

from jupyterlab_gradcheck.api import check  # noqa: E402
from support.functions import Cube, CubeDetachedBackward, CubeWithJvp  # noqa: E402


def main() -> None:
    """Run the three checks into a scratch ledger and save its check entries."""
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    with tempfile.TemporaryDirectory() as folder:
        notebook = Path(folder) / "functions.ipynb"
        check(
            lambda x: Cube.apply(x).sum(), x=x, hessian="double_backward", id="cube_double_backward", notebook=notebook
        )
        check(
            lambda x: CubeWithJvp.apply(x).sum(),
            x=x,
            hessian=torch.diag(6 * x),
            id="cube_jvp_hessian",
            notebook=notebook,
        )
        CubeWithJvp.jvp_scale = 1.01
        try:
            check(lambda x: CubeWithJvp.apply(x).sum(), x=x, id="cube_jvp_wrong", notebook=notebook)
        finally:
            CubeWithJvp.jvp_scale = 1.0
        check(
            lambda x: (x**2, x**3, torch.ones(2, dtype=torch.int64)),
            {"outputs": ["2*x", "3*x", None]},
            x=x,
            id="two_outputs",
            notebook=notebook,
        )
        z = torch.tensor([1 + 2j, 0.5 - 1j], dtype=torch.complex128)
        check(lambda z: (z * z.conj()).real.sum(), 2 * z, z=z, id="complex_norm", notebook=notebook)
        check(
            lambda x: CubeDetachedBackward.apply(x).sum(),
            x=x,
            hessian="double_backward",
            id="cube_detached",
            notebook=notebook,
        )
        lines = (Path(folder) / "functions.gradcheck.jsonl").read_text(encoding="utf-8").splitlines()
    entries = [entry for entry in map(json.loads, lines) if entry["check_id"]]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(entries, indent=1) + "\n", encoding="utf-8")
    print(f"{len(entries)} entries -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
