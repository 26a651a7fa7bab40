"""The four autograd observations, each from a fresh forward pass (principle 4).

- `backward_pass_1`: `.grad` after one `backward()`.
- `backward_pass_2_accumulated`: a second forward and `backward()` with no clearing in
  between: `.grad` now holds the sum of both passes, twice pass 1 for a pure function.
- `after_clear_none`: after the deliberate `x.grad = None`, a fresh pass.
- `autograd_grad`: the return value of `torch.autograd.grad`, which leaves `.grad` untouched.
"""

from __future__ import annotations

import inspect
import math
import re
import types
import weakref
from collections.abc import Callable

import torch

from ...errors import SpecError, UserCodeFault
from ...expr.evaluator import compile_expression
from ...expr.parser import Expression
from ...i18n import Message
from ...values.tensors import Descriptions, same_bits, to_tensor
from ..compare.comparison import forward, grad_output_for, unravel
from ..fd.structure import ELEMENTWISE, REDUCTIONS
from ..record.source import callable_name, function_source, read_from
from ..record.spec import DESCRIPTIONS, CheckSpec
from .several_outputs import differentiable

# -------------------- custom functions
# Which custom `torch.autograd.Function`s a function goes through, read from its autograd graph.
#
# The graph that produced an output names, at each node of a custom Function, the Function's class
# (`_forward_cls`). A check uses that to take a Function's own backward as the expectation
# (core/check/autograd/observations.py) and to observe its forward mode and batched gradients
# (core/check/autograd/forward_and_batched.py); nothing is assumed from the function's name or source.

# -------------------- signature
# Whether a Python callable can take the check's inputs, asked before anything runs.
#
# A callable is called with the inputs as keyword arguments (`f(x=..., w=...)`); a custom
# `torch.autograd.Function` is called through its `apply`, the inputs in the order of its
# `forward`'s parameters. A callable that cannot take them would otherwise fail inside the
# first forward pass with a bare `TypeError`, after its expectation was written to the ledger
# as a run that failed. It is bad input instead: one line that names the parameters and the
# inputs, nothing executed, nothing appended.
#
# A callable whose signature Python cannot read (some builtins) is let through: its first
# call says whatever it says.


def _function_class(function):
    """The custom autograd Function a callable stands for (`apply`, or the api's wrapper of it), or None."""
    for candidate in (getattr(function, "__wrapped__", None), getattr(function, "__self__", None), function):
        if inspect.isclass(candidate) and issubclass(candidate, torch.autograd.Function):
            return candidate
    return None


def _readable(function):
    try:  # the callable's own signature: a wrapper that binds held arguments takes the inputs alone
        return inspect.signature(function, follow_wrapped=False)
    except (TypeError, ValueError):  # a builtin without a readable signature
        return None


#: The input names each live callable was found to take, so that a check asked twice (declared,
#: then run) or repeated reads the signature once. A plain function is keyed by its code object
#: (callable_source.read_from), with which of its parameters have defaults beside the names.
_TAKES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _taken(function, names: list[str]) -> tuple:
    """The names, with what else decides whether a plain function takes them: its defaults."""
    if isinstance(function, types.FunctionType):
        return tuple(names), len(function.__defaults__ or ()), tuple(sorted(function.__kwdefaults__ or ()))
    return (tuple(names),)


def check_signature(function, names: list[str]) -> None:
    """Raise SpecError when `function` cannot be called with the inputs `names`; else return."""
    # a function given a signature of its own (`__signature__`) is asked as itself
    key = function if hasattr(function, "__signature__") else read_from(function)
    taken = _taken(function, names)
    try:
        if taken in _TAKES.get(key, ()):
            return
    except TypeError:  # a callable that cannot be weakly referenced: ask every time
        pass
    _check(function, names)
    try:
        _TAKES.setdefault(key, set()).add(taken)
    except TypeError:
        pass


