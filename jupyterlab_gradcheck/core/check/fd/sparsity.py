"""The sparsity pattern of a function's Jacobian, learned from the aten operations it runs.

One evaluation of the real function runs under a dispatch mode that carries, next to every
tensor derived from input x, a tensor of the flat indices of x each of its elements depends on
(shape: the tensor's shape plus one trailing dimension of width K, padded with -1). Each
operation's rule builds its output's index sets from its inputs':

- pointwise operations (aten's `pointwise` tag): the union of the broadcast inputs' sets;
- operations that only move values (views, slices, copies, cat, index_select, gather...): the same
  operation applied to the positions of the sets in one table (a reshape or cut of one tensor: to its sets);
- reductions along dimensions (sum, mean, amax, logsumexp...) and normalisations along one
  (softmax, log_softmax, cumsum): the union over the reduced slice;
- matrix products (mm, mv, dot, addmm, bmm): the union over the contracted dimension.

Any other operation, an in-place update, or indices computed from x leave the pattern unknown,
and the caller says so. The pattern comes from the forward operations alone, never from a
backward: a custom Function whose backward is wrong cannot hide its own error by teaching a
wrong pattern. It may be a superset of the true one (a product by a zero, a `where` branch not
taken), which costs colours but never correctness.

For a scalar loss the Jacobian worth colouring is that of the vector entering the last full
`sum` or `mean` (then scaled or shifted by constants only); `Learned.body_position` names that
operation, where later evaluations capture the same vector (`body_at`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

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
_SCALE = frozenset({"mul", "div", "neg"})
_SHIFT = frozenset({"add", "sub"})
#: The index set of a full reduction's result: every element of x (its sets are never built).
DENSE = "dense"
#: Largest index-set tensor (elements) the mode builds; beyond it the pattern is called dense.
MAX_DEPENDENCY_ELEMENTS = 1 << 24


class Unlearnable(Exception):
    """The pattern cannot be learned from this evaluation; the message says why."""


@dataclass
class Learned:
    """What one traced evaluation showed about input x."""

    #: int64 (body shape, K): each body element's flat input indices, -1 padded: the pattern's rows, each set
    dependency: object  #: once where the tracer broadcast it over elements (a softmax's row: colouring.compact)
    body_kind: str  #: "output" (the function's output) or the final reduction's name
    body_position: int  #: index of the final reduction among the evaluation's operations (-1 for "output")
    factor: float  #: d output / d sum(body) for a reduction (1/N for a mean, times constants)
    operations: tuple  #: every operation's name, in order: later evaluations must repeat them
    body: object  #: the body's values at x (flat)


def _dedupe(dep):
    """Index sets with duplicates removed, in descending order with the -1 padding last, K trimmed
    to the widest set. Every rule's result keeps that order (column_colouring.py relies on it)."""
    import torch

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


def _union(deps: list, shape):
    """The union of index sets broadcast to `shape` (each dep: its tensor's shape + (K,))."""
    import torch

    parts = [d.broadcast_to(*shape, d.shape[-1]) if tuple(d.shape[:-1]) != tuple(shape) else d for d in deps]
    if len(parts) == 1:
        return parts[0]
    return _dedupe(torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0])


def _reduced(dep, dims, keepdim: bool, shape):
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
    return _dedupe(merged)


@cache
def _mode_class():
    """The tracing mode, defined on first use so that importing the core never loads torch."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

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
            source = [
                a for a in args if isinstance(a, torch.Tensor) and id(a) in self.final and self.final[id(a)][2] is a
            ]
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
            if name in _SCALE and not kwargs and len(constants) == (name != "neg"):
                factor = (
                    factor * constants[0] if name == "mul" else (factor / constants[0] if name == "div" else -factor)
                )
            elif not (
                (name in _SHIFT and kwargs.get("alpha", 1) == 1 and set(kwargs) <= {"alpha"}) or name in IDENTITY
            ):
                return
            self.final[id(out)] = (start, factor, out)

        def _rule(self, func, name, args, kwargs, out):
            if name in IDENTITY:
                return self.dep(args[0])
            if torch.Tag.pointwise in func.tags:
                return _union(
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
                        dims = kwargs.get(
                            "dim", args[2] if len(args) > 2 and isinstance(args[2], (list, tuple)) else dims
                        )
                        dims = [] if dims is None else list(dims)
                return _reduced(self.dep(args[0]), dims, bool(keepdim), out.shape)
            if name in ALONG_DIM:
                dep = self.dep(args[0])
                dim = args[1] % max(out.dim(), 1) if out.dim() else 0
                whole = _reduced(dep, [dim], True, [1 if d == dim else s for d, s in enumerate(out.shape)])
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
                return moved if bool((moved[..., -1] >= 0).any()) else _dedupe(moved)
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
            return moved if len(table) == 1 and bool((moved[..., -1] >= 0).any()) else _dedupe(moved)

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
                    deps.append(
                        dep.reshape(1, -1).expand(out.shape[0], -1) if side == 1 else dep.reshape(dep.shape[0], -1)
                    )
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
            return _dedupe(torch.cat(deps, dim=-1) if len(deps) > 1 else deps[0])

    return Tracer


def learn(function, arguments: dict, name: str) -> Learned:
    """Trace function(**arguments) once and return what it showed about input `name`; Unlearnable if nothing."""
    import torch

    x = arguments[name]
    tracer = _mode_class()(x)
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


@cache
def _capture_class():
    """A light mode that records operation names and keeps the input of one of them."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Capture(TorchDispatchMode):
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

    return Capture


def body_at(function, arguments: dict, learned: Learned):
    """The body's values (flat) at these arguments, or None when the operations differ from the learned ones."""
    import torch

    mode = _capture_class()(learned.body_position)
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
    import torch

    mode = _capture_class()(learned.body_position)
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
