"""An input with no elements is a check with nothing to compare for it, said so in the record, not refused.

OpInfo's `mm`, `linear`, `bilinear` and `multi_dot` have samples with a 0-element input; they were
refused as "inputs.x0: empty list at depth 0", where gradcheck passes them.
"""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks.opinfo_sweep import autograd_gradient, run_ours
from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.errors import SpecError
from jupyterlab_gradcheck.core.i18n import localize
from jupyterlab_gradcheck.core.ledger.store import Ledger
from support.ledger import check_entries


def _weighted(output):
    """sum_j w_j out_j with w_j = 1 + sin(j) / 2, as the OpInfo sweep reduces an output."""
    flat = output.reshape(-1)
    return (flat * (1.0 + 0.5 * torch.sin(torch.arange(flat.numel(), dtype=flat.dtype)))).sum()


def _opinfo_sample(op_name: str, index: int):
    """(function, inputs) of OpInfo's float64 sample `index` of `op_name` (mm or linalg.multi_dot)."""
    from torch.testing._internal.common_methods_invocations import op_db

    (op,) = [op for op in op_db if op.name == op_name and not op.variant_test_name]
    torch.manual_seed(0)
    sample = list(op.sample_inputs("cpu", torch.float64, requires_grad=True))[index]
    if op_name == "mm":
        tensors = [sample.input, sample.args[0]]
        return (lambda x0, x1: _weighted(torch.mm(x0, x1))), {"x0": tensors[0].detach(), "x1": tensors[1].detach()}
    tensors = list(sample.input)
    names = [f"x{k}" for k in range(len(tensors))]

    def function(**inputs):
        return _weighted(torch.linalg.multi_dot([inputs[n] for n in names]))

    return function, {n: t.detach() for n, t in zip(names, tensors)}


def test_mm_of_an_empty_batch_compares_the_other_input_and_names_the_empty_one():
    """Given OpInfo's mm sample 1, a (0, 5) by (5, 10) product (x1's gradient is zeros: no row uses it),
    when it is checked against autograd's gradient, then it passes, x1 is compared (its 50 elements),
    and the record keeps x0 as {"shape": [0, 5]} and names it in empty_inputs with the reason."""
    function, inputs = _opinfo_sample("mm", 1)
    assert [list(t.shape) for t in inputs.values()] == [[0, 5], [5, 10]]
    record = run_ours(function, inputs, autograd_gradient(function, inputs))["record"]
    assert record["passed"] is True
    assert record["inputs"]["x0"] == {"shape": [0, 5]}
    assert record["empty_inputs"] == {
        "inputs": {"x0": {"shape": [0, 5]}},
        "reason": "x0 has no elements: its gradient is empty, so there is nothing to compare for it",
    }
    compared = {c["input"] for c in record["comparisons"]}
    assert compared == {"x1"}
    assert record["observations"]["torch_gradcheck"]["verdict"] is True


@pytest.mark.parametrize(("op_name", "index"), [("mm", 2), ("linalg.multi_dot", 1)])
def test_a_check_whose_every_input_is_empty_passes_with_nothing_to_compare(op_name, index):
    """Given an OpInfo sample whose every differentiable input is empty ((5, 0) by (0, 10) for mm),
    when it is checked, then it passes with no comparison and no failure, and says why."""
    function, inputs = _opinfo_sample(op_name, index)
    assert all(t.numel() == 0 for t in inputs.values())
    record = run_ours(function, inputs, autograd_gradient(function, inputs))["record"]
    assert (record["passed"], record["comparisons"], record["failure"]) == (True, [], None)
    assert record["empty_inputs"]["reason"].startswith("x0, x1 has no elements")
    assert localize(record["empty_inputs"]["reason"], "es").startswith("x0, x1 no tiene elementos")


def test_an_empty_tensor_through_check_is_ledgered_by_its_shape(tmp_path):
    """Given (a @ b).sum() with a of shape (0, 3) and b of shape (3, 2), and the expectation zeros for b,
    when check() runs it into a ledger, then it passes, and the ledger's expectation holds a as
    {"shape": [0, 3]} (JSON, read back), so a reader sees what the function was evaluated at."""
    ledger = tmp_path / "lab.gradcheck.jsonl"
    a, b = torch.zeros(0, 3, dtype=torch.float64), torch.ones(3, 2, dtype=torch.float64)
    result = check(
        lambda a, b: (a @ b).sum(), {"a": torch.zeros(0, 3), "b": torch.zeros(3, 2)}, a=a, b=b, ledger=ledger
    )
    assert result.passed, result.summary()
    assert result.summary() == f"{result.record['id']}: passed"
    (expectation,) = [e for e in check_entries(Ledger(ledger)) if e["kind"] == "expectation"]
    assert '"a": {"shape": [0, 3]}' in json.dumps(expectation)


def test_an_empty_array_written_without_a_zero_size_is_refused_in_one_line():
    """Given an input written {"shape": [2, 3]} (that is not empty), when the record is checked, then it
    is refused in one line naming the input and the form."""
    with pytest.raises(SpecError) as caught:
        check(lambda x: x.sum(), 1.0, x={"shape": [2, 3]}, ledger=False)
    assert caught.value.message == (
        'inputs.x: an empty array is written {"shape": [...]} with at most 8 sizes, one of them 0'
    )
    assert caught.value.localized("es") == (
        'inputs.x: un array vacío se escribe {"shape": [...]} con como mucho 8 tamaños, uno de ellos 0'
    )


def test_an_expression_with_an_empty_input_is_refused_in_one_line():
    """Given the expression x*x with x written as an empty array, when it is checked, then it is refused in
    one line (English and Spanish) naming the input: an expression has no held arguments to leave it in."""
    with pytest.raises(SpecError) as caught:
        check("x*x", "2*x", x={"shape": [0]}, ledger=False)
    assert caught.value.message == (
        "input 'x' has no elements: an expression needs values to differentiate "
        "(a Python callable is checked on its other inputs)"
    )
    assert caught.value.localized("es").startswith("la entrada 'x' no tiene elementos")
    assert caught.value.field == "inputs.x"