def _check(function, names: list[str]) -> None:
    function_class = _function_class(function)
    if function_class is not None:
        _check_forward(function_class, names)
        return
    signature = _readable(function)
    if signature is None:
        return
    try:
        signature.bind(**{name: None for name in names})
    except TypeError:
        parameters = [p.name for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        raise SpecError(
            "function {function} takes ({parameters}) but the inputs are named {names}: name each input "
            "as the parameter it is passed to",
            function=getattr(function, "__qualname__", type(function).__name__),
            parameters=", ".join(parameters),
            names=", ".join(names),
            field="function",
        ) from None


def _new_style(function_class) -> bool:
    """Whether the Function has its own `setup_context`: then its `forward` takes no ctx."""
    return function_class.setup_context is not torch.autograd.Function.setup_context


def _check_forward(function_class, names: list[str]) -> None:
    """A Function's `forward(ctx, ...)` (or `forward(...)` beside a `setup_context`) takes the inputs
    positionally: their number must fit."""
    signature = _readable(function_class.forward)
    if signature is None:
        return
    new_style = _new_style(function_class)
    parameters = list(signature.parameters.values())[0 if new_style else 1 :]  # after ctx, where there is one
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        return
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    if len(required) <= len(names) <= len(positional):
        return
    said = {
        "function": function_class.__qualname__,
        "count": len(positional),
        "parameters": ", ".join(p.name for p in positional),
        "given": len(names),
        "names": ", ".join(names),
        "field": "function",
    }
    if new_style:
        raise SpecError(
            "{function}.forward takes {count} input(s) ({parameters}) but {given} were given ({names})", **said
        )
    raise SpecError(
        "{function}.forward takes {count} input(s) after ctx ({parameters}) but {given} were given ({names})", **said
    )


# -------------------- custom functions

#: The class name of a node PyTorch's own derivative formulas make (SinBackward0, MmBackward0), and of a leaf's.
_BUILT_IN = re.compile(r"^([A-Z][A-Za-z0-9]*Backward\d*|AccumulateGrad)$")


def custom_functions(function: Callable, inputs: dict, dtype: str = "float64", device: str = "cpu") -> list:
    """The custom autograd Function classes one forward pass of `function` at `inputs` (numbers, lists or
    tensors, in `dtype` on `device`) goes through, in graph order."""
    leaves = {
        n: torch.as_tensor(v, dtype=getattr(torch, dtype), device=device).detach().clone().requires_grad_(True)
        for n, v in inputs.items()
    }
    with torch.enable_grad():
        output = function(**leaves)
    return graph_functions(output)


def graph_nodes(output):
    """Each node of the graph that produced `output` (a tensor, or a tuple or list of outputs) once, depth first
    from the first output."""
    roots = list(output) if isinstance(output, (tuple, list)) else [output]
    seen, stack = set(), [getattr(root, "grad_fn", None) for root in reversed(roots)]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(next_node for next_node, _ in getattr(node, "next_functions", ()))


def graph_functions(output) -> list:
    """The custom autograd Function classes in the graph that produced `output` (a tensor, or a tuple or
    list of outputs), in graph order."""
    found = []
    for node in graph_nodes(output):
        owner = getattr(node, "_forward_cls", None)
        if owner is not None and owner not in found:
            found.append(owner)
    return found


def only_built_in_formulas(output) -> bool:
    """Whether every node of the graph that produced `output` (a tensor, or a tuple or list of them) is one of
    PyTorch's own derivative formulas or a leaf: no custom Function, no C++ extension's node, nothing unknown."""
    return all(
        getattr(node, "_forward_cls", None) is None and _BUILT_IN.match(type(node).__name__)
        for node in graph_nodes(output)
    )


# -------------------- torch gradcheck
# PyTorch's own verdict: `torch.autograd.gradcheck` on the same function and inputs.
#
# It is recorded beside ours, not instead of it. gradcheck uses a fixed step eps=1e-6 and
# atol=1e-5, rtol=1e-3, which only make sense in double precision, so it runs for float64 (and
# complex128) inputs and is recorded as skipped, with that reason, for the other dtypes.
# Its fast mode is used (`gradcheck_fast`): slow mode costs as much as our whole check, and ours is
# the element-by-element verdict; a scalar function of one scalar gets slow mode. The record says
# which.


def gradcheck_fast(input_elements: int, output_elements: int) -> bool:
    """gradcheck's mode for a function of that many input and output elements: fast, but slow for a scalar function
    of one scalar, whose one Jacobian entry slow mode compares exactly in less time than fast mode's random projection
    of it (0.6-0.8 ms against 1.0 ms for x*x)."""
    return not (input_elements == 1 and output_elements == 1)


def torch_gradcheck(
    function, leaves: dict, dtype: str, device: str, *, fast: bool = True, undefined_grad: bool = True
) -> dict:
    """The `torch_gradcheck` observation: status, verdict, reason, and the settings used.

    `fast` is gradcheck's fast mode on or off (`gradcheck_fast`). `undefined_grad=False` leaves out its
    undefined-gradient test (for a graph of PyTorch's own derivative formulas only: that test hands a backward
    undefined output gradients, which in such a graph reach only formulas PyTorch's own test suite runs it on); the
    settings then say so, and `left_out` says why.
    """
    import sys

    import torch.autograd.gradcheck  # noqa: F401  (registers the module below)

    GradcheckError = sys.modules["torch.autograd.gradcheck"].GradcheckError
    base = {
        "name": "torch_gradcheck",
        "description": Message("torch.autograd.gradcheck on the same function"),
        "dtype": dtype,
        "device": device,
        "inputs": {n: {"shape": list(t.shape), "dtype": dtype, "device": str(t.device)} for n, t in leaves.items()},
    }
    if dtype not in ("float64", "complex128"):  # complex128: gradcheck checks the real and imaginary parts
        return {
            **base,
            "status": "skipped",
            "verdict": None,
            "reason": Message(
                "gradcheck needs double precision; with {dtype} its fixed eps=1e-6 step "
                "is below what the dtype resolves",
                dtype=dtype,
            ),
        }
    names = list(leaves)
    inputs = tuple(leaves[n].detach().clone().requires_grad_(True) for n in names)

    if len(names) == 1:
        name = names[0]

        def positional(value):
            return function(**{name: value})
    else:

        def positional(*args):
            return function(**dict(zip(names, args)))

    settings = {
        "eps": 1e-6,
        "atol": 1e-5,
        "rtol": 1e-3,
        "fast_mode": fast,
        **({} if undefined_grad else {"check_undefined_grad": False}),
    }
    if not undefined_grad:
        base["left_out"] = Message(
            "its undefined-gradient test: the graph holds only PyTorch's own derivative "
            "formulas, which PyTorch runs that test on itself"
        )
    try:
        torch.autograd.gradcheck(positional, inputs, raise_exception=True, **settings)
    except GradcheckError as exc:
        first = " ".join(str(exc).split("\n")[0].split())
        return {**base, "status": "failed", "verdict": False, "reason": first[:300], "settings": settings}
    except Exception as exc:  # gradcheck itself could not run this function
        return {
            **base,
            "status": "error",
            "verdict": None,
            "reason": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
            "settings": settings,
        }
    return {**base, "status": "passed", "verdict": True, "reason": Message("gradcheck passed"), "settings": settings}


# -------------------- observations

# -------------------- failures
# The failures a record lists: a failed comparison row's (`failure`), and one no row carries (`event_failure`).
#
# Both have the same fields, so that every reader of a record (the summary, the report, the benchmark) reads
# any failure the same way: comparison, input, index, the two sides, the errors and tolerances, diagnosis,
# reason.


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


# -------------------- expectation tensors
# The expectation of a check as tensors: what the author wrote, evaluated at the inputs.
#
# A value is converted to the check's dtype and device, an expression of the expression language
# is evaluated, a Python callable is called with the (detached) inputs; each result is broadcast
# to its input's shape, and one that cannot be is refused naming both shapes.


def analytical_tensors(spec: CheckSpec, leaves: dict) -> dict:
    """The expectation as a tensor per input, broadcast to that input's shape."""
    result = {}
    detached = None
    for name, written in spec.analytical.items():
        if detached is None and (isinstance(written, Expression) or callable(written)):
            detached = {n: t.detach() for n, t in leaves.items()}
        if isinstance(written, Expression):
            with torch.no_grad():
                value = compile_expression(written)(**detached)
            value = torch.as_tensor(value, dtype=leaves[name].dtype, device=leaves[name].device)
        elif callable(written):
            with torch.no_grad():
                value = torch.as_tensor(written(**detached), dtype=leaves[name].dtype, device=leaves[name].device)
        else:
            value = to_tensor(written, spec.dtype, str(leaves[name].device))
        shape = leaves[name].shape
        try:
            result[name] = value if value.shape == shape else value.broadcast_to(shape)
        except RuntimeError:
            raise SpecError(
                "analytical_gradient for {name!r} has shape {shape}, which does not match the "
                "input's shape {input_shape}",
                name=name,
                shape=list(value.shape),
                input_shape=list(leaves[name].shape),
                field="analytical_gradient",
            ) from None
    return result


# -------------------- chain paths
# Which inputs could be an elementwise chain, read from the autograd graph a check already built.
#
# The diagonal path (core/check/fd/structure.py) decides by evaluating the function once under a
# recorder that refuses any operation on a tensor derived from x that is not elementwise (or a
# full sum or mean). That evaluation costs about two forward passes and is wasted on most
# functions, which are not such a chain. The graph of the check's first autograd pass already names
# the derivative formula of every operation between the output and each input: where one of them
# belongs to an operation the recorder refuses (a matrix product, an index, a reshape), the
# recorder would refuse too, and its evaluation is skipped. Anything the graph cannot name for
# certain (a custom Function, whose forward the recorder sees operation by operation; an in-place
# copy into a view) leaves the recorder to decide, as before: the shortcut only ever skips an
# evaluation whose answer is known, so no check takes another path because of it.

#: An autograd formula node's class name: the operation's name in camel case, "Backward", an overload number.
_FORMULA = re.compile(r"^([A-Z][A-Za-z0-9]*)Backward\d*$")
#: The operations the recorder accepts on a tensor derived from x, in the graph's spelling (no underscores, lower
#: case): every elementwise one, the full reductions, and the constant scales and shifts that may follow them.
_ACCEPTED = frozenset(
    name.replace("_", "").lower() for name in ELEMENTWISE | set(REDUCTIONS) | {"mul", "div", "neg", "add", "sub"}
)


def refused_by_recorder(node) -> bool:
    """Whether this graph node is the formula of an operation the diagonal recorder refuses, for certain."""
    if getattr(node, "_forward_cls", None) is not None:
        return False  # a custom Function: the recorder sees its forward operation by operation
    match = _FORMULA.match(type(node).__name__)
    return bool(match) and match.group(1).lower() not in _ACCEPTED


def chain_possible(output, leaves: dict) -> dict:
    """For each input name: False where the graph that produced `output` shows an operation the recorder refuses
    between the output and that input, True where the recorder has to decide."""
    root = getattr(output, "grad_fn", None)
    names = {id(leaf): name for name, leaf in leaves.items()}
    reach: dict = {}  # id(node) -> the names of the inputs reachable from that node
    refused: set = set()
    stack = [(root, False)] if root is not None else []
    while stack:  # depth first, each node finished after all of its children
        node, children_done = stack.pop()
        if id(node) in reach:
            continue
        children = [child for child, _ in getattr(node, "next_functions", ()) if child is not None]
        if not children_done:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in reach)
            continue
        variable = getattr(node, "variable", None)
        here = {names[id(variable)]} if variable is not None and id(variable) in names else set()
        for child in children:
            here |= reach[id(child)]
        reach[id(node)] = here
        if refused_by_recorder(node):
            refused |= here
    return {name: name not in refused for name in leaves}


