"""A `torch.library` custom op's schema and autograd registration, checked as `torch.library.opcheck` checks them.

The schema's `mutates_args` is compared with what the op really writes into, and a missing or misplaced autograd
registration is named, whether or not the op has `register_autograd`: each fault is one failed record with one
sentence naming the op and the argument, in the ledger like any other finding, never a crash and never said twice.
"""

from __future__ import annotations

import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file

X = torch.linspace(0.5, 1.5, 5, dtype=torch.float64)
NS = "gradcheck_registration_story"


def keep_x(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def cos_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * x.cos()


@torch.library.custom_op(f"{NS}::sine_bumps_x", mutates_args=())
def sine_bumps_x(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    x.mul_(1)  # a write that leaves the values as they were
    return y


sine_bumps_x.register_autograd(cos_backward, setup_context=keep_x)


@torch.library.custom_op(f"{NS}::sine_shifts_x", mutates_args=())
def sine_shifts_x(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    x.add_(1.0)
    return y


sine_shifts_x.register_autograd(cos_backward, setup_context=keep_x)


@torch.library.custom_op(f"{NS}::sine_bumps_x_alone", mutates_args=())
def sine_bumps_x_alone(x: torch.Tensor) -> torch.Tensor:
    y = x.sin()
    x.mul_(1)
    return y


@torch.library.custom_op(f"{NS}::sine_fills_buf", mutates_args=())
def sine_fills_buf(x: torch.Tensor, buf: torch.Tensor) -> torch.Tensor:
    buf.copy_(x.detach() + 1.0)  # a buffer the schema does not declare
    return x.sin()


sine_fills_buf.register_autograd(lambda ctx, grad: (cos_backward(ctx, grad), None), setup_context=keep_x)


@torch.library.custom_op(f"{NS}::running_max", mutates_args=("out",))
def running_max(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(torch.maximum(out, x))


@torch.library.custom_op(f"{NS}::sine_declares_x", mutates_args=("x",))
def sine_declares_x(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


@torch.library.custom_op(f"{NS}::sine_unregistered", mutates_args=())
def sine_unregistered(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


@torch.library.custom_op(f"{NS}::sine_wrong", mutates_args=())
def sine_wrong(x: torch.Tensor) -> torch.Tensor:
    return x.sin()


sine_wrong.register_autograd(lambda ctx, grad: grad * ctx.saved_tensors[0].sin(), setup_context=keep_x)

BACKEND = torch.library.Library(NS, "FRAGMENT")
BACKEND.define("sine_on_cpu(Tensor x) -> Tensor")
BACKEND.impl("sine_on_cpu", lambda x: x.sin(), "CPU")


def cosine(x):
    return x.cos()


def _block(result) -> dict:
    return result.record["function_modes"]["custom_op"]


def _verified(path) -> bool:
    report = verify_ledger_file(path, with_notebook=False)
    return report["ok"] and report["chain_ok"]


def test_a_write_into_an_undeclared_input_is_named_though_opcheck_sees_no_change(tmp_path):
    """Given a custom op declared with mutates_args=() and a register_autograd, whose body runs x.mul_(1)
    (a write that leaves x's values as they were, so opcheck's test_schema passes it),
    when it is checked with a ledger,
    then the record fails once, naming the op, the argument x and its schema; the custom_op block keeps opcheck's
    SUCCESS beside the write it saw; and the ledger holds the record and verifies."""
    path = tmp_path / "ops.gradcheck.jsonl"
    result = check(lambda x: sine_bumps_x(x).sum(), cosine, x=X, ledger=str(path))
    assert result.passed is False
    (failure,) = result.record["failures"]
    assert (failure["comparison"], failure["input"], failure["argument"]) == ("custom_op_schema", "x", "x")
    assert failure["reason"] == (
        f"the custom op {NS}.sine_bumps_x.default writes into its argument x in place, but its schema "
        f"{NS}::sine_bumps_x(Tensor x) -> Tensor does not declare x mutable: write into a copy (x.clone()) "
        "inside the op, or declare it with mutates_args=('x',)"
    )
    block = _block(result)
    assert block["ops"][f"{NS}.sine_bumps_x.default"] == {
        "test_schema": "SUCCESS",
        "test_autograd_registration": "SUCCESS",
    }
    assert block["writes"][f"{NS}.sine_bumps_x.default"]["x"] == {
        "input": "x",
        "declared": False,
        "changed": False,
        "requires_grad": True,
    }
    assert _verified(path)


def test_a_write_opcheck_also_finds_is_reported_once():
    """Given a custom op with mutates_args=() that adds 1 to x in place (opcheck's test_schema: "Argument x is not
    defined as mutable but was mutated"),
    when it is checked,
    then the record has one failure, ours naming x, and opcheck's verdict is kept in the block, not reported
    again."""
    result = check(lambda x: sine_shifts_x(x).sum(), cosine, x=X, ledger=False)
    assert result.passed is False
    assert [(f["comparison"], f["input"]) for f in result.record["failures"]] == [("custom_op_schema", "x")]
    error = _block(result)["ops"][f"{NS}.sine_shifts_x.default"]["error"]
    assert "test_schema failed with Argument x is not defined as mutable but was mutated" in error


def test_a_write_by_an_op_without_register_autograd_is_named_with_the_missing_formula():
    """Given the op of x.mul_(1) with mutates_args=() and no register_autograd,
    when it is checked,
    then the record names both faults, each once: the undeclared write into x first, then the missing autograd
    formula with the register_autograd call that adds it."""
    result = check(lambda x: sine_bumps_x_alone(x).sum(), cosine, x=X, ledger=False)
    assert result.passed is False
    schema, registration = result.record["failures"]
    assert (schema["comparison"], schema["input"]) == ("custom_op_schema", "x")
    assert "writes into its argument x in place" in schema["reason"]
    assert registration["comparison"] == "custom_op_registration"
    assert registration["reason"] == (
        f"the custom op {NS}.sine_bumps_x_alone.default has no autograd formula, so backward through it raises: "
        f"register its backward with torch.library.register_autograd('{NS}::sine_bumps_x_alone', backward, "
        "setup_context=...)"
    )


def test_a_write_into_a_fixed_buffer_the_schema_does_not_declare_fails_naming_the_buffer():
    """Given a custom op with mutates_args=() and a right register_autograd that copies x + 1 into a second
    argument `buf`, held with fixed= (not an input: no in-place check of the inputs sees it),
    when it is checked,
    then the gradients agree, yet the record fails once, naming the argument buf and no input."""
    buf = torch.zeros(5, dtype=torch.float64)
    result = check(lambda x, buf: sine_fills_buf(x, buf).sum(), cosine, x=X, fixed={"buf": buf}, ledger=False)
    assert result.passed is False
    assert all(row["passed"] for row in result.record["comparisons"])
    (failure,) = result.record["failures"]
    assert (failure["comparison"], failure["input"], failure["argument"]) == ("custom_op_schema", None, "buf")
    assert "writes into its argument buf in place" in failure["reason"]


def test_a_buffer_the_schema_declares_is_written_and_the_check_passes():
    """Given a custom op with mutates_args=("out",) that keeps a running maximum of x in the buffer out (fixed=),
    called beside sin(x),
    when it is checked,
    then it passes: opcheck's tests succeed and the block records out as declared, not a fault."""
    out = torch.zeros(5, dtype=torch.float64)

    def tracks_max(x, out):
        running_max(x, out)
        return x.sin().sum()

    result = check(tracks_max, cosine, x=X, fixed={"out": out}, ledger=False)
    assert result.passed is True and result.record["failure"] is None
    block = _block(result)
    assert block["ops"][f"{NS}.running_max.default"] == {
        "test_schema": "SUCCESS",
        "test_autograd_registration": "SUCCESS",
    }
    assert block["writes"][f"{NS}.running_max.default"]["out"]["declared"] is True
    assert bool((out >= X).all())  # the running maximum over every point the check evaluated, X among them


def test_a_declared_write_into_a_differentiable_input_is_named_not_taken_for_the_functions():
    """Given a custom op declared with mutates_args=("x",) that does not write into x (opcheck's test_schema passes
    it),
    when it is checked,
    then the record fails once, naming x and the declaration to drop, not "the function modified its input"."""
    result = check(lambda x: sine_declares_x(x).sum(), cosine, x=X, ledger=False)
    assert result.passed is False
    (failure,) = result.record["failures"]
    assert (failure["comparison"], failure["input"]) == ("custom_op_schema", "x")
    assert failure["reason"] == (
        f"the custom op {NS}.sine_declares_x.default declares in mutates_args that it writes into x, which requires "
        "grad, yet left x unchanged: autograd counts x as modified in place, and torch.library.register_autograd "
        "refuses an op that mutates its arguments; drop 'x' from mutates_args"
    )
    assert _block(result)["ops"][f"{NS}.sine_declares_x.default"]["test_schema"] == "SUCCESS"


def test_a_custom_op_without_register_autograd_is_named_with_the_call_that_registers_it(tmp_path):
    """Given a custom op of differentiable torch code with no register_autograd (opcheck's
    test_autograd_registration passes it: its autograd kernel is the one that raises),
    when it is checked with a ledger,
    then the record fails once, naming the op and the register_autograd call to add, and the ledger verifies."""
    path = tmp_path / "ops.gradcheck.jsonl"
    result = check(lambda x: sine_unregistered(x).sum(), cosine, x=X, ledger=str(path))
    assert result.passed is False
    (failure,) = result.record["failures"]
    assert failure["comparison"] == "custom_op_registration"
    assert f"torch.library.register_autograd('{NS}::sine_unregistered'" in failure["reason"]
    assert _verified(path)


def test_a_kernel_on_the_cpu_key_alone_fails_opchecks_autograd_registration(tmp_path):
    """Given an op defined with torch.library.Library and lib.impl(..., "CPU") alone, whose body is sin(x) (autograd
    runs through it, so every gradient agrees),
    when it is checked with a ledger,
    then the record fails for opcheck's test_autograd_registration, naming the op and register_autograd, where it
    passed before; and the ledger verifies."""
    path = tmp_path / "ops.gradcheck.jsonl"
    op = getattr(torch.ops, NS).sine_on_cpu
    result = check(lambda x: op(x).sum(), cosine, x=X, ledger=str(path))
    assert result.passed is False
    assert all(row["passed"] for row in result.record["comparisons"])
    (failure,) = result.record["failures"]
    assert (failure["comparison"], failure["test"]) == ("custom_op_opcheck", "test_autograd_registration")
    assert failure["reason"].startswith(
        f"torch.library.opcheck's test_autograd_registration fails {NS}.sine_on_cpu.default: an input requires "
        "grad but the op has no autograd kernel"
    )
    assert f"torch.library.register_autograd('{NS}::sine_on_cpu'" in failure["reason"]
    assert "does not have an autograd kernel" in _block(result)["ops"][f"{NS}.sine_on_cpu.default"]["error"]
    assert _verified(path)


def test_a_wrong_register_autograd_is_caught_by_the_comparisons_and_passes_opcheck():
    """Given a custom op of sin(x) whose register_autograd backward returns sin(x) for cos(x),
    when it is checked,
    then the comparisons fail at x (suspect the backward), opcheck's tests succeed, and no custom-op failure is
    added."""
    result = check(lambda x: sine_wrong(x).sum(), cosine, x=X, ledger=False)
    assert result.passed is False
    assert result.record["failure"]["input"] == "x"
    assert "suspect the backward" in result.record["failure"]["reason"]
    assert _block(result)["failures"] == []
    assert not [f for f in result.record["failures"] if f["comparison"].startswith("custom_op")]


def test_a_fault_the_op_does_not_explain_stays_first():
    """Given a function that fills a buffer through an op with an undeclared write, then raises ValueError,
    when it is checked,
    then the record's first failure is the ValueError of the user's code, and the op's write follows it."""
    buf = torch.zeros(5, dtype=torch.float64)

    def fills_then_raises(x, buf):
        sine_fills_buf(x, buf)
        raise ValueError("not written yet")

    result = check(fills_then_raises, cosine, x=X, fixed={"buf": buf}, ledger=False)
    assert result.passed is False
    first, second = result.record["failures"]
    assert first["comparison"] == "user_code"
    assert "fills_then_raises raised ValueError: not written yet" in first["reason"]
    assert (second["comparison"], second["argument"]) == ("custom_op_schema", "buf")


def test_the_reason_is_given_in_spanish():
    """Given the op that writes into x undeclared,
    when its record's reason is read in Spanish,
    then it says so in Spanish, with the op and the argument."""
    result = check(lambda x: sine_shifts_x(x).sum(), cosine, x=X, ledger=False)
    spanish = result.record["failure"]["reason"].localized("es")
    assert spanish.startswith(
        f"la operación personalizada {NS}.sine_shifts_x.default escribe en el sitio en su argumento x"
    )


def test_a_function_without_a_custom_op_has_no_custom_op_block():
    """Given sin(x) of built-in operators alone,
    when it is checked,
    then it passes with no function_modes block: the search for custom ops finds none and adds nothing."""
    result = check(lambda x: x.sin().sum(), cosine, x=X, ledger=False)
    assert result.passed is True
    assert "function_modes" not in result.record
