"""Stored values as a grader reads them in a CSV cell: the dtype and shape, the summary, and the blob's
hash, where the tensor itself lies in the blob store beside the ledger
(core/check/record/stored_values.py). The JSON export keeps stored values as written, so its hashes
can be recomputed, and says where the store is.
"""

from __future__ import annotations

from ..check.record.stored_values import is_stored_value

#: Hex digits of a blob's SHA-256 shown beside its summary.
SHA_SHOWN = 12


#: Hex digits of the blob's hash a cell shows: enough to find the file, short enough to read.


def stored_text(value: dict) -> str:
    """`float64[1000,100] min -3.1 max 2.9 mean 0.01 norm 99.2 nonfinite 0 sha256 7ec2e7e8a159...`."""
    stored, summary = value["stored"], value.get("summary") or {}
    shape = ",".join(str(n) for n in stored.get("shape") or [])
    parts = [f"{stored.get('dtype')}[{shape}]"]
    for key in ("min", "max", "mean", "norm", "nonfinite"):
        if key in summary:
            number = summary[key]
            parts.append(f"{key} {number:.6g}" if isinstance(number, float) else f"{key} {number}")
    parts.append(f"sha256 {str(stored.get('sha256'))[:SHA_SHOWN]}...")
    return " ".join(parts)


def with_stored_as_text(value):
    """A copy of `value` with every stored value in it replaced by its `stored_text`; anything else as is."""
    if is_stored_value(value):
        return stored_text(value)
    if isinstance(value, dict):
        return {key: with_stored_as_text(item) for key, item in value.items()}
    if isinstance(value, list) and value and not set(map(type, value)) <= {int, float}:
        return [with_stored_as_text(item) for item in value]
    return value