# -------------------- observations


def _grads(leaves: dict) -> dict:
    return {
        name: (_copy(leaf.grad) if leaf.grad is not None else torch.zeros_like(leaf)) for name, leaf in leaves.items()
    }


def _copy(gradient):
    """A copy of a gradient that is cut from any graph (`.grad` normally has none to cut).

    autograd's immutable zero placeholder (a ZeroTensor, which cannot be read element by
    element) becomes ordinary zeros of the same shape, dtype and device.
    """
    if gradient._is_zerotensor():
        return torch.zeros(gradient.shape, dtype=gradient.dtype, device=gradient.device)
    return gradient.detach().clone() if gradient.requires_grad else gradient.clone()


def _observation(descriptions: Descriptions, name: str, grads: dict, note: str = "", **extra) -> dict:
    return {
        "name": name,
        "description": DESCRIPTIONS[name],
        "note": note,
        "gradients": {key: descriptions.describe(value) for key, value in grads.items()},
        **extra,
    }


def refuse_other_layouts(leaves: dict) -> None:
    """UserCodeFault when a backward gave a dense input a gradient of another layout (a sparse one):
    autograd accepts it, and no comparison of values would say what is wrong."""
    for name, leaf in leaves.items():
        if leaf.grad is not None and leaf.grad.layout != leaf.layout:
            raise UserCodeFault(
                Message(
                    "the backward gave input {name} a gradient of layout {got}, where {name} is {want}",
                    name=name,
                    got=str(leaf.grad.layout).replace("torch.", ""),
                    want=str(leaf.layout).replace("torch.", ""),
                )
            )


