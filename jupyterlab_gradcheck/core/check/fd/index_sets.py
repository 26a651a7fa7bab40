"""The index sets a learned sparsity pattern is made of, and the aten operations' families.

Each tensor derived from input x carries, for every element, the flat indices of x it depends on:
an int64 tensor of the tensor's shape plus one trailing dimension of width K, padded with -1, each
set in descending order with the padding last (column_colouring.py relies on it). The tracer
(sparsity_tracer.py) combines them operation by operation with the set operations here.
"""

from __future__ import annotations

import torch

#: Operations that only move (or copy) values: the rule runs them on the index tensors.
ROUTING = frozenset(
    {
        "view",
        "_unsafe_view",
        "reshape",
        "slice",
        "select",
        "permute",
        "transpose",
        "t",
        "expand",
        "squeeze",
        "unsqueeze",
        "flip",
        "narrow",
        "unfold",
        "index_select",
        "index",
        "gather",
        "cat",
        "stack",
        "roll",
        "repeat",
        "diagonal",
        "movedim",
        "view_as",
        "expand_as",
        "_reshape_alias",
        "numpy_T",
        "mT",
    }
)
#: Routing operations applied to a single input's index sets themselves: reshapes, and cuts along argument 1's dim.
DIRECT = {
    "view": "reshape",
    "_unsafe_view": "reshape",
    "reshape": "reshape",
    "_reshape_alias": "reshape",
    "slice": "dim",
    "select": "dim",
    "narrow": "dim",
}
#: Operations that keep every element where it is (dtype conversions, copies).
IDENTITY = frozenset({"clone", "contiguous", "alias", "detach", "_to_copy", "lift_fresh", "lift_fresh_copy"})
#: Reductions along `dim` (all dimensions when none is given).
REDUCING = frozenset({"sum", "mean", "amax", "amin", "prod", "logsumexp", "linalg_vector_norm", "norm", "var", "std"})
#: Operations whose element depends on the whole slice along one dimension (argument 1).
ALONG_DIM = frozenset({"_softmax", "_log_softmax", "softmax", "log_softmax", "cumsum", "cumprod", "logcumsumexp"})
MATMUL = frozenset({"mm", "mv", "dot", "addmm", "bmm", "addmv", "vdot"})
#: Full reductions that may end a scalar loss; what may follow them without changing its form.
FINAL = frozenset({"sum", "mean"})
#: Operations that scale, and that shift, a final reduction's result by a constant.
SCALE = frozenset({"mul", "div", "neg"})
SHIFT = frozenset({"add", "sub"})
#: The index set of a full reduction's result: every element of x (its sets are never built).
DENSE = "dense"
#: Largest index-set tensor (elements) the mode builds; beyond it the pattern is called dense.
MAX_DEPENDENCY_ELEMENTS = 1 << 24


class Unlearnable(Exception):
    """The pattern cannot be learned from this evaluation; the message says why."""


def dedupe(dep):
    """Index sets with duplicates removed, in descending order with the -1 padding last, K trimmed
    to the widest set. Every rule's result keeps that order (column_colouring.py relies on it)."""
    if dep.shape[-1] <= 1:
        return dep
    if dep.shape[-1] == 2:  # the common case of two single sets (a product of two slices): no sort
        first, second = dep[..., 0], dep[..., 1]
        if bool(((first > second) & (second >= 0)).all()):  # already distinct and in order (x[1:] * x[:-1])
            return dep
        # elementwise on the two columns: an int64 amin along a last dimension of 2 costs ~50x more
        high, low = torch.maximum(first, second), torch.minimum(first, second)
        pair = torch.stack([high, torch.where(low == high, -1, low)], dim=-1)
        return pair if bool((pair[..., 1] >= 0).any()) else pair[..., :1]
    dep = torch.sort(dep, dim=-1, descending=True).values
    repeated = torch.zeros_like(dep, dtype=torch.bool)
    repeated[..., 1:] = dep[..., 1:] == dep[..., :-1]
    if bool(repeated.any()):  # else already distinct and in order (a reduction over distinct elements' sets)
        dep = torch.sort(torch.where(repeated, -1, dep), dim=-1, descending=True).values
    width = int((dep >= 0).sum(-1).max()) if dep.numel() else 0
    return dep[..., : max(width, 1)]


def union(deps: list, shape):
    """The union of index sets broadcast to `shape` (each dep: its tensor's shape + (K,))."""
    parts = [d.broadcast_to(*shape, d.shape[-1]) if tuple(d.shape[:-1]) != tuple(shape) else d for d in deps]
    if len(parts) == 1:
        return parts[0]
    return dedupe(torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0])


def reduced(dep, dims, keepdim: bool, shape):
    """Union of each set over `dims` (all when empty), giving a tensor of `shape` (+ K)."""
    ndim = dep.dim() - 1
    dims = sorted({d % ndim for d in dims}) if dims else list(range(ndim))
    kept = [d for d in range(ndim) if d not in dims]
    moved = dep.permute(*kept, *dims, ndim)
    merged = moved.reshape(*[dep.shape[d] for d in kept], -1)
    if keepdim:
        for d in dims:
            merged = merged.unsqueeze(d)
    if tuple(merged.shape[:-1]) != tuple(shape):
        raise Unlearnable("a reduction's result has an unexpected shape")
    return dedupe(merged)
