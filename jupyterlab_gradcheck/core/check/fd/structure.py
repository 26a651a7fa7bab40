"""The index sets a learned sparsity pattern is made of, and the aten operations' families.

Each tensor derived from input x carries, for every element, the flat indices of x it depends on:
an int64 tensor of the tensor's shape plus one trailing dimension of width K, padded with -1, each
set in descending order with the padding last (structure.py relies on it). The tracer
(structure.py) combines them operation by operation with the set operations here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..record import spec as defaults
from .steps import equal_evaluations_count, moved_outputs

# -------------------- index sets

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
    to the widest set. Every rule's result keeps that order (structure.py relies on it)."""
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


# -------------------- sparsity tracer
# The tracing mode that learns a Jacobian's sparsity pattern: index sets beside every tensor derived from x.
#
# One evaluation of the function runs under it. Each aten operation's result gets its index sets from
# its inputs' by the operation's family (structure.py): pointwise, routing, reducing, along one
# dimension, a matrix product; any other operation, an in-place update or indices computed from x
# raise Unlearnable. It also follows the last full sum or mean, and constant scales and shifts of it,
# so that a scalar loss's body (the vector entering that reduction) can be coloured instead.


class Tracer(TorchDispatchMode):
    """Carries index sets beside every tensor derived from x; refuses what it has no rule for."""

    @classmethod
    def _should_skip_dynamo(cls):
        return False

    def __init__(self, x):
        super().__init__()
        self.numel = x.numel()
        self.deps = {id(x): (x, torch.arange(self.numel, device=x.device).reshape(*x.shape, 1))}
        self.operations = []
        #: id of the value the last full reduction produced (then scaled by constants) -> (position, factor),
        self.final, self.bodies = {}, {}  # and each such reduction's position -> the vector it reduced

    def dep(self, value):
        entry = self.deps.get(id(value)) if isinstance(value, torch.Tensor) else None
        return entry[1] if entry is not None and entry[0] is value else None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = func._overloadpacket.__name__
        position = len(self.operations)
        self.operations.append(name)
        flat = list(args) + [v for a in args if isinstance(a, (list, tuple)) for v in a] + list(kwargs.values())
        tainted = [v for v in flat if self.dep(v) is not None]
        if not tainted:
            return out
        if name.endswith("_") or "out" in kwargs or not isinstance(out, torch.Tensor):
            raise Unlearnable(f"aten.{name} updates a tensor in place or returns several")
        if name in ROUTING and any(not (v.is_floating_point() or v.is_complex()) for v in tainted):
            raise Unlearnable(f"aten.{name} uses indices or masks computed from the input")
        if any(self.dep(v) is DENSE for v in tainted) or (name in REDUCING and out.numel() == 1 and self.numel > 1):
            dep = DENSE  # depends on every element: kept as a mark, its sets never built
        else:
            dep = self._rule(func, name, args, kwargs, out)
        if dep is not DENSE and (dep.numel() > MAX_DEPENDENCY_ELEMENTS or dep.shape[-1] > max(1, self.numel // 2)):
            raise Unlearnable(
                f"after aten.{name} an output element depends on {dep.shape[-1]} of the "
                f"{self.numel} input elements: the Jacobian is (nearly) dense"
            )
        self.deps[id(out)] = (out, dep)
        self._follow_final(name, position, args, kwargs, out)
        return out

    def _follow_final(self, name, position, args, kwargs, out):
        """Keep track of the last full sum/mean and of constant scales and shifts of it."""
        source = [a for a in args if isinstance(a, torch.Tensor) and id(a) in self.final and self.final[id(a)][2] is a]
        if (
            name in FINAL
            and out.numel() == 1
            and not source
            and self.dep(args[0]) is not None
            and args[0].numel() > 1
            and set(kwargs) <= {"dtype"}
            and (len(args) == 1 or not args[1])
        ):
            factor = 1.0 / args[0].numel() if name == "mean" else 1.0
            self.final[id(out)] = (position, factor, out)
            self.bodies[position] = args[0]
            return
        if len(source) != 1 or args[0] is not source[0] or out.numel() != 1:
            return
        start, factor, _ = self.final[id(source[0])]
        others = list(args[1:])
        if any(isinstance(o, torch.Tensor) and (o.numel() != 1 or self.dep(o) is not None) for o in others):
            return
        constants = [float(o.item()) if isinstance(o, torch.Tensor) else o for o in others]
        if any(not isinstance(c, (int, float)) for c in constants):
            return
        if name in SCALE and not kwargs and len(constants) == (name != "neg"):
            factor = factor * constants[0] if name == "mul" else (factor / constants[0] if name == "div" else -factor)
        elif not ((name in SHIFT and kwargs.get("alpha", 1) == 1 and set(kwargs) <= {"alpha"}) or name in IDENTITY):
            return
        self.final[id(out)] = (start, factor, out)

    def _rule(self, func, name, args, kwargs, out):
        if name in IDENTITY:
            return self.dep(args[0])
        if torch.Tag.pointwise in func.tags:
            return union(
                [self.dep(v) for v in list(args) + list(kwargs.values()) if self.dep(v) is not None], out.shape
            )
        if name in ROUTING:
            return self._routed(func, args, kwargs, out)
        if name in REDUCING:
            dims = args[1] if len(args) > 1 else kwargs.get("dim")
            dims = [] if dims is None else ([dims] if isinstance(dims, int) else list(dims))
            keepdim = args[2] if len(args) > 2 and isinstance(args[2], bool) else kwargs.get("keepdim", False)
            if name in ("var", "std", "norm", "linalg_vector_norm"):
                keepdim = next((a for a in args[2:] if isinstance(a, bool)), kwargs.get("keepdim", False))
                dims = kwargs.get(
                    "dim",
                    next(
                        (
                            list(a) if isinstance(a, (list, tuple)) else [a]
                            for a in args[1:]
                            if isinstance(a, (list, tuple))
                        ),
                        dims,
                    ),
                )
                if name in ("norm", "linalg_vector_norm"):
                    dims = kwargs.get("dim", args[2] if len(args) > 2 and isinstance(args[2], (list, tuple)) else dims)
                    dims = [] if dims is None else list(dims)
            return reduced(self.dep(args[0]), dims, bool(keepdim), out.shape)
        if name in ALONG_DIM:
            dep = self.dep(args[0])
            dim = args[1] % max(out.dim(), 1) if out.dim() else 0
            whole = reduced(dep, [dim], True, [1 if d == dim else s for d, s in enumerate(out.shape)])
            return whole.expand(*out.shape, whole.shape[-1])
        if name in MATMUL:
            return self._product(name, args, out)
        raise Unlearnable(f"the sparsity of aten.{name} is not known")

    def _routed(self, func, args, kwargs, out):
        """The same value-moving operation applied to each element's position, then to the index sets.

        Every floating-point tensor argument is replaced by the positions of its elements in one
        table of all their index sets (an index tensor not derived from x is kept as it is); the
        operation's result then holds, for each output element, the row of the table it came from.
        """
        values = [
            v
            for v in list(args) + [w for a in args if isinstance(a, (list, tuple)) for w in a]
            if isinstance(v, torch.Tensor) and (v.is_floating_point() or v.is_complex())
        ]
        name, dep = func._overloadpacket.__name__, self.dep(args[0])
        if len(values) == 1 and dep is not None and not kwargs and name in DIRECT and out.dtype == args[0].dtype:
            moved = (
                dep.reshape(*out.shape, dep.shape[-1])
                if DIRECT[name] == "reshape"
                else func(dep, (args[1] if len(args) > 1 else 0) % args[0].dim(), *args[2:])
            )
            return moved if bool((moved[..., -1] >= 0).any()) else dedupe(moved)
        width = max(self.dep(v).shape[-1] for v in values if self.dep(v) is not None)
        table, offsets, start = [], {}, 0
        for value in values:
            if id(value) in offsets:
                continue
            dep = self.dep(value)
            if dep is None:
                dep = torch.full((*value.shape, width), -1, dtype=torch.long, device=value.device)
            elif dep.shape[-1] < width:  # padded to the widest
                dep = torch.nn.functional.pad(dep, (0, width - dep.shape[-1]), value=-1)
            table.append(dep.reshape(-1, width))
            positions = torch.arange(start, start + value.numel(), device=value.device)
            offsets[id(value)] = positions.reshape(value.shape)
            start += value.numel()

        def position(value):
            return offsets[id(value)] if isinstance(value, torch.Tensor) and id(value) in offsets else value

        rebuilt = [[position(w) for w in a] if isinstance(a, (list, tuple)) else position(a) for a in args]
        try:
            route = func(*rebuilt, **kwargs)
        except Exception as error:
            raise Unlearnable(f"aten.{func._overloadpacket.__name__} could not be applied to positions") from error
        if not isinstance(route, torch.Tensor) or tuple(route.shape) != tuple(out.shape):
            raise Unlearnable(f"aten.{func._overloadpacket.__name__} moved the positions unexpectedly")
        moved = (table[0] if len(table) == 1 else torch.cat(table))[route.reshape(-1)].reshape(*out.shape, width)
        # one source (a slice, a view) moves its sets unchanged, already in order: no sort unless all were narrower
        return moved if len(table) == 1 and bool((moved[..., -1] >= 0).any()) else dedupe(moved)

    def _product(self, name, args, out):
        """Union over the contracted dimension of a matrix product."""
        operands = list(args[1:3]) if name in ("addmm", "addmv") else list(args[:2])
        if name == "mv" or name == "addmv":
            operands = [operands[0], operands[1].unsqueeze(-1) if self.dep(operands[1]) is None else operands[1]]
        deps = []
        for side, value in enumerate(operands):
            dep = self.dep(value)
            if dep is None:
                continue
            if name in ("dot", "vdot"):
                deps.append(dep.reshape(1, -1))
            elif name in ("mv", "addmv"):
                deps.append(dep.reshape(1, -1).expand(out.shape[0], -1) if side == 1 else dep.reshape(dep.shape[0], -1))
            elif name == "bmm":
                deps.append(
                    dep.reshape(dep.shape[0], dep.shape[1], 1, -1).expand(-1, -1, out.shape[2], -1)
                    if side == 0
                    else dep.permute(0, 2, 1, 3)
                    .reshape(dep.shape[0], 1, dep.shape[2], -1)
                    .expand(-1, out.shape[1], -1, -1)
                )
            else:
                deps.append(
                    dep.reshape(dep.shape[0], 1, -1).expand(-1, out.shape[1], -1)
                    if side == 0
                    else dep.permute(1, 0, 2).reshape(1, dep.shape[1], -1).expand(out.shape[0], -1, -1)
                )
        if name in ("addmm", "addmv") and self.dep(args[0]) is not None:
            deps.append(self.dep(args[0]).broadcast_to(*out.shape, self.dep(args[0]).shape[-1]))
        deps = [d.reshape(*out.shape, -1) for d in deps]
        return dedupe(torch.cat(deps, dim=-1) if len(deps) > 1 else deps[0])


# -------------------- sparsity
# The sparsity pattern of a function's Jacobian, learned from the aten operations it runs.
#
# One evaluation of the real function runs under a dispatch mode that carries, next to every
# tensor derived from input x, a tensor of the flat indices of x each of its elements depends on
# (shape: the tensor's shape plus one trailing dimension of width K, padded with -1). Each
# operation's rule builds its output's index sets from its inputs':
#
# - pointwise operations (aten's `pointwise` tag): the union of the broadcast inputs' sets;
# - operations that only move values (views, slices, copies, cat, index_select, gather...): the same
#   operation applied to the positions of the sets in one table (a reshape or cut of one tensor: to its sets);
# - reductions along dimensions (sum, mean, amax, logsumexp...) and normalisations along one
#   (softmax, log_softmax, cumsum): the union over the reduced slice;
# - matrix products (mm, mv, dot, addmm, bmm): the union over the contracted dimension.
#
# Any other operation, an in-place update, or indices computed from x leave the pattern unknown,
# and the caller says so. The pattern comes from the forward operations alone, never from a
# backward: a custom Function whose backward is wrong cannot hide its own error by teaching a
# wrong pattern. It may be a superset of the true one (a product by a zero, a `where` branch not
# taken), which costs colours but never correctness.
#
# For a scalar loss the Jacobian worth colouring is that of the vector entering the last full
# `sum` or `mean` (then scaled or shifted by constants only); `Learned.body_position` names that
# operation, where later evaluations capture the same vector (`body_at`).


@dataclass
class Learned:
    """What one traced evaluation showed about input x."""

    #: int64 (body shape, K): each body element's flat input indices, -1 padded: the pattern's rows, each set
    dependency: object  #: once where the tracer broadcast it over elements (a softmax's row: column_colouring.compact)
    body_kind: str  #: "output" (the function's output) or the final reduction's name
    body_position: int  #: index of the final reduction among the evaluation's operations (-1 for "output")
    factor: float  #: d output / d sum(body) for a reduction (1/N for a mean, times constants)
    operations: tuple  #: every operation's name, in order: later evaluations must repeat them
    body: object  #: the body's values at x (flat)


def learn(function, arguments: dict, name: str) -> Learned:
    """Trace function(**arguments) once and return what it showed about input `name`; Unlearnable if nothing."""
    x = arguments[name]
    tracer = Tracer(x)
    try:
        with torch.no_grad(), tracer:
            out = function(**arguments)
    except Unlearnable:
        raise
    except Exception as error:
        raise Unlearnable(f"tracing the function failed ({type(error).__name__})") from error
    if not isinstance(out, torch.Tensor) or tracer.dep(out) is None:
        raise Unlearnable("the output does not depend on the input through operations that could be traced")
    final = tracer.final.get(id(out))
    if final is not None and final[2] is out:
        position, factor, _ = final
        body = tracer.bodies[position]
        if not (body.is_floating_point() or body.is_complex()):
            raise Unlearnable("the vector entering the final reduction is not floating point")
        if tracer.dep(body) is DENSE:
            raise Unlearnable("the vector entering the final reduction depends on every input element")
        return Learned(
            tracer.dep(body),
            "sum" if tracer.operations[position] == "sum" else "mean",
            position,
            factor,
            tuple(tracer.operations),
            body.detach().reshape(-1).clone(),
        )
    if not (out.is_floating_point() or out.is_complex()):
        raise Unlearnable("the output is not floating point")
    if tracer.dep(out) is DENSE:
        raise Unlearnable(
            "a full reduction's result is not the function's output up to constant scales and "
            "shifts: the Jacobian is dense"
        )
    return Learned(tracer.dep(out), "output", -1, 1.0, tuple(tracer.operations), out.detach().reshape(-1).clone())


class Capture(TorchDispatchMode):
    """A light mode that records operation names and keeps the input of one of them."""

    @classmethod
    def _should_skip_dynamo(cls):
        return False

    def __init__(self, position: int):
        super().__init__()
        self.position, self.operations, self.captured = position, [], None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if len(self.operations) == self.position:
            self.captured = args[0]
        self.operations.append(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def body_at(function, arguments: dict, learned: Learned):
    """The body's values (flat) at these arguments, or None when the operations differ from the learned ones."""
    mode = Capture(learned.body_position)
    with torch.no_grad(), mode:
        out = function(**arguments)
    value = out if learned.body_kind == "output" else mode.captured
    if tuple(mode.operations) != learned.operations or value is None or value.numel() != learned.body.numel():
        return None
    return value.reshape(-1)


def bodies_at(function, arguments, xs, learned: Learned):
    """The body's values at each x stacked along dimension 0, from one `vmap` call; None where that fails.

    `arguments(x)` gives the function's keyword arguments for one x. Under vmap the operations reach the
    capture mode batched along dimension 0 (a loss's body is then the final reduction's input, (B, ...)):
    up to the body they must have the learned names in order, else None (the caller evaluates one by one)."""
    mode = Capture(learned.body_position)
    try:
        with torch.no_grad(), mode:
            out = torch.func.vmap(lambda x: function(**arguments(x)))(xs)
    except Exception:  # a function vmap cannot batch (a custom Function without a vmap rule)
        return None
    # up to the body, the operations must be the learned ones; after a loss's final reduction vmap
    # handles the per-copy scalars its own way (a select and a copy before a constant factor), and
    # those operations do not touch the body
    through = len(learned.operations) if learned.body_kind == "output" else learned.body_position + 1
    if tuple(mode.operations[:through]) != learned.operations[:through] or (
        learned.body_kind == "output" and len(mode.operations) != through
    ):
        return None
    value = out if learned.body_kind == "output" else mode.captured
    count, rows = xs.shape[0], learned.body.numel()
    if value is None or value.dim() == 0 or value.shape[0] != count or value.numel() != count * rows:
        return None
    return value.reshape(count, rows)


# -------------------- column colouring
# Column colouring of a sparse Jacobian: columns that share no row get one colour.
#
# Shifting every column of one colour at once, each output row then moves because of one column
# alone, so one finite difference per colour recovers every element (Curtis, Powell and Reid,
# 1974, as `scipy.optimize` does for sparse finite differences). Two colourings are tried:
#
# - cyclic, column i gets colour i mod c, for the few c from the widest row up: a banded or
#   block-diagonal pattern is coloured this way with the fewest colours possible (the widest
#   row's width), checked on the whole pattern in a few tensor operations;
# - otherwise the greedy colouring of Curtis-Powell-Reid: columns in order, each taking the
#   smallest colour no column sharing a row with it has.

#: Cyclic colour counts tried above the widest row before the greedy colouring.
CYCLIC_TRIES = 8


def valid(pattern, colours) -> bool:
    """Whether no row of `pattern` (int64 rows x K, -1 padded) holds two columns of one colour."""
    if pattern.shape[-1] <= 1:
        return True
    mask = pattern >= 0
    coloured = torch.where(
        mask, colours[pattern.clamp(min=0)], -1 - torch.arange(pattern.shape[-1], device=pattern.device)
    )
    ordered = torch.sort(coloured, dim=-1).values
    return not bool((ordered[:, 1:] == ordered[:, :-1]).any())


def spans(pattern):
    """(highest column, lowest column, number of columns) of each row of a pattern whose rows are in
    descending order with the -1 padding last (as core/check/fd/structure.py keeps them).

    Where every row is full, as in a band's interior or a block, the lowest column is the last one
    and the count the pattern's width, one int for all rows: read in two slices, without a reduction
    along the rows (an int64 one along a short last dimension costs ~50x an elementwise operation)."""
    high, last = pattern[:, 0], pattern[:, -1]
    if bool((last >= 0).all()):
        return high, last, pattern.shape[-1]
    counts = (pattern >= 0).sum(-1)
    low = pattern.gather(1, (counts - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    return high, low, counts


def compact(dependency):
    """(rows, repeat): a body's index sets, shaped (body shape, K), as the pattern's rows, each set given
    once for the `repeat` consecutive rows that share it where the body's trailing dimensions are
    broadcast (stride 0: the tracer expanded one set over them, as a softmax's over its row), else
    (every row, 1). A block-diagonal body's repeated rows are then neither copied nor read again:
    colouring the rows as given colours the full pattern, which holds no other sets."""
    import math

    shape, strides = dependency.shape[:-1], dependency.stride()[:-1]
    cut = len(shape)
    while cut and (strides[cut - 1] == 0 or shape[cut - 1] == 1):
        cut -= 1
    repeat = math.prod(shape[cut:])
    if repeat <= 1 or dependency.numel() == 0:
        return dependency.reshape(-1, dependency.shape[-1]), 1
    return dependency[(slice(None),) * cut + (0,) * (len(shape) - cut)].reshape(-1, dependency.shape[-1]), repeat


def greedy(pattern, columns: int):
    """Curtis-Powell-Reid: each column, in order, takes the smallest colour none of its row-mates has."""
    rows_of = [[] for _ in range(columns)]
    entries = torch.nonzero(pattern >= 0)
    for row, column in zip(entries[:, 0].tolist(), pattern[pattern >= 0].tolist()):
        rows_of[column].append(row)
    members = pattern.tolist()
    colour = [-1] * columns
    for column in range(columns):
        taken = {colour[m] for row in rows_of[column] for m in members[row] if m >= 0}
        c = 0
        while c in taken:
            c += 1
        colour[column] = c
    return torch.tensor(colour, dtype=torch.long, device=pattern.device)


def colour_columns(pattern, columns: int):
    """(colours per column, how they were found) for a pattern of `columns` columns, on the pattern's
    device (a pattern learned on cuda is indexed by these colours there)."""
    index = torch.arange(columns, device=pattern.device)
    if pattern.numel() == 0:
        return index % 1, "cyclic (column i takes colour i mod 1)"
    high, low, counts = spans(pattern)
    full = isinstance(counts, int)
    width = counts if full else int(counts.max())
    # colour i mod c is valid at once when every row spans fewer than c columns, else checked row by row
    spread = high - low if full or bool((counts > 0).all()) else (high - low)[counts > 0]
    widest = int(spread.max()) if spread.numel() else -1
    for count in range(max(width, 1), max(width, 1) + CYCLIC_TRIES):
        if widest < count or valid(pattern, torch.arange(int(high.max()) + 1, device=pattern.device) % count):
            return index % count, f"cyclic (column i takes colour i mod {count})"
    colours = greedy(pattern, columns)
    return colours, "greedy (Curtis-Powell-Reid, columns in order)"


# -------------------- diagonal
# Finite differences of a function whose Jacobian is observed to be diagonal, in a few evaluations.
#
# When every operation that input x flows through is elementwise and keeps x's shape, output
# element i depends on input element i alone. Shifting every element at once, each by its own
# step, then yields all n difference quotients from the few evaluations one element would need,
# instead of 2n evaluations of an n-element function (O(n^2) work). The same holds for a full sum
# or mean of such a body, optionally scaled by constants: d phi / d x_i is the body's derivative
# at element i times the weight, so the quotients come from the body's values, which the
# evaluation captures as they enter the reduction.
#
# The structure is observed, not assumed. Every evaluation of the real function runs under a
# dispatch mode that follows each tensor derived from x through the aten operations actually
# executed, and the shortcut is used only when the evaluation at x and every shifted evaluation
# are such a chain, with the same operations. Anything else (an operation not known to be
# elementwise, a view or broadcast that changes x's shape, an in-place update, a second reduction,
# an output that is not the chain's end) leaves the general path to run instead. It is also the
# more accurate estimate: element i's quotient rounds like |g_i|, not like the whole sum.

#: aten operations (by overload packet) whose every overload maps element i to element i when
#: the result keeps the input's shape; dtype conversions and copies are identities.
ELEMENTWISE = frozenset(
    {
        "abs",
        "acos",
        "acosh",
        "add",
        "asin",
        "asinh",
        "atan",
        "atan2",
        "atanh",
        "clamp",
        "clamp_max",
        "clamp_min",
        "clone",
        "cos",
        "cosh",
        "div",
        "eq",
        "erf",
        "erfc",
        "exp",
        "exp2",
        "expm1",
        "ge",
        "gt",
        "hypot",
        "le",
        "log",
        "log10",
        "log1p",
        "log2",
        "logaddexp",
        "lt",
        "maximum",
        "minimum",
        "mul",
        "ne",
        "neg",
        "pow",
        "reciprocal",
        "relu",
        "rsqrt",
        "rsub",
        "sigmoid",
        "sign",
        "sin",
        "sinh",
        "softplus",
        "sqrt",
        "square",
        "sub",
        "tan",
        "tanh",
        "where",
        "_to_copy",
        "alias",
        "detach",
        "lift_fresh",
        "lift_fresh_copy",
    }
)
#: Full reductions: the chain's body enters one of these and the result has one element.
REDUCTIONS = {"sum": "sum", "mean": "mean"}
#: What may follow the reduction: a constant factor keeps d phi / d x_i a multiple of g'(x_i).
_SCALE = {"mul", "div", "neg"}
_SHIFT = {"add", "sub"}
_IDENTITY = {"clone", "alias", "detach", "_to_copy"}


class _NotDiagonal(Exception):
    """Raised inside the recorder: this evaluation is not an elementwise chain."""


@dataclass
class Trace:
    """What one evaluation showed: the chain's operations, its body values and output weight."""

    kind: str  #: "elementwise" or "elementwise then " + the reduction's name
    operations: tuple
    body: object  #: values whose element i depends on x_i alone (the reduction's input, or the output)
    factor: complex = 1.0 + 0j  #: d output / d sum(body) for a reduction (1/n for a mean, times constants)


@cache
def _mode_class():
    """The recording mode, defined on first use so that importing the core never loads torch."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        """Follows tensors derived from x; refuses anything that is not an elementwise chain."""

        @classmethod
        def _should_skip_dynamo(cls):  # nothing here is compiled: do not load the compiler
            return False

        def __init__(self, x):
            super().__init__()
            self.shape, self.numel = tuple(x.shape), x.numel()
            self.derived = {id(x): ("body", x)}  #: id -> (role, tensor kept alive so ids stay unique)
            self.operations, self.reduced, self.body, self.reduction = [], None, None, None
            self.factor = complex(1.0)

        def role(self, value):
            entry = self.derived.get(id(value)) if isinstance(value, torch.Tensor) else None
            return entry[0] if entry and entry[1] is value else None

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            flat = list(args) + [v for item in args if isinstance(item, (list, tuple)) for v in item]
            flat += list(kwargs.values())
            roles = [self.role(value) for value in flat]
            if not any(roles):
                return out
            name = func._overloadpacket.__name__
            if (
                name.endswith("_")
                or not isinstance(out, torch.Tensor)
                or any(isinstance(item, (list, tuple)) and any(self.role(v) for v in item) for item in args)
            ):
                raise _NotDiagonal(name)
            self.operations.append(name)
            if "reduced" in roles:
                self._after_reduction(name, args, kwargs, roles, out)
            elif name in ELEMENTWISE and tuple(out.shape) == self.shape:
                self.derived[id(out)] = ("body", out)
            elif (
                name in REDUCTIONS
                and self.reduced is None
                and out.numel() == 1
                and roles.count("body") == 1
                and roles[0] == "body"
                and tuple(args[0].shape) == self.shape
                and (args[0].is_floating_point() or args[0].is_complex())
            ):
                self.reduced, self.body, self.reduction = out, args[0], name
                self.factor = complex(1.0 / self.numel if name == "mean" else 1.0)
                self.derived[id(out)] = ("reduced", out)
            else:
                raise _NotDiagonal(name)
            return out

        def _after_reduction(self, name, args, kwargs, roles, out):
            """Only constant scales and shifts of the reduced value, which keep its derivative's form."""
            if out.numel() != 1 or roles.count("reduced") != 1 or "body" in roles or args[0] is not self.reduced:
                raise _NotDiagonal(name)
            others = [a for a in args[1:] if isinstance(a, (int, float, complex, torch.Tensor))]
            constants = [complex(a.item()) if isinstance(a, torch.Tensor) else complex(a) for a in others]
            if any(isinstance(a, torch.Tensor) and a.numel() != 1 for a in others):
                raise _NotDiagonal(name)
            if name in _SCALE and not kwargs and len(constants) == (name != "neg"):
                if name == "mul":
                    self.factor *= constants[0]
                elif name == "div":
                    self.factor /= constants[0]
                else:
                    self.factor = -self.factor
            elif not (
                (name in _SHIFT and set(kwargs) <= {"alpha"} and kwargs.get("alpha", 1) == 1) or name in _IDENTITY
            ):
                raise _NotDiagonal(name)
            self.reduced = out
            self.derived[id(out)] = ("reduced", out)

    return Recorder


def record(function, arguments: dict, name: str):
    """Evaluate function(**arguments) once; the Trace if it is an elementwise chain in `name`, else None."""
    x = arguments[name]
    recorder = _mode_class()(x)
    try:
        with torch.no_grad(), recorder:
            out = function(**arguments)
    except Exception:  # not a chain, or the function fails here: the general path runs it and reports
        return None
    if not isinstance(out, torch.Tensor) or not (out.is_floating_point() or out.is_complex()):
        return None
    if out is x or recorder.role(out) == "body":
        if recorder.reduced is not None:
            return None  # a reduction whose value was dropped: the output is the body itself
        return Trace("elementwise", tuple(recorder.operations), out)
    if recorder.role(out) == "reduced" and out is recorder.reduced:
        return Trace(
            f"elementwise then {recorder.reduction}", tuple(recorder.operations), recorder.body, recorder.factor
        )
    return None


def estimates(probe, scheme: str, h, *, exact: bool = False):
    """The scheme's d phi / d x_i for every flat element i, or None where x's chain is not diagonal.

    `h` holds each element's absolute step; with `exact` each quotient divides by the shift the
    arithmetic really took, (x_i + s) - x_i. The evaluation at x establishes the chain; every
    shifted evaluation must repeat it exactly (same operations, same constant factor), else the
    estimate is abandoned and None tells the caller to take the general path. When
    `probe.track_rounding` is set, `probe.rounding` gets each element's rounding bound,
    eps |w_i| (|g_i(x+)| + |g_i(x-)|) / width (core/check/fd/steps.py).
    """
    x = probe.values[probe.name]
    base = record(probe.function, probe.arguments(x), probe.name)
    if base is None or base.factor.imag != 0:
        return None
    evaluations = [base]

    along_imaginary = getattr(probe, "imaginary_shift", False)  # a complex input's imaginary part

    def body(multiple: float, imaginary: bool = False):
        shift = (h * multiple).reshape(x.shape)
        imaginary = imaginary or along_imaginary
        point = x.to(torch.promote_types(x.dtype, torch.complex64)) + 1j * shift if imaginary else x + shift
        taken = shift
        if exact and along_imaginary:  # the part shifted: the imaginary part's step really taken
            moved = (point - x).imag
            taken = torch.where(moved == 0, shift, moved)
        elif (
            exact and not imaginary
        ):  # the shift really taken; a vanished one keeps its nominal size (0 / 2h, not 0 / 0)
            taken = torch.where(point == x, shift, (point - x).real if x.is_complex() else point - x)
        trace = record(probe.function, probe.arguments(point), probe.name)
        if trace is None or (trace.kind, trace.operations, trace.factor) != (base.kind, base.operations, base.factor):
            raise _NotDiagonal(f"the chain changed at the point shifted by {multiple} h")
        evaluations.append(trace)
        return trace.body.reshape(-1), taken.reshape(-1)

    v = probe.v.reshape(-1)
    weight = v if base.kind == "elementwise" else v[0] * base.factor.real
    track = probe.track_rounding
    precision = probe.values[probe.name].dtype  # error_bound.moved_outputs
    try:
        if scheme == "complex_step":
            value, _ = body(1.0, imaginary=True)
            result = (weight * value).imag / h
            rounding = _rounding(weight, value.imag, None, h) if track else None
        elif scheme == "forward":
            value, taken = body(1.0)
            centre = base.body.reshape(-1)
            result = _weighted(weight, value - centre) / taken
            rounding = _rounding(weight, value, centre, taken, precision) if track else None
        else:
            (plus, up), (minus, down) = body(1.0), body(-1.0)
            width = up - down
            result = _weighted(weight, plus - minus) / width
            rounding = _rounding(weight, plus, minus, width, precision) if track else None
            if scheme == "richardson":
                (half_plus, half_up), (half_minus, half_down) = body(0.5), body(-0.5)
                half = _weighted(weight, half_plus - half_minus) / (half_up - half_down)
                result = (4 * half - result) / 3
                if track:
                    half_rounding = _rounding(weight, half_plus, half_minus, half_up - half_down, precision)
                    rounding = (4 * half_rounding + rounding) / 3
    except _NotDiagonal:
        return None
    finally:
        probe.stats["forward_evaluations"] += len(evaluations)
    probe.structure = base.kind
    probe.rounding = rounding
    return result


def _weighted(weight, difference):
    """weight * difference; Re(conj(weight) * difference) where either is complex, the real loss of a
    complex output (core/values/form.py)."""
    if not (weight.is_complex() or difference.is_complex()):
        return weight * difference
    return weight.real * difference.real + (
        weight.imag * difference.imag if weight.is_complex() and difference.is_complex() else 0
    )


def _rounding(weight, first, second, width, precision=None):
    """eps |w_i| (|first_i| + |second_i|) / |width_i| where they differ (|first_i| alone for the complex step),
    and also where they are equal, for body values in `precision`: element i moves its own body value, so equal
    values mean a change below their rounding (error_bound.moved_outputs)."""
    eps = torch.finfo(first.dtype).eps
    if second is None:
        magnitude = first.abs()
    else:
        magnitude = (first.abs() + second.abs()) * moved_outputs(first, second, precision)
    return eps * weight.abs() * magnitude / width.abs()


def element_magnitude(probe, flat_index: int):
    """|w_i g_i| at x, what element i's diagonal quotient rounds like; None if the chain is not diagonal."""
    x = probe.values[probe.name]
    trace = record(probe.function, probe.arguments(x), probe.name)
    if trace is None:
        return None
    v = probe.v.reshape(-1)
    weight = v[flat_index] if trace.kind == "elementwise" else v[0] * trace.factor.real
    return float(abs(weight * trace.body.reshape(-1)[flat_index]))


# -------------------- coloured path
# Finite differences along column colours of a learned sparse Jacobian: a few evaluations for n elements.
#
# core/check/fd/structure.py learns which input elements each element of the body depends on (the
# function's output, or for a scalar loss the vector entering its final sum or mean);
# core/check/fd/structure.py groups the columns that share no row. All columns of one colour are
# shifted at once, each by its own step, and the body evaluated at the shifted points. Row j of
# that difference moved because of the one column of this colour in its pattern, so its share
# w_j (g_j(x+) - g_j(x-)) belongs to that column's quotient alone: every element is estimated,
# from (colours x shifts) evaluations instead of n x shifts, and compared like any other.
#
# Each shifted evaluation must run the operations the traced one ran, else the estimate is
# abandoned and the general path runs. The weight w_j is grad_output's element for an output
# body, and grad_output times the reduction's constant factor (1/N for a mean) for a loss.

#: Schemes the coloured path computes (complex step needs complex arithmetic through the body: general path).
SCHEMES = {"central": (1.0, -1.0), "forward": (1.0,), "richardson": (1.0, -1.0, 0.5, -0.5)}
#: Elements (copies x the largest of input and body numel) per chunk of colours, as the general path's
#: chunks: it bounds the memory of the copies, values and differences whatever n is. Smaller chunks
#: (2^18: four of 100 colours at 10^4) measured ~20% slower on the B9 block-diagonal loss in the
#: benchmark's harness: each chunk costs a vmap call and its set-up.
CHUNK_ELEMENTS = 1 << 20
#: Use the colouring only when it needs at most this fraction of the general path's evaluations.
WORTH_BELOW = 0.5


@dataclass
class Colouring:
    """A learned pattern and its colours for one input: what the shifted evaluations reuse."""

    learned: object  #: Learned
    colours: object  #: int64 colour per flat input element
    count: int  #: number of colours
    method: str  #: how the colours were found (colour_columns)
    rows: object  #: the pattern's rows, each once for `repeat` consecutive rows that share it (compact)
    repeat: int
    targets: object = None  #: see _targets, built on first use
    run: int = 1  #: body rows per group whose differences are summed before they reach a column (_targets)
    moves: object = None  #: flat position in the (colours x n) copies of each element's shifted value
    order: object = None  #: the elements sorted by colour, and where each colour starts among them (see chunk)
    starts: object = None

    def chunk(self, first: int, last: int):
        """(the elements of colours first..last-1, their positions in that chunk's copies), or (None, all
        positions) when the chunk holds every colour."""
        if first == 0 and last == self.count:
            return None, self.moves
        if self.order is None:
            self.order = torch.sort(self.colours, stable=True).indices
            self.starts = [0] + torch.bincount(self.colours, minlength=self.count).cumsum(0).tolist()
        members = self.order[self.starts[first] : self.starts[last]]
        return members, self.moves.take(members) - first * self.colours.numel()


def plan(probe) -> tuple[Colouring | None, str]:
    """(the colouring for probe's input, "") or (None, why the coloured path does not apply)."""
    x = probe.values[probe.name]
    try:
        learned = learn(probe.function, probe.arguments(x), probe.name)
    except Unlearnable as refusal:
        probe.stats["pattern_evaluations"] = 1  # the traced evaluation, apart from the path that then runs
        return None, f"sparsity pattern not learned: {refusal}"
    rows, repeat = compact(learned.dependency)
    colours, method = colour_columns(rows, x.numel())
    count = int(colours.max()) + 1 if colours.numel() else 0
    if count > WORTH_BELOW * x.numel():
        probe.stats["pattern_evaluations"] = 1
        return None, (
            f"the learned pattern needs {count} colours for {x.numel()} elements: no fewer evaluations "
            "than one element at a time"
        )
    probe.stats["forward_evaluations"] += 1  # the traced evaluation is the coloured path's first
    return Colouring(learned, colours.to(x.device), count, method, rows, repeat), ""


def coloured_estimates(probe, plan_: Colouring, scheme: str, h, *, exact: bool = False):
    """d phi / d x_i for every flat element i from the coloured evaluations, or None if a shifted one differs.

    The colours go a chunk at a time (chunk_colours): a chunk's copies are evaluated at every shift of
    the scheme and differenced, and their shares added to their columns' sums, before the next chunk's."""
    if scheme not in SCHEMES:
        return None
    x = probe.values[probe.name]
    flat = x.reshape(-1)
    learned = plan_.learned
    count = flat.numel()
    target = _targets(plan_, x.device)
    groups = target.numel() // plan_.count
    v = probe.v.reshape(-1)
    per_row = learned.body_kind == "output"  # an output's rows each have their weight; a loss's body one factor
    weight = v.reshape(1, -1) if per_row else v[0] * learned.factor
    points, taken = [], []  # per shift of the scheme: x shifted, and the shift each element really took
    for multiple in SCHEMES[scheme]:
        shift = h * multiple
        points.append(flat + shift)
        taken.append(torch.where(points[-1] == flat, shift, points[-1] - flat) if exact else shift)
    pairs = [(0, None)] if scheme == "forward" else [(0, 1), (2, 3)][: len(points) // 2]  # (None: the body at x)
    size = chunk_colours(plan_.count, max(count, learned.body.numel(), probe.work, 1))
    buffer = flat.expand(size, count).clone()  # a chunk's copies, made once: each shift rewrites its positions
    # few copies: separate calls cost less than vmap's set-up (as on the general path)
    batching = [probe.batched and plan_.count >= defaults.LOOP_BELOW]
    checked = []  # whether the batched evaluation was held against a separate one (once per estimate)
    sums, sizes = None, None  # per pair: each column's weighted differences and rounding sizes (+ a spare slot)
    counted_equal = None  # whether equal evaluations count in the rounding bound, once the dtype is seen
    for first in range(0, plan_.count, size):
        last = min(first + size, plan_.count)
        copies = buffer[: last - first]
        members, moves = plan_.chunk(first, last)  # the chunk's elements (None: all), their positions in copies
        values = []
        for point in points:
            copies.view(-1).index_copy_(0, moves, point if members is None else point.take(members))
            found = _evaluate(probe, learned, copies, batching, checked)
            if found is None:
                return None
            values.append(found)
        if sums is None:
            counted_equal = equal_evaluations_count(values[0].dtype, flat.dtype)
            sums = [values[0].new_zeros(count + 1) for _ in pairs]
            sizes = [values[0].new_zeros(count + 1) for _ in pairs] if probe.track_rounding else None
        part = target[first * groups : last * groups]
        for k, (one, other) in enumerate(pairs):
            second = values[other] if other is not None else learned.body.to(values[0].dtype).expand_as(values[0])
            # after the last shift of the last chunk the copies are free: they hold the differences
            room = copies if last == plan_.count and k == len(pairs) - 1 else None
            _share(
                values[one],
                second,
                part,
                plan_.run,
                per_row,
                weight,
                sums[k],
                None if sizes is None else sizes[k],
                room,
                equal_bounded=counted_equal,
                spent=other is not None,  # the body at x is kept for the next chunk: never overwritten
            )
        if members is not None and last < plan_.count:
            copies.view(-1).index_copy_(0, moves, flat.take(members))  # back to x for the next chunk
    widths = [taken[0] if other is None else taken[one] - taken[other] for one, other in pairs]
    results = [(total[:count] if per_row else total[:count] * weight) / width for total, width in zip(sums, widths)]
    rounding = None
    if sizes is not None:
        eps = torch.finfo(sizes[0].dtype).eps
        roundings = [
            eps * (total[:count] if per_row else total[:count] * weight.abs()) / width.abs()
            for total, width in zip(sizes, widths)
        ]
        rounding = roundings[0] if scheme != "richardson" else (4 * roundings[1] + roundings[0]) / 3
    probe.rounding = rounding
    return results[0] if scheme != "richardson" else (4 * results[1] - results[0]) / 3


def chunk_colours(colours: int, width: int) -> int:
    """Colours per chunk where a copy is `width` elements wide: up to CHUNK_ELEMENTS elements, chunks of equal size."""
    most = max(1, CHUNK_ELEMENTS // width)
    pieces = -(-colours // most)
    return -(-colours // pieces)


def _share(
    first,
    second,
    target,
    run: int,
    per_row: bool,
    weight,
    total,
    sizes,
    room=None,
    *,
    equal_bounded: bool = False,
    spent: bool = False,
):
    """Adds each column's share of the (colours x rows) differences first - second to `total`, and their
    rounding sizes to `sizes` (None: not tracked); group g's share under colour k goes to target[k, g].
    A row counts in its column's rounding where its two values differ, or always with `equal_bounded`
    (outputs in the differences' own dtype, error_bound.equal_evaluations_count): the learned pattern gives a column only the rows its element moves, so equal values
    there are a change below their rounding (core/check/fd/steps.py `moved_outputs`).

    An output's rows are weighted one by one; a loss's single weight multiplies the columns' sums at the
    end rather than every difference, and the one (colours x rows) temporary is weighted in place. `room`
    (copies no longer needed) holds that temporary where it fits: no fresh array to page in. `spent` says both
    evaluations are this chunk's own and needed no more once differenced: their magnitudes are taken in place."""
    if room is not None and first.numel() <= room.numel() and first.dtype == room.dtype:
        difference = torch.sub(first, second, out=room.view(-1)[: first.numel()].view(first.shape))
    else:
        difference = first - second
    if sizes is not None:
        # once differenced, evaluations that own their memory hold their magnitudes: a fresh array of
        # this size costs more in page faults than the arithmetic (B9's block-diagonal loss: 10^6 elements)
        size = first.abs_() if spent and _owned(first) else first.abs()
        size.add_(second.abs_() if spent and _owned(second) and second is not first else second.abs())
        if not equal_bounded:
            size.mul_(difference != 0)
        sizes.index_add_(0, target, _grouped(size.mul_(weight.abs()) if per_row else size, run))
    total.index_add_(0, target, _grouped(difference.mul_(weight) if per_row else difference, run))


def _owned(values) -> bool:
    """Whether `values` is the one contiguous tensor in its storage (an evaluation's own result, which may be
    overwritten once used), not a view of the copies, of the body at x or of a tensor the function holds."""
    return (
        values.is_contiguous()
        and values.storage_offset() == 0
        and values.untyped_storage().nbytes() == values.numel() * values.element_size()
    )


def _evaluate(probe, learned, copies, batching: list, checked: list):
    """The body's values at each copy (copies x rows), batched while `batching[0]`, else one by one; None if one
    differs. A refused batch is not tried again."""
    values = _batched(probe, learned, copies, checked) if batching[0] else None
    if values is None:
        batching[0] = False
        values = _one_at_a_time(probe, learned, copies)
    if values is not None and values.untyped_storage().data_ptr() == copies.untyped_storage().data_ptr():
        values = values.clone()  # a body that views its input: kept before the next shift rewrites it
    return values


def _targets(plan_: Colouring, device):
    """For each colour k and group g of body rows, the column whose quotient group g's differences under
    colour k belong to (flat, colours x groups), or n (a spare slot, dropped) where the group holds no
    column of colour k. A group is a run of `plan_.run` consecutive rows with one index set (a block of a
    block-diagonal pattern), whose differences are summed along the rows before they reach their column,
    a reshape instead of an index_add over every row; otherwise each row is its own group. Built once
    per plan, with the flat positions the shifted copies take: an adaptive step or a refinement asks again."""
    if plan_.targets is None:
        rows, repeat = plan_.rows.to(device), plan_.repeat
        run = run_length(rows, repeat)
        if run % repeat:  # no runs (1) though rows repeat: each row its own group, so each row spelled out
            rows, repeat = rows.repeat_interleave(repeat, dim=0), 1
        heads = rows[:: run // repeat]  # one row per group
        groups, count = heads.shape[0], plan_.colours.numel()
        full = bool((heads[:, -1] >= 0).all()) if heads.numel() else True  # no padding (a band, a block)
        valid = None if full else heads >= 0
        # padding entries write into a spare colour row past the last one
        colour = (
            plan_.colours.take(heads)
            if full
            else torch.where(valid, plan_.colours.take(heads.clamp(min=0)), plan_.count)
        )
        slots = torch.add(torch.arange(groups, device=device).unsqueeze(1), colour, alpha=groups)  # one pass
        targets = torch.full(((plan_.count + 1) * groups,), count, dtype=torch.long, device=device)
        targets.scatter_(0, slots.reshape(-1), (heads if full else torch.where(valid, heads, count)).reshape(-1))
        plan_.targets, plan_.run = targets[: plan_.count * groups], run
        plan_.moves = torch.add(torch.arange(count, device=device), plan_.colours, alpha=count)
    return plan_.targets


def run_length(pattern, repeat: int = 1) -> int:
    """L > 1 when the body rows fall into runs of L consecutive rows, each run with one index set; else 1.

    L is read off the first change of a row's highest column and then checked on every row: at once
    where the rows are full intervals (their highest columns then tell their sets), else entry by entry.
    `pattern` may give each set once for `repeat` consecutive rows that share it (compact):
    the runs are those of the rows spelled out, found on the rows as given."""
    given = pattern.shape[0]
    # a band's rows: told by the first two (equal where each row repeats)
    if given * repeat < 2 or (repeat == 1 and int(pattern[1, 0]) != int(pattern[0, 0])):
        return 1
    high, low, counts = spans(pattern)
    changes = torch.nonzero(high[1:] != high[:-1])
    run = int(changes[0]) + 1 if changes.numel() else given
    if run * repeat == 1 or given % run:
        return 1
    if bool((high - low + 1 == counts).all()):
        tops = high.reshape(-1, run)
        same = bool((tops == tops[:, :1]).all() and (low.reshape(-1, run) == low.reshape(-1, run)[:, :1]).all())
    else:
        blocks = pattern.reshape(-1, run, pattern.shape[-1])
        same = bool((blocks == blocks[:, :1]).all())
    return run * repeat if same else 1


def _grouped(values, run: int):
    """values (colours x rows) summed over each group of `run` consecutive rows, flat (colours x groups)."""
    return (values if run == 1 else values.reshape(values.shape[0], -1, run).sum(-1)).reshape(-1)


def _batched(probe, learned, copies, checked: list):
    """The bodies of all copies from one `vmap` call, or None where batching does not apply.

    The first time, the last copy is also evaluated on its own and must agree bit for bit within
    BATCH_AGREEMENT, as the general path's batch guard asks (core/check/fd/finite_difference.py)."""
    x = probe.values[probe.name]
    # shaped outside vmap: a reshape inside is one more operation
    values = bodies_at(probe.function, probe.arguments, copies.reshape(copies.shape[0], *x.shape), learned)
    probe.stats["forward_evaluations"] += copies.shape[0]
    if values is None:
        return None
    if not checked:
        single = body_at(probe.function, probe.arguments(copies[-1].reshape(x.shape)), learned)
        probe.stats["batch_check_evaluations"] = probe.stats.get("batch_check_evaluations", 0) + 1
        scale = float(single.abs().max()) if single is not None and single.numel() else 0.0
        if single is None or not torch.allclose(
            values[-1], single, rtol=defaults.BATCH_AGREEMENT, atol=defaults.BATCH_AGREEMENT * scale, equal_nan=True
        ):
            return None
        checked.append(True)
    return values


def _one_at_a_time(probe, learned, copies):
    """The bodies of the copies evaluated one by one (a function vmap cannot batch), or None if one differs."""
    x = probe.values[probe.name]
    values = []
    for copy in copies:
        body = body_at(probe.function, probe.arguments(copy.reshape(x.shape)), learned)
        probe.stats["forward_evaluations"] += 1
        if body is None:
            return None
        values.append(body)
    return torch.stack(values)


def estimates_for(probe, scheme: str, h, *, exact: bool = False):
    """The coloured path's estimates for probe's input, or None, with the reason kept on the probe.

    The plan is learned once per probe (an adaptive step asks again and again) and reused."""
    if probe.colouring is None:
        plan_, reason = plan(probe)
        probe.colouring, probe.structure_refused = (plan_ or False), reason
    if not probe.colouring:
        return None
    if scheme not in SCHEMES:
        probe.structure_refused = f"the coloured path does not compute {scheme} differences"
        return None
    found = coloured_estimates(probe, probe.colouring, scheme, h, exact=exact)
    if found is None:
        probe.structure_refused = "a shifted evaluation ran other operations than the traced one"
        probe.colouring = False
        return None
    probe.structure = "coloured"
    probe.stats["colours"] = probe.colouring.count
    probe.stats["colouring"] = probe.colouring.method
    probe.stats["body"] = (
        "the output"
        if probe.colouring.learned.body_kind == "output"
        else f"the vector entering the final {probe.colouring.learned.body_kind}"
    )
    return found