def observe_autograd(function, leaves: dict, grad_output) -> tuple[dict, dict, object]:
    """Run the four passes; return (observations, raw gradient tensors by observation, v)."""
    for leaf in leaves.values():
        leaf.grad = None
    output = forward(function, leaves, values=True)  # the first call also compares the inputs' values
    v = grad_output_for(output, grad_output)
    functions = graph_functions(output)  # read before backward() frees the graph's buffers
    chains, built_in_only = chain_possible(output, leaves), only_built_in_formulas(output)
    # each pass gets a grad_output of its own: the backward of a view of the input hands the leaf a
    # gradient sharing v's storage, which autograd keeps as .grad, and pass 2 adds into it in place
    output.backward(v.clone())
    refuse_other_layouts(leaves)
    unused = [name for name, leaf in leaves.items() if leaf.grad is None]
    pass_1 = _grads(leaves)
    for leaf in leaves.values():
        if leaf.grad is not None and leaf.grad._is_zerotensor():
            # autograd's immutable zero placeholder (sgn of a real input): pass 2 must add into
            # .grad, so it is replaced by an ordinary tensor of the same zeros first
            leaf.grad = torch.zeros_like(leaf)

    forward(function, leaves).backward(v.clone())
    pass_2 = _grads(leaves)

    for leaf in leaves.values():
        leaf.grad = None  # the deliberate clearing the course asks for
    forward(function, leaves).backward(v.clone())
    after_clear = _grads(leaves)

    for leaf in leaves.values():
        leaf.grad = None
    names = list(leaves)
    returned = torch.autograd.grad(forward(function, leaves), [leaves[n] for n in names], v, allow_unused=True)
    untouched = all(leaves[n].grad is None for n in names)
    by_grad = {n: (_copy(g) if g is not None else torch.zeros_like(leaves[n])) for n, g in zip(names, returned)}
    unused_note = (
        f"input(s) {', '.join(unused)} do not reach the output: gradient None, shown as zeros. " if unused else ""
    )
    descriptions = Descriptions()  # equal gradients (pass 1, after clearing, autograd.grad) stored once
    raw = {
        "descriptions": descriptions,
        "custom_functions": functions,
        "chain_possible": chains,
        "built_in_only": built_in_only,
        "backward_pass_1": pass_1,
        "backward_pass_2_accumulated": pass_2,
        "after_clear_none": after_clear,
        "autograd_grad": by_grad,
    }
    observations = {
        "backward_pass_1": _observation(descriptions, "backward_pass_1", pass_1, unused_note),
        "backward_pass_2_accumulated": _observation(
            descriptions, "backward_pass_2_accumulated", pass_2, "no x.grad = None between the passes"
        ),
        "after_clear_none": _observation(descriptions, "after_clear_none", after_clear, "x.grad = None, then one pass"),
        "autograd_grad": _observation(
            descriptions,
            "autograd_grad",
            by_grad,
            ".grad stayed None: autograd.grad returns the gradient without touching .grad"
            if untouched
            else ".grad was written during torch.autograd.grad (unexpected)",
            grad_attribute_untouched=untouched,
        ),
    }
    return observations, raw, v


