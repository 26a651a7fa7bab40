"""What a check will cost before it runs, from its shapes and the path its inputs will take.

A server with a timeout must refuse, before anything is written, a check that cannot finish
within it, and keep heavy checks from taking every worker. Both need the work known in advance.
The work of a check is dominated by its finite differences: an input whose Jacobian is observed
to be diagonal (an elementwise chain, optionally summed; see `structure.py`) costs a handful of
evaluations whatever its size, and any other input costs one evaluation per shifted copy of
each of its elements. Each evaluation builds tensors up to `work_elements`. The estimate counts
element evaluations, a lower bound on the real work: it predicts the diagonal path only where
the written expression is such a chain, which the engine would also observe.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from ...errors import SpecError
from .spec import FAST_MODE_ABOVE, SHIFTS, resolve_device

# -------------------- cost estimate

#: Calls that map element i to element i, keeping the shape of a same-shaped argument.
_ELEMENTWISE_CALLS = frozenset(
    {
        "sin",
        "cos",
        "tan",
        "exp",
        "log",
        "log1p",
        "sqrt",
        "tanh",
        "sigmoid",
        "abs",
        "relu",
        "softplus",
        "logsigmoid",
        "clamp",
        "where",
        "maximum",
        "minimum",
        "pow",
    }
)
#: Full reductions a diagonal chain may end in (see diagonal.REDUCTIONS).
_REDUCTIONS = frozenset({"sum", "mean"})
#: Evaluations of the diagonal path: both shifts of all elements, the base and a refinement.
DIAGONAL_EVALUATIONS = 8
#: Evaluations the embedded `torch.autograd.gradcheck` adds in its fast mode (a few products).
GRADCHECK_FAST_EVALUATIONS = 4


@dataclass(frozen=True)
class Cost:
    """The predicted work of one check."""

    #: Evaluations of the function: finite differences and the embedded gradcheck.
    evaluations: int
    #: Element evaluations: evaluations times the elements of the largest tensor built.
    element_evaluations: int
    #: Per input, "diagonal" (a few evaluations) or "general" (one per shifted element).
    paths: dict

    def seconds(self, rate: float) -> float:
        """The time the work takes at `rate` element evaluations per second."""
        return self.element_evaluations / rate


def estimate_cost(spec) -> Cost:
    """The predicted work of a validated CheckSpec (see the module docstring)."""
    sizes = {name: math.prod(shape) for name, shape in spec.shapes.items()}
    diagonal = _diagonal_inputs(spec)
    shifts = len(SHIFTS.get(spec.finite_difference.get("scheme"), SHIFTS["central"]))
    evaluations, paths = 1, {}
    for name, size in sizes.items():
        if name in diagonal:
            paths[name] = "diagonal"
            evaluations += DIAGONAL_EVALUATIONS
        else:
            paths[name] = "general"
            evaluations += shifts * size
    total = sum(sizes.values())
    # gradcheck's slow mode perturbs every element both ways; its fast mode a few products.
    evaluations += 2 * total if total <= FAST_MODE_ABOVE else GRADCHECK_FAST_EVALUATIONS
    return Cost(evaluations, evaluations * max(1, spec.work_elements), paths)


def _diagonal_inputs(spec) -> set[str]:
    """The inputs the engine will take on the diagonal path, predicted from the expression:
    those whose shape is the shape of an elementwise body that is the output or the operand of
    one full sum or mean (with constant factors around it). A callable predicts none."""
    expression = getattr(spec, "expression", None)
    if expression is None:
        return set()
    body = _strip_reduction(expression.tree.body)
    if body is None or not _elementwise(body):
        return set()
    names = {node.id for node in ast.walk(body) if isinstance(node, ast.Name)}
    shapes = [tuple(spec.shapes[name]) for name in names if name in spec.shapes]
    if not shapes:
        return set()
    widest = max(shapes, key=lambda shape: (math.prod(shape), len(shape)))
    return {name for name in names if tuple(spec.shapes.get(name, ())) == widest}


def _strip_reduction(node: ast.AST) -> ast.AST | None:
    """The body under constant factors and one full sum or mean; the node itself if there is none."""
    while True:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            node = node.operand
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Div)) and _constant(node.right):
            node = node.left
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and _constant(node.left):
            node = node.right
        else:
            break
    name = _call_name(node)
    if name in _REDUCTIONS:
        if node.keywords or len(_operands(node)) != 1:
            return None
        return _operands(node)[0]
    return node


def _elementwise(node: ast.AST) -> bool:
    """Whether every operation under `node` is elementwise (no reduction, product or index)."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return True
    if isinstance(node, ast.UnaryOp):
        return _elementwise(node.operand)
    if isinstance(node, ast.BinOp):
        return not isinstance(node.op, ast.MatMult) and _elementwise(node.left) and _elementwise(node.right)
    if isinstance(node, ast.Compare):
        return _elementwise(node.left) and all(_elementwise(c) for c in node.comparators)
    if isinstance(node, ast.Call) and _call_name(node) in _ELEMENTWISE_CALLS:
        return all(_elementwise(arg) for arg in _operands(node)) and all(
            _constant(keyword.value) for keyword in node.keywords
        )
    return False


