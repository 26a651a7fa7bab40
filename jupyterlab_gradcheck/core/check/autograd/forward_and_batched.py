"""Forward mode and batched gradients of a function that goes through custom autograd Functions.

A custom `torch.autograd.Function` is used by more than `backward()`: forward-mode AD calls its
`jvp`, and `torch.func.vmap` over gradients (per-sample gradients, Jacobians by rows) calls its
`backward` batched. `torch.autograd.gradcheck` checks both (`check_forward_ad`,
`check_batched_grad`); so does a check of a Python callable whose graph holds a custom Function:

- `forward_ad`: the directional derivative J u along a fixed random direction u, by forward-mode
  AD (dual numbers), against central differences of f along u and against the backward's
  Jacobian (sum(v * J u) = grad . u, with grad from `backward`);
- `batched_grad`: `vmap` of `autograd.grad` over three grad_outputs, against the same three
  computed one at a time;
- `undefined_grad`: the backward with its output gradients undefined, which must not crash and
  must give None or zeros (core/check/autograd/forward_and_batched.py), as `check_undefined_grad` does.

Forward mode and batched gradients are observed for a function of one output, with any number of
inputs (each input gets its own direction, drawn in the inputs' order, and its own batched
comparison), and for a function of several outputs (core/check/autograd/forward_and_batched.py);
undefined gradients for any.

Each is skipped, with the reason PyTorch gives, where it does not apply (a Function without a
`jvp`, a backward that vmap cannot batch): a note, not a failure.
"""

from __future__ import annotations

import re
import warnings

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves, tree_map

from ...errors import exception_line
from ...i18n import Message
from ...values.tensors import describe, real_inner
from ..compare.comparison import compare, same_values
from ..fd.steps import difference_bound, mode_tolerances
from .observations import event_failure
from .several_outputs import differentiable

# -------------------- custom op registration
# A `torch.library` custom op the function calls, checked the way `torch.library.opcheck` checks its schema and
# its autograd registration.
#
# A custom op's schema says which arguments it writes into (`mutates_args`), and autograd, functionalization and
# torch.compile trust it; its backward comes from `register_autograd`. PyTorch's own test of both is
# `torch.library.opcheck`: `test_schema` (the op mutates and aliases only what its schema says) and
# `test_autograd_registration` (an input that requires grad reaches an autograd kernel). Its other tests
# (`test_faketensor`, `test_aot_dispatch_dynamic`) are about torch.compile, not gradients, and are left out.
#
# The check finds each custom op the function calls, whether or not it has `register_autograd`, in one forward
# pass under a torch function mode (it sees an op called from Python, also inside a custom Function's forward, and
# adds little to a plain pass; a dispatch mode would import torch._dynamo, about a second at a session's first
# check), keeping the first call's arguments as they were before the call and what each call wrote. For each op it
#
# - runs opcheck's TESTS on copies of that first call's arguments (opcheck runs the op a few times);
# - compares the schema with what the op really wrote: an argument the schema does not declare mutable whose
#   version counter or values moved (opcheck's `test_schema` sees only the values: `x.mul_(1)` passes it, yet
#   breaks any backward that saved x before the call), and an argument that requires grad declared mutable
#   (register_autograd refuses an op that mutates its arguments, so autograd cannot differentiate through it);
# - calls it once more on copies and runs its backward, where an input requires grad and an output does: a
#   custom op with no autograd formula raises there (opcheck's `test_autograd_registration` passes such an op,
#   its autograd kernel being the one that raises).
#
# `opcheck_registration` is the one place these become failures, one per fault: a test_schema failure that a
# write of ours already names is not reported again, nor a missing formula of an op that cannot have one. A
# forward pass that raises (its fault is the check's to report, not this block's) ends the search there, with
# the ops seen until then. An op called from inside another op's implementation is not seen.

#: opcheck's tests that concern a custom op's schema and autograd registration.
TESTS = ("test_schema", "test_autograd_registration")
#: Operator namespaces of PyTorch itself, which are not custom ops.
BUILT_IN = ("aten", "prim", "prims", "_c10d_functional", "profiler")
#: torch's words when the backward of a custom op without register_autograd runs.
NO_FORMULA = "no autograd formula was registered"
#: opcheck's words when test_schema sees an argument's values change that the schema does not declare mutable.
SCHEMA_MUTATION = "is not defined as mutable but was mutated"


class _CustomOpCalls(TorchFunctionMode):
    """Records each operator outside PyTorch's own namespaces that the function calls from Python: its first call,
    the arguments as they were before it (`calls`), and over every call the tensor arguments it wrote into or its
    schema declares mutable (`writes`: {op: {argument: {"input", "declared", "changed", "requires_grad"}}}, `input`
    naming the check's input the argument is, or is a view of)."""

    def __init__(self, inputs: dict):
        super().__init__()
        self.inputs = inputs
        self.calls: dict = {}
        self.writes: dict = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        func = _overload(func, args, kwargs)
        if not isinstance(func, torch._ops.OpOverload) or func.namespace in BUILT_IN:
            return func(*args, **kwargs)
        if str(func) not in self.calls:
            self.calls[str(func)] = (func, tree_map(_fresh, args), tree_map(_fresh, kwargs))
        schema = func._schema.arguments
        named = dict(zip((a.name for a in schema), args)) | kwargs
        declared = {a.name for a in schema if a.alias_info is not None and a.alias_info.is_write}
        tensors = {n: v for n, v in named.items() if isinstance(v, torch.Tensor) and v.layout == torch.strided}
        before = {n: (_version(v), v.detach().clone()) for n, v in tensors.items()}
        result = func(*args, **kwargs)
        for name, value in tensors.items():
            version, values = before[name]
            changed = not same_values(values, value.detach())
            # a declared argument's version moves whether or not it is written (the op's ADInplaceOrView kernel)
            if name in declared or changed or _version(value) != version:
                seen = {"input": self._input(value), "declared": name in declared, "changed": changed}
                self.writes.setdefault(str(func), {}).setdefault(name, {**seen, "requires_grad": value.requires_grad})
        return result

    def _input(self, value) -> str | None:
        for name, leaf in self.inputs.items():
            if value is leaf or value._base is leaf:
                return name
        return None