# -------------------- repeats
# Three of the four passes call the backward at the same point with the same grad_output: the first
# pass, the pass after clearing, and torch.autograd.grad. A deterministic backward gives them the same
# bits. When they differ the backward is nondeterministic (a random op, cuDNN's or atomic adds' kernels),
# and a wrong-looking derivative is then no evidence of a wrong formula: the record names it as such,
# with the largest difference between the repeats and where it is.
#
# The second order repeats its double backward the same way (core/check/autograd/second_order.py): one
# row of the Hessian taken again from a fresh graph, held to the same rule by the same two functions.

#: The settings that make PyTorch's kernels deterministic, named in a `nondeterministic` failure's reason.
DETERMINISTIC_SETTINGS = "torch.use_deterministic_algorithms(True), torch.backends.cudnn.deterministic = True"

#: The passes that repeat one backward call exactly.
REPEATS = ("backward_pass_1", "after_clear_none", "autograd_grad")


def repeat_differences(raw: dict, dtype: str, passes: tuple = REPEATS) -> dict | None:
    """The `nondeterminism` block when identical calls gave different gradients, else None: the largest
    difference between the repeats, its input and element, and whether any element's difference is beyond
    `repeat_tolerance` (which fails the check).

    `raw` maps each of `passes` (the first order's three by default) to {input name: tensor}; every other
    pass is held against the first, element by element."""
    from ..record.spec import repeat_tolerance

    tolerance = repeat_tolerance(dtype)
    found, beyond = None, False
    for name, first in raw[passes[0]].items():
        for other in passes[1:]:
            second = raw[other][name]
            if same_bits(first, second):
                continue
            difference = (first - second).abs().reshape(-1)
            difference = torch.where(torch.isnan(difference), torch.full_like(difference, math.inf), difference)
            allowed = tolerance["atol"] + tolerance["rtol"] * first.detach().abs().reshape(-1)
            beyond = beyond or bool((difference > allowed).any())
            at = int(difference.argmax())
            largest = float(difference[at])
            if found is None or largest > found["largest_difference"]:
                found = {
                    "repeats": len(passes),
                    "passes": [passes[0], other],
                    "input": name,
                    "index": unravel(at, first.shape),
                    "values": [first.reshape(-1)[at].item(), second.reshape(-1)[at].item()],
                    "largest_difference": largest,
                    "tolerance": tolerance,
                }
    if found is not None:
        found["beyond_tolerance"] = beyond
    return found


