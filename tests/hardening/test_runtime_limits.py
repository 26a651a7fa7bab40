"""Records the validator accepts that must still finish: the parser bounds the expression,
so the work a check does must stay bounded too.

A 23-character expression within every documented limit once made the symbolic opinion
evaluate e^(e^(e^(e^3))) exactly, which does not finish. Each record here goes through the
real `jupyter-gradcheck run -` and must come back as a verdict (exit 0 or 1) well within the
limit below: a hang is a denial of service, not a slow check.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(sys.executable).with_name("jupyter-gradcheck")
#: Seconds a scalar check may take here, start-up included. It normally takes 3 to 5 s (most of
#: it importing torch and SymPy); 30 s leaves room for a loaded 2-core machine, and a hang
#: never ends.
BOUND = 30


@pytest.mark.parametrize(
    "check",
    [
        {"function": "exp(exp(exp(exp(x))))", "x": 3, "analytical_gradient": 1},
        {"function": "exp(exp(exp(exp(x))))", "x": 3, "analytical_gradient": "exp(exp(exp(exp(x))))"},
        {"function": "((x**64)**64)**64", "x": 3, "analytical_gradient": "64 * x**63"},
        {"function": "sin(x)**64 * exp(exp(x))", "x": 30, "analytical_gradient": 0},
    ],
    ids=["exp-tower", "exp-tower-symbolic-gradient", "power-of-powers", "overflowing-product"],
)
def test_an_accepted_record_comes_back_with_a_verdict(check, tmp_path):
    """Given a record inside every documented limit whose values overflow, when it is run,
    then the CLI answers with a verdict (exit 0 or 1, the record on standard output) before
    the bound, instead of hanging."""
    try:
        completed = subprocess.run(
            [str(SCRIPT), "run", "-", "--no-sweep"],
            input=json.dumps(check),
            capture_output=True,
            text=True,
            timeout=BOUND,
            cwd=tmp_path,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{check['function']} did not finish within {BOUND} s")
    assert completed.returncode in (0, 1), completed.stderr[-2000:]
    assert json.loads(completed.stdout)["executed"] is True