def _version(tensor) -> int | None:
    """The tensor's version counter (None for an inference tensor, which keeps none)."""
    try:
        return tensor._version
    except RuntimeError:
        return None


def _overload(func, args, kwargs):
    """The overload a call of an operator packet (`torch.ops.ns.op(...)`) resolves to; any other callable as it is."""
    if not isinstance(func, torch._ops.OpOverloadPacket) or func._qualified_op_name.split("::")[0] in BUILT_IN:
        return func
    return getattr(func, torch._C._jit_resolve_packet(func._qualified_op_name, *args, **kwargs) or "default")


def _fresh(value):
    """A tensor argument as opcheck needs it: detached, a copy, needing grad where the call's did."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone().requires_grad_(value.requires_grad)
    return value


def custom_op_calls(function, leaves: dict) -> _CustomOpCalls:
    """The custom ops one forward pass of `function` calls (up to a raise: the ops seen until then), their first
    calls and their writes."""
    fresh = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
    seen = _CustomOpCalls(fresh)
    try:
        with torch.enable_grad(), seen:
            function(**fresh)
    except Exception:  # noqa: BLE001 (the function's own fault: the check reports it)
        pass
    return seen


def _without_formula(op, args, kwargs) -> bool:
    """Whether the op's backward raises for want of an autograd formula, on copies of its first call's arguments
    (False where no input requires grad, or no output does)."""
    args, kwargs = tree_map(_fresh, args), tree_map(_fresh, kwargs)
    inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor) and t.requires_grad]
    if not inputs:
        return False
    try:
        with torch.enable_grad():
            outputs = [t for t in tree_leaves(op(*args, **kwargs)) if isinstance(t, torch.Tensor) and t.requires_grad]
            if outputs:
                torch.autograd.grad(outputs, inputs, [torch.ones_like(t) for t in outputs], allow_unused=True)
    except Exception as exc:  # noqa: BLE001 (another fault of the op is the check's to report)
        return NO_FORMULA in str(exc)
    return False


def _write_failures(name: str, schema: str, writes: dict) -> list:
    """One failure per argument the op writes into and its schema does not declare mutable, and per argument that
    requires grad and is declared mutable."""
    failures = []
    for arg, seen in writes.items():
        if not seen["declared"]:
            reason = Message(
                "the custom op {op} writes into its argument {arg} in place, but its schema {schema} does not "
                "declare {arg} mutable: write into a copy ({arg}.clone()) inside the op, or declare it with "
                "mutates_args=({arg!r},)",
                op=name,
                arg=arg,
                schema=schema,
            )
        elif seen["requires_grad"] and seen["changed"]:
            reason = Message(
                "the custom op {op} writes into {arg}, which requires grad (declared in mutates_args): "
                "torch.library.register_autograd refuses an op that mutates its arguments, so autograd cannot "
                "differentiate through it; return a new tensor instead",
                op=name,
                arg=arg,
            )
        elif seen["requires_grad"]:
            reason = Message(
                "the custom op {op} declares in mutates_args that it writes into {arg}, which requires grad, yet "
                "left {arg} unchanged: autograd counts {arg} as modified in place, and "
                "torch.library.register_autograd refuses an op that mutates its arguments; drop {arg!r} from "
                "mutates_args",
                op=name,
                arg=arg,
            )
        else:
            continue  # a buffer the op declares mutable (an `out`): what mutates_args is for
        failures.append(event_failure("custom_op_schema", reason, input_name=seen["input"], op=name, argument=arg))
    return failures


def _opcheck_failure(name: str, qualname: str, error: str) -> dict:
    """The failure of an opcheck test that failed (its words: "opcheck(op, ...): test_X failed with ...")."""
    found = re.search(r"(test_\w+) failed", error)
    test = found.group(1) if found else "opcheck"
    if test == "test_autograd_registration":
        reason = Message(
            "torch.library.opcheck's test_autograd_registration fails {op}: an input requires grad but the op has "
            "no autograd kernel (its kernel sits on a backend key such as CPU), so autograd differentiates through "
            "its implementation, silently wrong wherever that is not plain torch code; register its backward with "
            "torch.library.register_autograd({qualname!r}, backward, setup_context=...)",
            op=name,
            qualname=qualname,
        )
    else:
        reason = Message("torch.library.opcheck's {test} fails {op}: {error}", test=test, op=name, error=error)
    return event_failure("custom_op_opcheck", reason, op=name, test=test)


def _formula_failure(name: str, qualname: str, mutable: list) -> dict:
    """The failure of a custom op whose backward raises for want of an autograd formula."""
    if mutable:
        reason = Message(
            "the custom op {op} has no autograd formula and, as it mutates {arguments}, can have none "
            "(torch.library.register_autograd refuses an op that mutates its arguments): make it return new "
            "tensors, then register its backward with torch.library.register_autograd",
            op=name,
            arguments=", ".join(mutable),
        )
    else:
        reason = Message(
            "the custom op {op} has no autograd formula, so backward through it raises: register its backward "
            "with torch.library.register_autograd({qualname!r}, backward, setup_context=...)",
            op=name,
            qualname=qualname,
        )
    return event_failure("custom_op_registration", reason, op=name)


def opcheck_registration(function, leaves: dict) -> dict | None:
    """The `custom_op` observation of the custom ops the function calls (None where it calls none): opcheck's
    TESTS on each, the arguments each writes into or declares mutable (`writes`, where any), and the failures, one
    per fault."""
    seen = custom_op_calls(function, leaves)
    if not seen.calls:
        return None
    results, writes, failures = {}, {}, []
    for name, (op, args, kwargs) in seen.calls.items():
        qualname = op._schema.name
        found = seen.writes.get(name, {})
        if found:
            writes[name] = found
        own = _write_failures(name, str(op._schema), found)
        try:
            results[name] = torch.library.opcheck(
                op, tree_map(_fresh, args), tree_map(_fresh, kwargs), test_utils=TESTS
            )
        except Exception as exc:  # opcheck raises on the first test that fails
            error = exception_line(exc)
            results[name] = {"error": error}
            if not (own and SCHEMA_MUTATION in error):  # the write named above is the same fault
                own.append(_opcheck_failure(name, qualname, error))
        mutable = [a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        grad_declared = any(f["comparison"] == "custom_op_schema" and f["argument"] in mutable for f in own)
        if not grad_declared and _without_formula(op, args, kwargs):
            own.append(_formula_failure(name, qualname, mutable))
        failures += own
    block = {
        "status": "failed" if failures else "observed",
        "description": Message("torch.library.opcheck's {tests} on each custom op called", tests=", ".join(TESTS)),
        "ops": results,
        "failures": failures,
    }
    if writes:
        block["writes"] = writes
    return block


# -------------------- undefined grad
# Undefined output gradients, as `torch.autograd.gradcheck(check_undefined_grad=True)` checks them.
#
# Autograd does not always hand a backward a tensor for each output: when an output's gradient is
# undefined (the output was not used, or a backward upstream returned None for it), a custom
# Function receives zeros, or None when it called `ctx.set_materialize_grads(False)`. A backward
# that does arithmetic on that None crashes, in some later training run rather than in its own
# check. So, for a function whose graph passes through a custom Function, the check calls the
# backward with every output's gradient undefined, then (several outputs) each output's gradient
# undefined in turn, the others zeros, exactly as gradcheck's `_test_undefined_backward_mode`
# does. Each case must not crash, and every input's gradient must come back None or zeros: all the
# grad_outputs are undefined or zero, so any other gradient is wrong.

#: Why a nonzero gradient in a case fails.
UNDEFINED_REASON = Message(
    "with every grad_output undefined or zero the backward returned a nonzero gradient: it "
    "must return None or zeros when its grad_output is undefined"
)


def _outputs(found) -> list:
    return list(found) if isinstance(found, (tuple, list)) else [found]


def _case(function, leaves: dict, undefined: list[int] | None):
    """One backward with the gradients of the outputs `undefined` (None: all) undefined and every
    other grad_output zeros: (input gradients or None for each input, the exception or None)."""
    fresh = {n: t.detach().clone().requires_grad_(True) for n, t in leaves.items()}
    with torch.enable_grad():
        wrapped = [
            torch._C._functions.UndefinedGrad()(o) if undefined is None or k in undefined else o
            for k, o in enumerate(_outputs(function(**fresh)))
            if differentiable(o)
        ]
        try:
            grads = torch.autograd.grad(
                wrapped, list(fresh.values()), [torch.zeros_like(o) for o in wrapped], allow_unused=True
            )
        except Exception as exc:  # the backward could not take an undefined gradient: the finding
            return None, exc
    return dict(zip(fresh, grads)), None


def _crash_reason(undefined: list[int] | None, several: bool, exc: Exception) -> str:
    if undefined is not None:
        return Message(
            "the backward crashed when the gradient of output {k} was undefined (None) and the others zero: {error}",
            k=undefined[0],
            error=exception_line(exc),
        )
    if several:
        return Message(
            "the backward crashed with every output's gradient undefined (None): {error}", error=exception_line(exc)
        )
    return Message("the backward crashed when its gradient was undefined (None): {error}", error=exception_line(exc))


def undefined_grad(function, leaves: dict) -> dict:
    """The `undefined_grad` observation: each case with its gradients (or its crash), comparisons of
    each returned gradient with zero, and the failures of the cases that crashed."""
    with torch.enable_grad():
        found = function(**{n: t.detach().clone().requires_grad_(True) for n, t in leaves.items()})
    several = isinstance(found, (tuple, list))
    indices = [k for k, o in enumerate(_outputs(found)) if differentiable(o)]
    cases = [None] + ([[k] for k in indices] if len(indices) > 1 else [])
    observed, comparisons, failures = [], [], []
    for undefined in cases:
        label = "all" if undefined is None else undefined[0]
        grads, exc = _case(function, leaves, undefined)
        if exc is not None:
            reason = _crash_reason(undefined, several, exc)
            observed.append({"undefined": label, "status": "crashed", "reason": reason})
            failures.append(event_failure("undefined_grad", reason, undefined=label))
            continue
        returned = {name: None if g is None else describe(g.detach()) for name, g in grads.items()}
        observed.append({"undefined": label, "status": "returned", "gradients": returned})
        for name, gradient in grads.items():
            if gradient is not None:
                row = compare(
                    "undefined_grad_vs_zero",
                    name,
                    torch.zeros_like(gradient),
                    gradient.detach(),
                    left_label="zero",
                    right_label="gradient",
                    rtol=0.0,
                    atol=0.0,
                )
                comparisons.append({**row, "undefined": label})
    return {
        "status": "observed",
        "description": Message(
            "backward with every output's gradient undefined, then each output's in turn "
            "(others zero), as gradcheck's check_undefined_grad: no crash, and None or zeros"
        ),
        "cases": observed,
        "comparisons": comparisons,
        "failures": failures,
    }


# -------------------- forward and batched

#: The observations of the block, in the record's order (`custom_op` only where the graph holds one).
MODES = ("forward_ad", "batched_grad", "batched_forward_grad", "undefined_grad", "custom_op")
#: The module of the autograd Function PyTorch generates for a torch.library.custom_op's register_autograd.
CUSTOM_OP_MODULE = "torch._library.autograd"

#: Seed of the direction u and of the batched grad_outputs: a record is reproducible.
SEED = 17


def _tolerances(leaves: dict) -> dict:
    """The modes' tolerances in the inputs' dtype and on their device (core/check/fd/steps.py):
    forward AD against the backward's Jacobian and batched against one-at-a-time gradients differ by
    rounding alone ("exact"); central differences along u by their truncation and rounding ("differences")."""
    x = next(iter(leaves.values()))
    return mode_tolerances(x.dtype, x.device)


def _directions(leaves: dict) -> dict:
    """A standard normal direction per input, drawn in the inputs' order from one seeded generator
    (one input gets the draw it always got)."""
    generator = torch.Generator().manual_seed(SEED)
    return {n: torch.randn(x.shape, dtype=x.dtype, generator=generator).to(x.device) for n, x in leaves.items()}


def _label(leaves: dict) -> str:
    """The input a block's comparisons name: the input, or the inputs joined (they are compared together)."""
    return ", ".join(leaves)