def nondeterminism_failure(block: dict, *, second_order: bool = False) -> dict:
    """The failure of a backward whose identical calls disagree beyond `repeat_tolerance`; with `second_order`,
    of a double backward (the block then names its Hessian entry and the `elements` of the inputs it joins)."""
    said = {
        "first": f"{block['values'][0]:.9g}",
        "second": f"{block['values'][1]:.9g}",
        "difference": f"{block['largest_difference']:.3g}",
        "settings": DETERMINISTIC_SETTINGS,
    }
    if second_order:
        reason = Message(
            "at second order the double backward is nondeterministic: two identical calls (same input, same "
            "grad_output, the same element of the gradient differentiated again) give H[{index}] ({elements}) = "
            "{first} and {second}, a difference of {difference}; a random op in the backward's own backward, or "
            "nondeterministic kernels (cuDNN, atomic adds), not a wrong formula: {settings} remove the kernels' part",
            index=", ".join(map(str, block["index"])),
            elements=", ".join(block["elements"]),
            **said,
        )
        return event_failure("second_order_repeats", reason, diagnosis="nondeterministic", input_name=block["input"])
    reason = Message(
        "the backward is nondeterministic: two identical calls (same input, same grad_output) give "
        "{input}{index} = {first} and {second}, a difference of {difference}; a random op in the backward, "
        "or nondeterministic kernels (cuDNN, atomic adds), not a wrong formula: {settings} remove the kernels' part",
        input=block["input"],
        index="".join(f"[{i}]" for i in block["index"]),
        **said,
    )
    return event_failure("repeats", reason, diagnosis="nondeterministic", input_name=block["input"])


# -------------------- backward expectation
# The expectation of a custom `torch.autograd.Function` check: its own hand-written backward.
#
# For a custom Function the hand derivation *is* its `backward`; asking its author to write it a
# second time as `grad=` sends them back to `torch.autograd.gradcheck`. So a Python check with no
# expectation, of a function whose graph passes through one or more custom Functions, takes as
# its expectation "the backward of F": the gradient that autograd computes through the
# Functions' own `backward`, in a fresh graph, with the check's grad_output. The observations
# then hold that backward against finite differences, as gradcheck does.
#
# The expectation is named by each Function's qualified name and the SHA-256 of its source
# (its class, also when defined in a notebook cell; for a `torch.library` custom op, the op's name
# and its author's functions: record/source.py). The name is what the ledger keeps for a callable
# expectation, so a backward edited after a failure is a new expectation text: the ledger records
# it as an expectation change, and grading flags it as revised after an observation.
#
# A function whose graph holds no custom Function keeps the refusal of a missing expectation.


