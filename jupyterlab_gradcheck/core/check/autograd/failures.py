"""The failures a record lists: a failed comparison row's (`failure`), and one no row carries (`event_failure`).

Both have the same fields, so that every reader of a record (the summary, the report, the benchmark) reads
any failure the same way: comparison, input, index, the two sides, the errors and tolerances, diagnosis,
reason.
"""

from __future__ import annotations


def failure(row: dict, diagnosis: str, reason: str) -> dict:
    """The failure a failed comparison row becomes: its diagnosis, the reason in words, and the worst element,
    naming its output where the row does (a function of several outputs)."""
    worst = row["worst"]
    return {
        "comparison": row["name"],
        "input": row["input"],
        "index": worst["index"],
        "left_label": row["left"],
        "right_label": row["right"],
        "left": worst["left"],
        "right": worst["right"],
        "abs_err": worst["abs_err"],
        "rel_err": worst["rel_err"],
        "rtol": row["rtol"],
        "atol": row["atol"],
        "diagnosis": diagnosis,
        "reason": reason,
        **({"output": row["output"]} if "output" in row else {}),
    }


def event_failure(comparison: str, reason, *, diagnosis: str = "probable_bug", input_name=None, **extra) -> dict:
    """A failure that no comparison row carries (a crash, a verdict of PyTorch's tools): the fields of a row's
    failure, with no element, values or tolerances."""
    return {
        "comparison": comparison,
        "input": input_name,
        "index": None,
        "left_label": comparison,
        "right_label": "",
        "left": None,
        "right": None,
        "abs_err": None,
        "rel_err": None,
        "rtol": None,
        "atol": None,
        "diagnosis": diagnosis,
        "reason": reason,
        **extra,
    }