def _direction_text(leaves: dict) -> str:
    """How the direction u was drawn, in words."""
    if len(leaves) == 1:
        return Message("u: standard normal, seed {seed}", seed=SEED)
    return Message(
        "u: standard normal for each input, drawn in the order {names}, seed {seed}", names=_label(leaves), seed=SEED
    )


def forward_ad(function, leaves: dict, v, gradients: dict) -> dict:
    """The `forward_ad` observation and its comparisons (or skipped, with the reason): J u with one
    direction per input, u = (u_x, u_w, ...), against central differences along u and sum_i grad_i . u_i."""
    directions = _directions(leaves)
    try:
        pairs = dual_pairs(function, leaves, directions)
    except Exception as exc:  # no jvp (skipped), or a jvp that raised (failed)
        return forward_refused(exc)
    if (missing := missing_tangent(pairs, [0])) is not None:
        return missing
    ((_, tangent),) = pairs
    weights = torch.ones_like(tangent) if v is None else v.detach()
    along = real_inner(weights, tangent).reshape(1)  # sum(Re(conj(v) * J u)) for complex values
    backward_along = sum(real_inner(gradients[n].detach(), directions[n]).reshape(1) for n in leaves)
    label = _label(leaves)
    tolerances = _tolerances(leaves)
    comparisons = [
        _against_differences(function, leaves, directions, tangent, label, tolerances),
        compare(
            "forward_ad_vs_backward",
            label,
            backward_along,
            along,
            left_label="grad . u (backward)",
            right_label="sum(v * J u) (forward_ad)",
            **tolerances["exact"],
        ),
    ]
    if not comparisons[0]["passed"] and len(leaves) > 1:
        comparisons = _tangent_by_tangent(function, leaves, directions, tolerances) + comparisons
    return {
        "status": "observed",
        "direction": _direction_text(leaves),
        "tangent": describe(tangent.detach()),
        "comparisons": comparisons,
    }


