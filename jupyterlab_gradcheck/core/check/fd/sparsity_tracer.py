"""The tracing mode that learns a Jacobian's sparsity pattern: index sets beside every tensor derived from x.

One evaluation of the function runs under it. Each aten operation's result gets its index sets from
its inputs' by the operation's family (index_sets.py): pointwise, routing, reducing, along one
dimension, a matrix product; any other operation, an in-place update or indices computed from x
raise Unlearnable. It also follows the last full sum or mean, and constant scales and shifts of it,
so that a scalar loss's body (the vector entering that reduction) can be coloured instead.
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .index_sets import (
    ALONG_DIM,
    DENSE,
    DIRECT,
    FINAL,
    IDENTITY,
    MATMUL,
    MAX_DEPENDENCY_ELEMENTS,
    REDUCING,
    ROUTING,
    SCALE,
    SHIFT,
    Unlearnable,
    dedupe,
    reduced,
    union,
)


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
