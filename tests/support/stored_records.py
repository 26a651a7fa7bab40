"""Records with stored values, as a check of more than 256 elements per value writes them.

`stored_record` runs a real check and turns every value above `INLINE_ELEMENTS` into its
stored form with the core's own `to_stored` (the blob's bytes wait in the pending cache);
`ledger_with_stored_check` appends the expectation and the observation beside a notebook and
writes the blobs into the store, so a test reads a ledger exactly as one on disk.
"""

from __future__ import annotations

from pathlib import Path

import torch

from jupyterlab_gradcheck.core.check.engine import run_check
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.values.blobs import store_dir_for, write_blobs
from jupyterlab_gradcheck.core.values.form import INLINE_ELEMENTS, is_stored_value
from jupyterlab_gradcheck.core.values.tensors import to_stored


def big_check(elements: int, check_id: str = "big_sin") -> dict:
    """sin(x) over `elements` points in [-1, 1], its derivative written as cos(x)."""
    x = torch.linspace(-1.0, 1.0, elements, dtype=torch.float64).tolist()
    return {"id": check_id, "function": "sum(sin(x))", "x": x, "analytical_gradient": "cos(x)"}


def as_stored(value):
    """`value` with every nested list of more than INLINE_ELEMENTS numbers in its stored form."""
    if isinstance(value, dict):
        if is_stored_value(value):
            return value
        return {key: as_stored(item) for key, item in value.items()}
    if isinstance(value, list):
        try:
            tensor = torch.tensor(value, dtype=torch.float64)
        except (TypeError, ValueError):
            return [as_stored(item) for item in value]
        return to_stored(tensor) if tensor.numel() > INLINE_ELEMENTS else value
    return value


def ledger_with_stored_check(notebook: Path, spec: dict) -> tuple[Ledger, dict]:
    """The ledger beside `notebook` with `spec`'s expectation and observation, values stored;
    returns the ledger and the stored observation record."""
    record = as_stored(run_check(spec))
    expectation = as_stored(spec)
    ledger = Ledger.for_notebook(notebook, bind=False)
    store = store_dir_for(ledger.path)
    write_blobs(store, expectation)
    write_blobs(store, record)
    seq = ledger.record_expectation(expectation)["seq"]
    ledger.record_observation(record, seq)
    return ledger, record