def _against_differences(function, leaves: dict, directions: dict, tangent, label: str, tolerances: dict) -> dict:
    """The `forward_ad_vs_finite_difference` row: J u from forward AD against central differences along u."""
    plus, minus, width = along_u(function, leaves, directions)
    return compare(
        "forward_ad_vs_finite_difference",
        label,
        ((plus - minus) / width).reshape(-1),
        tangent.detach().reshape(-1),
        left_label="finite_difference_along_u",
        right_label="forward_ad",
        **tolerances["differences"],
        bound=difference_bound(plus, minus, width).reshape(-1),
    )


def _tangent_by_tangent(function, leaves: dict, directions: dict, tolerances: dict) -> list[dict]:
    """J u against differences along u again, one input's tangent at a time (the others zero): the rows
    that name the input whose tangent disagrees, when the tangents taken together disagree. Costs two
    evaluations and one dual pass per input, and runs only for a failing forward mode."""
    rows = []
    for name in leaves:
        alone = {n: (u if n == name else torch.zeros_like(u)) for n, u in directions.items()}
        ((_, tangent),) = dual_pairs(function, leaves, alone)
        rows.append(_against_differences(function, leaves, alone, tangent, name, tolerances))
    return rows


def batched_grad(function, leaves: dict, v) -> dict:
    """The `batched_grad` observation and its comparisons, one per input (or skipped, with the reason)."""
    names = list(leaves)
    several = len(names) > 1
    with torch.enable_grad():
        inputs = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
        output = function(**inputs)
        generator = torch.Generator().manual_seed(SEED)
        outputs = torch.randn((3, *output.shape), dtype=output.dtype, generator=generator).to(output.device)

        def grad_of(weights):
            return gradients_of(output, [inputs[n] for n in names], weights)

        try:
            one_by_one = [torch.stack(parts) for parts in zip(*(grad_of(w) for w in outputs))]
        except Exception as exc:  # a backward that runs only under some grad_outputs: the finding
            return backward_failed(exc)
        try:
            batched = torch.func.vmap(grad_of)(outputs)
        except Exception as exc:  # a random or batch-dependent backward fails; one vmap cannot batch is skipped
            return vmap_refused(exc, "batched_grad", "backward")
    shown = batched[0] if not several else torch.cat([b.reshape(b.shape[0], -1) for b in batched], dim=1)
    block = {
        "status": "observed",
        "grad_outputs": 3,
        "gradients": describe(shown.detach()),
        "comparisons": batched_comparisons(names, one_by_one, batched, _tolerances(leaves)["exact"]),
    }
    if several:
        block["note"] = Message("the gradients of {names}, each flattened, side by side", names=_label(leaves))
    return block


