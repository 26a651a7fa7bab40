"""Several comparisons at once: same-shaped torch-path comparisons computed as the rows of one tensor.

A dozen small torch operations cost the same for one row as for five, and a check compares each
input several ways (autograd's passes, finite differences, the expectation). `compare_rows` stacks
the real same-shaped requests that take the torch path; each row goes through `compare_tensors`'
operations elementwise and its reductions run along the row, so every record is bit-identical to
its own `compare` call.
"""

from __future__ import annotations

import torch

from .comparison import Operand, compare
from .comparison_record import comparison_record, finite_or_none
from .plain_floats import plain_number

#: Largest element count whose torch-path comparisons of one shape `compare_rows` stacks into one computation.
STACKED_ELEMENTS = 4096


def compare_rows(requests: list[dict]) -> list[dict]:
    """`compare(**request)` for each request, the same records in the same order.

    The requests that take the torch path with real tensors of one shape, up to STACKED_ELEMENTS
    elements, are stacked row by row and computed by one set of torch operations (a dozen small
    operations cost the same for one row as for five). Each row goes through the operations of
    `compare_tensors`, elementwise, and its reductions run along the row, so each record is
    bit-identical to that of its own `compare` call; any other request is handed to `compare`.
    """
    requests = [
        {**request, "left": operand(request["left"]), "right": operand(request["right"])} for request in requests
    ]
    results: list = [None] * len(requests)
    groups: dict = {}
    for i, request in enumerate(requests):
        if stackable(request):
            groups.setdefault(tuple(request["right"].shape), []).append(i)
    for members in groups.values():
        if len(members) > 1:
            for i, record in zip(members, stacked([requests[i] for i in members])):
                results[i] = record
    return [record if record is not None else compare(**request) for record, request in zip(results, requests)]


def operand(value) -> Operand:
    """The value as an `Operand` (read once), unless it is one."""
    return value if isinstance(value, Operand) else Operand(value)


def stackable(request: dict) -> bool:
    """Whether `compare` takes the torch path with real tensors of one shape and plain tolerances."""
    left, right, bound = request["left"], request["right"], request.get("bound")
    if left.values is not None and right.values is not None:  # the plain path (or a shape mismatch)
        return False
    tensors = [left.tensor, right.tensor] + ([] if bound is None else [bound])
    return (
        left.shape == right.shape
        and 0 < right.tensor.numel() <= STACKED_ELEMENTS
        and all(t.is_floating_point() for t in tensors)
        and (bound is None or bound.numel() == right.tensor.numel())
        and plain_number(request["rtol"])
        and plain_number(request["atol"])
    )


def stacked(requests: list[dict]) -> list[dict]:
    """`compare_tensors` of each request, its tensors stacked as the rows of one (rows, n) tensor."""

    def rows(tensors):
        return torch.stack([t.detach().to("cpu", torch.float64).reshape(-1) for t in tensors])

    left64, right64 = rows([r["left"].tensor for r in requests]), rows([r["right"].tensor for r in requests])
    bounded = [r.get("bound") is not None for r in requests]
    error = (left64 - right64).abs()
    rtol = torch.tensor([[float(r["rtol"])] for r in requests], dtype=torch.float64)
    atol = torch.tensor([[float(r["atol"])] for r in requests], dtype=torch.float64)
    extra = rows(
        [r["bound"] if b else torch.zeros(right64.shape[1], dtype=torch.float64) for r, b in zip(requests, bounded)]
    )
    bound = atol + rtol * right64.abs() + extra  # + 0 where there is no bound, as compare_tensors adds
    nan = torch.isnan(error)
    excess = torch.where(nan, torch.full_like(error, float("inf")), error - bound)
    passed = (excess <= 0).all(dim=1)
    worst = torch.where(passed, torch.argmax(error.nan_to_num(nan=float("inf")), dim=1), torch.argmax(excess, dim=1))
    relative = torch.where(right64 == 0, torch.full_like(error, float("inf")), error / right64.abs())
    relative = torch.where(error == 0, torch.zeros_like(relative), relative)
    at = worst.unsqueeze(1)
    columns = [
        passed.tolist(),
        error.max(dim=1).values.tolist(),
        relative.max(dim=1).values.tolist(),
        worst.tolist(),
    ] + [t.gather(1, at).reshape(-1).tolist() for t in (left64, right64, error, relative)]
    extra_max, extra_at = extra.max(dim=1).values.tolist(), extra.gather(1, at).reshape(-1).tolist()
    records = []
    for k, (r, (ok, max_abs, max_rel, flat, left, right, abs_err, rel_err)) in enumerate(zip(requests, zip(*columns))):
        record = comparison_record(
            r["name"],
            r["input_name"],
            r["left_label"],
            r["right_label"],
            r["rtol"],
            r["atol"],
            ok,
            max_abs,
            max_rel,
            r["right"].shape,
            flat,
            left,
            right,
            abs_err,
            rel_err,
        )
        if bounded[k]:
            record["error_bound"] = {"max": finite_or_none(extra_max[k]), "at_worst": finite_or_none(extra_at[k])}
        records.append(record)
    return records
