"""check() says what it takes: a setting written as a keyword, a misspelt keyword, and an integer the
backward leaves out are refused in one line (English and Spanish), before anything runs or is written."""

from __future__ import annotations

import math

import pytest
import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.errors import SpecError


class PowerWeighted(torch.autograd.Function):
    """sum(w * x**k) with an integer power k the backward gives no gradient for (None)."""

    @staticmethod
    def forward(ctx, x, w, k):
        ctx.save_for_backward(x, w)
        ctx.k = k
        return (w * x**k).sum()

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        return grad * w * ctx.k * x ** (ctx.k - 1), grad * x**ctx.k, None


X = torch.tensor([1.0, 2.0], dtype=torch.float64)
W = torch.tensor([0.5, 1.5], dtype=torch.float64)


def _refusal(tmp_path, *args, **kwargs) -> SpecError:
    ledger = tmp_path / "lab.gradcheck.jsonl"
    with pytest.raises(SpecError) as caught:
        check(*args, ledger=ledger, **kwargs)
    assert not ledger.exists()  # nothing written
    assert "\n" not in caught.value.message  # one line
    return caught.value


@pytest.mark.parametrize(
    ("setting", "value", "written"),
    [
        ("rtol", 1e-3, "tolerance={'rtol': ...}"),
        ("atol", 1e-8, "tolerance={'atol': ...}"),
        ("eps", 1e-6, "finite_difference={'step': ...}"),
        ("step", 1e-4, "finite_difference={'step': ...}"),
        ("scheme", "forward", "finite_difference={'scheme': ...}"),
    ],
)
def test_a_setting_written_as_a_keyword_is_refused_pointing_where_it_belongs(tmp_path, setting, value, written):
    """Given x*x at 3 with its derivative 2x, when check() is also given rtol=1e-3 (or atol, eps, step,
    scheme) as a keyword, then it is refused in one line naming the setting and where to write it,
    instead of becoming a second input, and no ledger is written."""
    error = _refusal(tmp_path, "x*x", "2*x", x=3.0, **{setting: value})
    assert error.message == f"{setting!r} is a setting, not an input: write it as {written}"
    assert error.field == setting


@pytest.mark.parametrize(("slip", "meant"), [("dtpye", "dtype"), ("tolerence", "tolerance"), ("devcie", "device")])
def test_a_misspelt_keyword_is_refused_naming_the_one_meant(tmp_path, slip, meant):
    """Given a keyword of check() misspelt (dtpye, tolerence, devcie), when check() is called,
    then it is refused naming the keyword meant, not taken as an input."""
    error = _refusal(tmp_path, "x*x", "2*x", x=3.0, **{slip: "float32"})
    assert error.message == (
        f"{slip!r} is not a keyword of check(): did you mean {meant}=? (an input's name must differ from it)"
    )


def test_a_setting_name_the_function_uses_is_an_input():
    """Given an expression that uses a name that is also a setting (h) and a callable with an
    argument named eps, when check() runs them, then each is an input and the checks pass."""
    assert check("x*h", {"x": "h", "h": "x"}, x=2.0, h=3.0, ledger=False).passed
    result = check(lambda x, eps: (x * eps).sum(), {"x": [5.0, 5.0], "eps": 3.0}, x=[1.0, 2.0], eps=5.0, ledger=False)
    assert result.passed, result.summary()
    assert result.record["inputs"]["eps"] == 5.0


def test_the_setting_refusal_reads_in_spanish(tmp_path):
    """Given rtol written as a keyword, when the refusal is shown in Spanish, then it reads in Spanish."""
    error = _refusal(tmp_path, "x*x", "2*x", x=3.0, rtol=1e-3)
    assert error.localized("es") == "'rtol' es un ajuste, no una entrada: escríbalo como tolerance={'rtol': ...}"
    slip = _refusal(tmp_path, "x*x", "2*x", x=3.0, dtpye="float32")
    assert slip.localized("es") == (
        "'dtpye' no es un argumento de check(): ¿quería decir dtype=? (el nombre de una entrada debe ser otro)"
    )


def test_an_integer_the_backward_leaves_out_is_refused_saying_to_hold_it(tmp_path):
    """Given a Function whose backward gives None for its integer power k, when check() gets k=3 as
    an input (with or without grad=), then it is refused saying to hold it with fixed={'k': 3},
    in English and Spanish, rather than failing the backward at k."""
    error = _refusal(tmp_path, PowerWeighted, x=X, w=W, k=3)
    assert error.message == "k is an integer and the backward gives no gradient for it: hold it with fixed={'k': 3}"
    assert error.localized("es") == (
        "k es un entero y la función backward no da gradiente para él: manténgalo fijo con fixed={'k': 3}"
    )
    with_grad = _refusal(tmp_path, PowerWeighted, {"x": 3 * W * X**2, "w": X**3, "k": 0.0}, x=X, w=W, k=3)
    assert with_grad.message == error.message


def test_the_integer_held_fixed_is_checked_and_passes():
    """Given the same Function, when k is held with fixed={'k': 3} as the refusal says, then the
    check passes against the Function's own backward and records k among the held arguments."""
    result = check(PowerWeighted, x=X, w=W, fixed={"k": 3}, ledger=False)
    assert result.passed, result.summary()
    assert result.record["fixed"] == {"k": 3}


def test_an_integer_that_gets_a_gradient_stays_an_input():
    """Given x**n with n=2 given as a Python int, when check() runs it, then n is a differentiable
    input (its gradient x**n log x is compared) and the check passes."""
    d_n = 1.5**2 * math.log(1.5) + 2.0**2 * math.log(2.0)
    result = check(lambda x, n: (x**n).sum(), {"x": [3.0, 4.0], "n": d_n}, x=[1.5, 2.0], n=2, ledger=False)
    assert result.passed, result.summary()
    assert result.record["inputs"]["n"] == 2