def function_modes(
    function,
    leaves: dict,
    v,
    gradients: dict | None,
    classes: list,
    *,
    outputs: int | None = None,
    weights: dict | None = None,
) -> dict | None:
    """{"forward_ad", "batched_grad", "undefined_grad"} for a function whose graph holds custom Functions
    (`classes`, as the first forward pass found them), else None. Forward mode and batched gradients
    are observed for one output, whatever the inputs; for a tuple or list of `outputs` (their count)
    they are observed over its differentiable outputs, `weights` mapping each one's index to its
    grad_output (core/check/autograd/forward_and_batched.py)."""
    if not classes:
        return None
    block = {"input": None, "functions": [f"{c.__module__}.{c.__qualname__}" for c in classes]}
    if outputs is None:
        forward = forward_ad(function, leaves, v, gradients)
        block.update(
            {
                "input": _label(leaves),
                "forward_ad": forward,
                "batched_grad": batched_grad(function, leaves, v),
                "batched_forward_grad": batched_forward_grad(function, leaves, forward),
            }
        )
    else:
        forward = forward_ad_outputs(
            function,
            leaves,
            _directions(leaves),
            weights,
            (_tolerances(leaves)["differences"], _tolerances(leaves)["exact"]),
        )
        if forward["status"] == "observed":
            forward["direction"] = _direction_text(leaves)
        block.update(
            {
                "input": _label(leaves),
                "forward_ad": forward,
                "batched_grad": batched_grad_outputs(
                    function, leaves, sorted(weights), SEED, _tolerances(leaves)["exact"]
                ),
                "batched_forward_grad": batched_forward_grad(function, leaves, forward),
            }
        )
    block["undefined_grad"] = undefined_grad(function, leaves)
    if any(c.__module__ == CUSTOM_OP_MODULE for c in classes):  # a torch.library.custom_op's generated Function
        block["custom_op"] = opcheck_registration(function, leaves)
    return block


# -------------------- batched forward gradients
# The jvp batched by vmap, as `gradcheck(check_batched_forward_grad=True)` checks it: `torch.func.jvp` under
# `vmap` (a Jacobian by columns, forward-mode per-sample work) calls a Function's jvp with a batch of tangents at
# once. For each input in turn (the others without tangent), three seeded standard normal tangents are pushed
# through forward AD one at a time and then together under vmap (the vmap of PyTorch's own check, which batches
# a custom Function's jvp as written), and the two are compared at the dtype's exact tolerance. A jvp that draws
# random numbers or depends on the batch fails, naming batching (`vmap_refused`); one vmap cannot batch for
# another reason is skipped, with vmap's words. It runs where forward mode was observed.

#: Seed of the batched tangents (the direction u of forward mode takes SEED).
TANGENT_SEED = SEED + 1


def _tangents_of(function, leaves: dict, name: str):
    """The jvp of `function` along a tangent of input `name` alone: every floating output's tangent (zeros where
    forward AD leaves it undefined), flattened and side by side."""
    import torch.autograd.forward_ad as fwad

    def jvp(tangent):
        with fwad.dual_level():
            found = function(
                **{n: fwad.make_dual(x.detach(), tangent) if n == name else x.detach() for n, x in leaves.items()}
            )
            parts = []
            for out in found if isinstance(found, (tuple, list)) else [found]:
                if isinstance(out, torch.Tensor) and (out.is_floating_point() or out.is_complex()):
                    primal, t = fwad.unpack_dual(out)
                    parts.append((torch.zeros_like(primal) if t is None else t).reshape(-1))
            return torch.cat(parts)

    return jvp