def backward_name(classes: list) -> str:
    """'the backward of Cube [sha256 1a2b3c4d5e6f]' (each Function, ' and ' between): the expectation's text."""
    parts = []
    for owner in classes:
        digest = function_source(owner).get("sha256") or "source unreadable"
        parts.append(f"{callable_name(owner)} [sha256 {digest[:16]}]")
    return "the backward of " + " and ".join(parts)


def backward_expectation(
    function: Callable, names: list[str], classes: list, grad_output=None, outputs: list[bool] | None = None
) -> dict:
    """{input name: callable of the inputs} giving d sum(v * f) / d input through the Functions' own backward.

    Each callable runs a fresh forward and `torch.autograd.grad` (grad mode on, whatever the
    caller's), so it observes the backward as written, not a value computed once and kept.
    For a function returning several outputs (`outputs`: whether each is differentiable) it is
    `{"outputs": [e_0, e_1, ...]}`: e_k the same for output k, through the backward with v_k at output k
    and zeros at the others (`grad_output` then a list with one entry per output, or None), and None
    for an output that is not differentiable.
    """
    label = backward_name(classes)

    def named(compute, name):
        def expectation(**values):
            return compute(**values)[name]

        expectation.__qualname__ = expectation.__name__ = label
        return expectation

    if outputs is None:

        @_once_per_point
        def gradients(**values):
            return _through_backward(function, names, values, lambda output: [grad_output_for(output, grad_output)])

        return {name: named(gradients, name) for name in names}

    def for_output(k):
        wanted = None if grad_output is None else grad_output[k]

        @_once_per_point
        def gradients(**values):
            return _through_backward(
                function,
                names,
                values,
                lambda *found: [grad_output_for(o, wanted) if i == k else _zeros(o) for i, o in found],
            )

        return {name: named(gradients, name) for name in names}

    return {"outputs": [for_output(k) if flag else None for k, flag in enumerate(outputs)]}


def _once_per_point(compute: Callable) -> Callable:
    """`compute`, run once for the same input tensors, unchanged since: every input's expectation is its part
    of one fresh forward and backward, instead of one forward and backward per input. New tensors, or the
    same ones modified in place, are a new point and run it again."""
    last: dict = {}

    def run(**values):
        point = {n: (t, getattr(t, "_version", None)) for n, t in values.items()}
        seen = last.get("point")
        if (
            seen is not None
            and seen.keys() == point.keys()
            and all(seen[n][0] is t and seen[n][1] == version for n, (t, version) in point.items())
        ):
            return last["result"]
        last.clear()  # a computation that raises leaves nothing to reuse
        result = compute(**values)
        last.update(point=point, result=result)
        return result

    return run


def _zeros(output):
    """Zeros shaped like an output: the grad_output of every output but the one checked."""
    return torch.zeros_like(output)


def _through_backward(function: Callable, names: list[str], values: dict, weights: Callable) -> dict:
    """d sum_k(v_k * f_k) / d input for each input, by a fresh forward and `torch.autograd.grad`; `weights`
    gives the v_k of the (index, detached output) pairs of the differentiable outputs (of the one output)."""
    with torch.enable_grad():
        leaves = {n: t.detach().clone().requires_grad_(True) for n, t in values.items()}
        found = function(**leaves)
        if isinstance(found, (tuple, list)):
            used = [(i, o) for i, o in enumerate(found) if differentiable(o)]
            v = weights(*[(i, o.detach()) for i, o in used])
            found = [o for _, o in used]
        else:
            v = weights(found.detach())
        returned = torch.autograd.grad(found, [leaves[n] for n in names], v, allow_unused=True)
    return {n: (torch.zeros_like(leaves[n]) if g is None else g.detach()) for n, g in zip(names, returned)}