def _call_name(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Name):
        return node.func.id
    return node.func.attr if isinstance(node.func, ast.Attribute) else None


def _operands(call: ast.Call) -> list[ast.AST]:
    """A call's tensor arguments: a method's receiver first (`x.sum()`), then its arguments."""
    receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
    if isinstance(receiver, ast.Name) and receiver.id == "torch":
        receiver = None
    return ([receiver] if receiver is not None else []) + list(call.args)


def _constant(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp):
        return _constant(node.operand)
    return isinstance(node, ast.Constant)


# -------------------- memory admission
# How many elements a check may have: what its device's memory holds, not a CPU-sized constant.
#
# A check keeps several tensors the size of its inputs at once: the inputs and their leaves, the
# expectation, four backward observations and the finite-difference estimate, the shifted copies and
# outputs of the evaluations in flight, the embedded gradcheck's own, and the comparisons' temporaries,
# plus the stored copies of the large values on their way to the ledger's blob store. `WORKING_COPIES`
# counts them (measured: see tests/core/check/test_memory_admission.py); the largest tensor the
# function builds (`work_elements`, from the written expression's shapes) is held a few times over as
# well. A check whose estimate exceeds the free memory of its device is refused before anything runs or
# is written, with the numbers, so a card with 139 GiB takes 10^7 elements and a laptop refuses what
# would swap.
#
# Torch-free: the free memory comes with the device list (core/check/environment.py
# `available_devices` where torch runs; the server asks its workers).

#: Input-sized tensors alive at the peak of a check (see the module docstring). Measured peaks of a
#: whole ledgered check at 2-3x10^6 float64 elements: 32-36 copies (elementwise) and 48-49 (banded);
#: this bound leaves a quarter more.
WORKING_COPIES = 56
#: Copies of the largest intermediate the function builds that a check holds at once (the base and
#: shifted evaluations, and autograd's saved tensors).
INTERMEDIATE_COPIES = 6
#: Bytes per element of each dtype a record may name.
DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "complex64": 8, "complex128": 16}


class OverMemory(SpecError):
    """A check that would not fit in its device's free memory: bad input, refused before it runs."""

    code = "over_memory"


def required_bytes(elements: int, work_elements: int, dtype: str) -> int:
    """Bytes a check of `elements` input elements, building tensors of up to `work_elements`, holds at its peak."""
    size = DTYPE_BYTES.get(dtype, 8)
    return size * (WORKING_COPIES * elements + INTERMEDIATE_COPIES * max(work_elements, elements))


def elements_that_fit(free_bytes: int, dtype: str) -> int:
    """The most input elements of an elementwise check that `free_bytes` holds."""
    size = DTYPE_BYTES.get(dtype, 8)
    return max(0, free_bytes // (size * (WORKING_COPIES + INTERMEDIATE_COPIES)))


def admit_memory(spec, device: str, devices: list[dict], fraction: float = 1.0) -> None:
    """OverMemory when `spec`, run on `device`, needs more than `fraction` of that device's free memory.

    A device entry without `free_bytes` (a kind whose memory torch cannot read), or a fraction of 0,
    admits anything: the run itself then fails with torch's out-of-memory error, kept as a failed
    attempt like any other."""
    entry = next((d for d in devices if d.get("id") == device), None)
    free = None if entry is None else entry.get("free_bytes")
    if free is None or fraction <= 0:
        return
    free = int(free * fraction)
    elements = sum(math.prod(shape) for shape in spec.shapes.values())
    needed = required_bytes(elements, getattr(spec, "work_elements", 1), spec.dtype)
    if needed > free:
        raise OverMemory(
            "inputs have {elements} elements in {dtype}: the check needs about {needed} at once, and {device} "
            "has {free} free (at most {fit} elements fit)",
            elements=elements,
            dtype=spec.dtype,
            needed=_gib(needed),
            device=device,
            free=_gib(free),
            fit=elements_that_fit(free, spec.dtype),
            field="inputs",
        )


def resolve_and_admit(spec, devices: list[dict], fraction: float = 1.0) -> str:
    """The concrete device of `spec` (core/check/record/spec.py), once `fraction` of its free memory is
    known to hold the check."""
    device = resolve_device(spec.device, devices)
    admit_memory(spec, device, devices, fraction)
    return device


def _gib(count: int) -> str:
    return f"{count / 2**30:.2f} GiB"