def batched_forward_grad(function, leaves: dict, forward: dict) -> dict:
    """The `batched_forward_grad` observation: per input, three tangents one at a time against vmap's batch of
    them (one comparison per input), failed for a random or batch-dependent jvp, or skipped, with the reason."""
    from torch._vmap_internals import _vmap  # the vmap of gradcheck's check_batched_forward_grad

    if forward.get("status") != "observed":
        return {
            "status": "skipped",
            "reason": Message("needs forward mode, which was not observed: {reason}", reason=forward.get("reason", "")),
        }
    generator = torch.Generator().manual_seed(TANGENT_SEED)
    tolerance = _tolerances(leaves)["exact"]
    comparisons = []
    for name, x in leaves.items():
        draws = torch.randn((3, *x.shape), dtype=x.dtype, generator=generator).to(x.device)
        jvp = _tangents_of(function, leaves, name)
        try:
            one_by_one = torch.stack([jvp(draw) for draw in draws])
        except Exception as exc:  # a jvp that runs only along some tangents: the finding
            reason = Message(
                "forward-mode AD raised along a random tangent of {name}, one at a time: {reason}",
                name=name,
                reason=exception_line(exc),
            )
            return {"status": "failed", "reason": reason, "failures": [event_failure("batched_forward_grad", reason)]}
        try:
            with warnings.catch_warnings():  # vmap's fallback for an operation without a batching rule says so
                warnings.simplefilter("ignore", UserWarning)
                batched = _vmap(jvp)(draws)
        except Exception as exc:  # a random or batch-dependent jvp fails; one vmap cannot batch is skipped
            return vmap_refused(exc, "batched_forward_grad", "jvp")
        comparisons += batched_comparisons([name], [one_by_one], [batched], tolerance, "batched_forward_grad")
    return {"status": "observed", "tangents": 3, "comparisons": comparisons}


# -------------------- forward and batched outputs
# Forward mode and batched gradients of a custom Function with several outputs.
#
# `torch.autograd.gradcheck` checks a tuple of outputs in forward mode and batched, as it checks one
# (`check_forward_ad`, `check_batched_grad`): a Function that returns `(y, aux)` has a `jvp` giving a
# tangent per output and a `backward` taking a gradient per output, and either can be wrong in one
# output's part alone. For each differentiable output k (core/check/autograd/several_outputs.py `differentiable`):
#
# - `forward_ad`: its tangent J_k u along the direction u of core/check/autograd/forward_and_batched.py (one
#   standard normal direction per input, seed 17) against central differences of f_k along u, one
#   comparison per output; and sum_k sum(v_k * J_k u) against grad . u, where grad is the backward's
#   gradient of sum_k sum(v_k * f_k) with each output's grad_output v_k of the check;
# - `batched_grad`: `vmap` of `autograd.grad` over three grad_output tuples (one draw per output, in
#   the outputs' order, seed 17) against the same three computed one at a time, one comparison per
#   input.


def _flat(tensors: list):
    """The tensors flattened and side by side, as one observation shows them."""
    return torch.cat([t.detach().reshape(-1) for t in tensors])


def forward_skipped(exc) -> dict:
    """Forward mode recorded as not applying, with the reason PyTorch gave (no jvp, an operation without a
    forward-mode formula)."""
    return {
        "status": "skipped",
        "reason": Message("forward-mode AD does not apply: {reason}", reason=exception_line(exc)),
    }


def forward_failed(exc) -> dict:
    """Forward mode recorded as failed: the jvp (or an operation's forward-mode formula) raised, which
    `gradcheck(check_forward_ad=True)` fails too."""
    reason = Message(
        "forward-mode AD raised: {reason}: suspect the jvp, which gradcheck(check_forward_ad=True) fails too",
        reason=exception_line(exc),
    )
    return {"status": "failed", "reason": reason, "failures": [event_failure("forward_ad", reason)]}


def forward_refused(exc) -> dict:
    """A forward-mode pass that raised: skipped where PyTorch says forward mode is not implemented (a custom
    Function without a jvp, an operation without a formula), failed otherwise."""
    return forward_skipped(exc) if isinstance(exc, NotImplementedError) else forward_failed(exc)


def backward_failed(exc) -> dict:
    """Batched gradients recorded as failed: the backward itself raised under a random grad_output, one at a time
    (`gradcheck(check_batched_grad=True)` fails it too)."""
    reason = Message(
        "the backward raised under a random grad_output, one at a time: {reason}", reason=exception_line(exc)
    )
    return {"status": "failed", "reason": reason, "failures": [event_failure("batched_grad", reason)]}


#: vmap's words when the code it batches draws random numbers (torch.func.vmap, and the vmap gradcheck uses).
BATCH_RANDOM = ("called random operation while in randomness error mode", "random operations inside of vmap")
#: vmap's words when the code it batches depends on the batch: it reads a value out of a tensor, branches on one,
#: or writes a batched result into a tensor shared by the whole batch.
BATCH_DEPENDENT = (
    ".item() on a Tensor",
    "aten::item",
    "aten::_local_scalar_dense",
    "aten::is_nonzero",
    "data-dependent control flow",
    "inplace arithmetic",
    "is not possible because",
)


