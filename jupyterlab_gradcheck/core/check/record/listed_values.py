"""A long list written in a record, kept as a stored value: the ledger line stays small whatever the surface.

A tensor from Python becomes a stored value where torch runs (core/check/compare/stored_tensors.py). A record
written as JSON (the CLI's spec file, a REST body, the panel's form) brings its values as nested lists instead;
one of more than INLINE_ELEMENTS numbers is packed here, torch-free, as the float64 it was parsed to (exact for
every JSON number), named by its SHA-256 and put in the pending cache, so the expectation and observation lines
hold its hash and summary, and the store its bytes, exactly as for a tensor. The check's own dtype applies when
the value becomes a tensor, as it did for the list.
"""

from __future__ import annotations

import math
import sys
from array import array

from .stored_values import HEAD_ELEMENTS, INLINE_ELEMENTS, PENDING, safetensors_blob, sha256_hex


def stored_from_list(value):
    """`value` as a stored value when it is a rectangular nested list of more than INLINE_ELEMENTS real
    numbers (validated before: record_values.shape_of); anything else, unchanged."""
    if not isinstance(value, list):
        return value
    shape, flat = _flattened(value)
    if shape is None or len(flat) <= INLINE_ELEMENTS:
        return value
    data = array("d", flat)
    if sys.byteorder != "little":
        data.byteswap()
    blob = safetensors_blob("F64", shape, data.tobytes())
    sha = sha256_hex(blob)
    PENDING.put(sha, blob)
    return {
        "stored": {"sha256": sha, "shape": shape, "dtype": "float64", "bytes": len(blob)},
        "summary": _summary(flat),
    }


def stored_mapping(value):
    """`stored_from_list` of a value, or of each entry of a mapping from input names to values."""
    if isinstance(value, dict) and value and all(isinstance(key, str) for key in value) and "stored" not in value:
        return {key: stored_from_list(item) for key, item in value.items()}
    return stored_from_list(value)


def _flattened(value: list) -> tuple[list[int] | None, list]:
    """(shape, the numbers in row-major order), or (None, []) for anything but a rectangular list of reals."""
    shape, level = [], value
    while isinstance(level, list):
        shape.append(len(level))
        if not level:
            return None, []
        level = level[0]
    flat = value
    for _ in range(len(shape) - 1):
        flat = [item for row in flat for item in row]
    if not all(type(item) in (int, float) for item in flat) or len(flat) != math.prod(shape):
        return None, []
    return shape, [float(item) for item in flat]


def _summary(flat: list[float]) -> dict:
    """The summary a stored value carries (min, max, mean, norm, nonfinite, head); JSON numbers are finite."""
    return {
        "min": min(flat),
        "max": max(flat),
        "mean": math.fsum(flat) / len(flat),
        "norm": math.sqrt(math.fsum(item * item for item in flat)),
        "nonfinite": 0,
        "head": flat[:HEAD_ELEMENTS],
    }