def vmap_refused(exc, mode: str, code: str) -> dict:
    """Batched gradients (`mode` batched_grad) or batched forward gradients (batched_forward_grad) under vmap that
    raised: a failure where the code (`code`: "backward" or "jvp") draws random numbers (diagnosed nondeterministic)
    or depends on the batch, as gradcheck(check_batched_grad=True, check_batched_forward_grad=True) fails it; else
    skipped, with vmap's reason."""
    text = exception_line(exc)
    diagnosis = "probable_bug"
    if any(words in text for words in BATCH_RANDOM):
        diagnosis = "nondeterministic"
        reason = Message(
            "batched by vmap, the {code} draws random numbers: its result depends on the batch, which "
            "{option} fails (vmap said: {error})",
            code=code,
            option=BATCH_OPTIONS[mode],
            error=text,
        )
    elif any(words in text for words in BATCH_DEPENDENT):
        reason = Message(
            "batched by vmap, the {code} depends on the batch (it reads or branches on a value, or writes into a "
            "tensor the batch shares), which {option} fails (vmap said: {error})",
            code=code,
            option=BATCH_OPTIONS[mode],
            error=text,
        )
    else:
        return {"status": "skipped", "reason": Message("vmap does not apply: {reason}", reason=text)}
    return {"status": "failed", "reason": reason, "failures": [event_failure(mode, reason, diagnosis=diagnosis)]}


#: The gradcheck option each batched mode stands for.
BATCH_OPTIONS = {
    "batched_grad": "gradcheck(check_batched_grad=True)",
    "batched_forward_grad": "gradcheck(check_batched_forward_grad=True)",
}


def dual_pairs(function, leaves: dict, directions: dict) -> list:
    """(primal, tangent) of each output of forward-mode AD along `directions` (one pair for a tensor output, a list
    for a tuple), a tangent forward AD leaves undefined as None; raises what forward AD raises.

    Each direction is handed to forward AD as a copy: a jvp returning a view of its input's tangent (a Function
    whose output is a view) may change it in place, and the finite differences along u must read u as drawn."""
    import torch.autograd.forward_ad as fwad

    with fwad.dual_level():
        found = function(**{n: fwad.make_dual(x.detach(), directions[n].clone()) for n, x in leaves.items()})
        pairs = [fwad.unpack_dual(o) for o in (found if isinstance(found, (tuple, list)) else [found])]
        pairs = [(p.primal, p.tangent) for p in pairs]
    return [(primal, None if tangent is None else tangent.detach()) for primal, tangent in pairs]


def missing_tangent(pairs: list, indices: list):
    """The forward_ad block skipped for the first differentiable output (of `indices`) without a tangent, else None."""
    for k in indices:
        if pairs[k][1] is None:
            reason = Message(
                "forward-mode AD does not apply: output {k} gets no tangent: an operation on its path has no "
                "forward-mode formula (a torch.library.custom_op registers none with register_autograd)",
                k=k,
            )
            return {"status": "skipped", "reason": reason}
    return None


def along_u(function, leaves: dict, directions: dict) -> tuple:
    """(f(x + h u), f(x - h u), 2h): central differences along u at h = eps^(1/3) max(1, max |x|)."""
    dtype = next(iter(leaves.values())).dtype
    h = torch.finfo(dtype).eps ** (1 / 3) * max(
        1.0, max(float(x.detach().abs().max()) if x.numel() else 0.0 for x in leaves.values())
    )
    with torch.no_grad():
        plus = function(**{n: x.detach() + h * directions[n] for n, x in leaves.items()})
        minus = function(**{n: x.detach() - h * directions[n] for n, x in leaves.items()})
    return plus, minus, 2 * h


def _gradient(function, leaves: dict, indices: list, weights: dict) -> dict:
    """The backward's gradient of sum_k sum(v_k * f_k) over the outputs `indices`, per input (zeros
    where an input reaches none of them)."""
    with torch.enable_grad():
        inputs = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
        found = function(**inputs)
        grads = torch.autograd.grad(
            [found[k] for k in indices],
            list(inputs.values()),
            [weights[k] for k in indices],
            allow_unused=True,
            materialize_grads=True,
        )
    return dict(zip(inputs, grads))


def forward_ad_outputs(function, leaves: dict, directions: dict, weights: dict, tolerances: tuple) -> dict:
    """The `forward_ad` observation of a function of several outputs (or skipped, with the reason):
    `weights` maps each differentiable output's index to its grad_output v_k; `tolerances` is
    (against finite differences, against the backward), as for one output."""
    indices = sorted(weights)
    try:
        pairs = dual_pairs(function, leaves, directions)
    except Exception as exc:  # no jvp (skipped), or a jvp that raised (failed)
        return forward_refused(exc)
    if (missing := missing_tangent(pairs, indices)) is not None:
        return missing
    tangents = {k: pairs[k][1] for k in indices}
    plus, minus, width = along_u(function, leaves, directions)
    label = ", ".join(leaves)
    differences, exact = tolerances
    comparisons = [
        {
            **compare(
                "forward_ad_vs_finite_difference",
                label,
                ((plus[k] - minus[k]) / width).reshape(-1),
                tangents[k].reshape(-1),
                left_label=f"finite_difference_along_u (output {k})",
                right_label=f"forward_ad (output {k})",
                **differences,
                bound=difference_bound(plus[k], minus[k], width).reshape(-1),
            ),
            "output": k,
        }
        for k in indices
    ]
    gradient = _gradient(function, leaves, indices, weights)
    along = sum(real_inner(weights[k], tangents[k]).reshape(1) for k in indices)
    backward_along = sum(real_inner(gradient[n], directions[n]).reshape(1) for n in leaves)
    comparisons.append(
        compare(
            "forward_ad_vs_backward",
            label,
            backward_along,
            along,
            left_label="grad . u (backward)",
            right_label="sum_k sum(v_k * J_k u) (forward_ad)",
            **exact,
        )
    )
    return {
        "status": "observed",
        "tangent": describe(_flat([tangents[k] for k in indices])),
        "note": Message(
            "the tangents of outputs {outputs}, each flattened, side by side", outputs=", ".join(map(str, indices))
        ),
        "comparisons": comparisons,
    }


def gradients_of(outputs, inputs: list, weights) -> tuple:
    """The backward's gradients of `outputs` under `weights`, the graph kept; zeros for an input the outputs do not
    reach or whose gradient the backward leaves out (a needs_input_grad slip): the first order's comparison against
    finite differences names such an element, the batched mode only needs a tensor."""
    return torch.autograd.grad(outputs, inputs, weights, retain_graph=True, allow_unused=True, materialize_grads=True)


def batched_grad_outputs(function, leaves: dict, indices: list, seed: int, tolerance: dict) -> dict:
    """The `batched_grad` observation of a function of several outputs, one comparison per input (or
    skipped, with the reason): three grad_output tuples over the differentiable outputs `indices`."""
    names = list(leaves)
    with torch.enable_grad():
        inputs = {n: x.detach().clone().requires_grad_(True) for n, x in leaves.items()}
        found = function(**inputs)
        outputs = [found[k] for k in indices]
        generator = torch.Generator().manual_seed(seed)
        draws = [torch.randn((3, *o.shape), dtype=o.dtype, generator=generator).to(o.device) for o in outputs]

        def grad_of(*weights):
            return gradients_of(outputs, [inputs[n] for n in names], weights)

        try:
            one_by_one = [torch.stack(parts) for parts in zip(*(grad_of(*(d[i] for d in draws)) for i in range(3)))]
        except Exception as exc:  # a backward that runs only under some grad_outputs: the finding
            return backward_failed(exc)
        try:
            batched = torch.func.vmap(grad_of)(*draws)
        except Exception as exc:  # a random or batch-dependent backward fails; one vmap cannot batch is skipped
            return vmap_refused(exc, "batched_grad", "backward")
    shown = torch.cat([b.reshape(b.shape[0], -1) for b in batched], dim=1)
    return {
        "status": "observed",
        "grad_outputs": 3,
        "gradients": describe(shown.detach()),
        "note": Message(
            "three grad_outputs for each of outputs {outputs}; the gradients of {names}, each flattened, side by side",
            outputs=", ".join(map(str, indices)),
            names=", ".join(names),
        ),
        "comparisons": batched_comparisons(names, one_by_one, batched, tolerance),
    }


def batched_comparisons(names, one_by_one, batched, tolerance: dict, mode: str = "batched_grad") -> list[dict]:
    """Each input's gradients under the three grad_outputs (for `mode` batched_forward_grad: its tangents' jvps)
    taken one at a time against vmap's batch of them, flattened, within `tolerance` (the dtype's exact tolerance)."""
    return [
        compare(
            f"{mode}_vs_one_at_a_time",
            name,
            one.detach().reshape(-1),
            together.detach().reshape(-1),
            left_label="one_at_a_time",
            right_label="vmap",
            **tolerance,
        )
        for name, one, together in zip(names, one_by_one, batched)
    ]


# -------------------- forward mode only
# A custom Function with a jvp and no backward (or vjp) can only be differentiated in forward mode:
# `backward()` raises "You must implement either the backward or vjp method". PyTorch checks it with
# gradcheck(check_forward_ad=True, check_backward_ad=False). The check does the same through its own
# comparisons: `through_jvp` wraps the function in one whose backward assembles v^T J from the jvp,
# one input element at a time (J e_j for every basis direction e_j), so every observation and
# comparison of the check holds the jvp against finite differences and the hand derivation, and a
# failure names the input (and element) whose tangent disagrees. It costs one dual pass per input
# element, so it is admitted up to JVP_ONLY_MAX_ELEMENTS.

#: torch's words when backward() meets a Function with no backward and no vjp.
JVP_ONLY = "You must implement either the backward or vjp method"
#: Input elements up to which a jvp-only Function is checked (one dual pass each).
JVP_ONLY_MAX_ELEMENTS = 4096


def through_jvp(function, names: list[str]):
    """`function` (a callable of the inputs by name, one tensor output) as a function whose backward
    is v^T J assembled from forward-mode AD, one basis tangent at a time; its name is `function`'s."""

    class ThroughJvp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *values):
            ctx.save_for_backward(*values)
            return function(**dict(zip(names, values)))

        @staticmethod
        def backward(ctx, v):
            values = ctx.saved_tensors
            leaves = dict(zip(names, values))
            grads = []
            for name, x in leaves.items():
                gradient = torch.zeros_like(x).reshape(-1)
                for j in range(x.numel()):
                    directions = {n: torch.zeros_like(t) for n, t in leaves.items()}
                    directions[name].reshape(-1)[j] = 1
                    ((_, tangent),) = dual_pairs(function, leaves, directions)
                    if tangent is not None:
                        gradient[j] = real_inner(v, tangent)
                grads.append(gradient.reshape(x.shape))
            return tuple(grads)

    def through(**values):
        return ThroughJvp.apply(*(values[n] for n in names))

    through.__qualname__ = getattr(function, "__qualname__", "function")
    through.__name__ = getattr(function, "__name__", "function")
    through.__wrapped__ = function
    return through
