"""A third opinion from SymPy: differentiate the expression symbolically and evaluate it.

Only expression checks get one (a Python callable has no formula). The conversion covers
elementwise expressions and a top-level `sum`/`mean` of one; anything else (matmul, dot,
prod, subscripts, reductions over a dimension) is skipped with the reason. Derivatives are
cached per expression because SymPy is the costly part of a check.
"""

from __future__ import annotations

import ast
import functools

from ..i18n import Message
from .parser import call_parts
from .symbolic_tensor import ELEMENT_MAX_ELEMENTS, element_opinion
from .sympy_values import Unsupported, clamped, elementwise_table, float_value, identical

#: Elements above which evaluating the symbolic derivative element by element is skipped.
MAX_ELEMENTS = 200


def _to_sympy(node, symbols):
    import sympy as sp

    if isinstance(node, ast.Constant):
        return sp.Integer(node.value) if isinstance(node.value, int) else sp.Float(node.value)
    if isinstance(node, ast.Name):
        return symbols[node.id]
    if isinstance(node, ast.UnaryOp):
        operand = _to_sympy(node.operand, symbols)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp):
        left, right = _to_sympy(node.left, symbols), _to_sympy(node.right, symbols)
        ops = {
            ast.Add: lambda a, b: a + b,
            ast.Sub: lambda a, b: a - b,
            ast.Mult: lambda a, b: a * b,
            ast.Div: lambda a, b: a / b,
            ast.Pow: lambda a, b: a**b,
        }
        if type(node.op) not in ops:
            raise Unsupported(Message("the @ operator"))
        return ops[type(node.op)](left, right)
    if isinstance(node, ast.Compare):
        import operator

        left, right = _to_sympy(node.left, symbols), _to_sympy(node.comparators[0], symbols)
        ops = {ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le}
        return ops[type(node.ops[0])](left, right)
    if isinstance(node, ast.Call):
        return _call(node, symbols)
    raise Unsupported(type(node).__name__.lower())


def _call(node: ast.Call, symbols):
    name, args = call_parts(node)
    if node.keywords and name != "clamp":
        raise Unsupported(Message("{name} with keywords", name=name))
    a = [_to_sympy(arg, symbols) for arg in args]
    kw = {k.arg: _to_sympy(k.value, symbols) for k in node.keywords}
    table = elementwise_table()
    if name == "clamp":
        return clamped(a[0], kw.get("min", a[1] if len(a) > 1 else None), kw.get("max", a[2] if len(a) > 2 else None))
    if name not in table:
        raise Unsupported(f"{name}()")
    return table[name](*a)


@functools.lru_cache(maxsize=512)
def symbolic_derivatives(source: str, names: tuple[str, ...]):
    """(reduction, {name: derivative}, {name: Symbol}) for `source`; or a skip reason (a Message)."""
    import sympy as sp

    from .parser import parse_expression

    expression = parse_expression(source, names)
    symbols = {n: sp.Symbol(n, real=True) for n in names}
    body = expression.tree.body
    reduction = None
    if isinstance(body, ast.Call):
        func = body.func
        name = func.id if isinstance(func, ast.Name) else func.attr
        if name in ("sum", "mean") and not body.keywords:
            reduction = name
            is_method = isinstance(func, ast.Attribute) and not (
                isinstance(func.value, ast.Name) and func.value.id == "torch"
            )
            body = func.value if is_method else body.args[0]
    try:
        formula = _to_sympy(body, symbols)
    except Unsupported as exc:
        return Message("SymPy opinion skipped: {construct} is not handled symbolically", construct=exc.construct)
    return reduction, {n: sp.diff(formula, symbols[n]) for n in names}, symbols


@functools.lru_cache(maxsize=512)
def _hand_formula(source: str, names: tuple[str, ...]):
    import sympy as sp

    from .parser import parse_expression

    symbols = {n: sp.Symbol(n, real=True) for n in names}
    try:
        return _to_sympy(parse_expression(source, names, field_name="analytical_gradient").tree.body, symbols)
    except Unsupported:
        return None


def _per_input(spec, inputs: dict):
    """(values, derivative text, symbolically equal) from one symbol per input; or why not."""
    import torch

    names = tuple(spec.inputs)
    derived = symbolic_derivatives(spec.expression.source, names)
    if isinstance(derived, str):
        return derived
    reduction, derivatives, symbols = derived
    if spec.grad_output is not None:
        return Message("a grad_output weights the output's elements, which one symbol per input cannot")
    shapes = {n: tuple(t.shape) for n, t in inputs.items()}
    try:
        full = torch.broadcast_shapes(*shapes.values())
    except RuntimeError:
        return Message("inputs do not broadcast elementwise")
    if reduction is None and full != ():
        if any(shape != full for shape in shapes.values()):
            return Message("non-scalar output with broadcast inputs")
    expanded = {n: t.detach().to("cpu", torch.float64).broadcast_to(full).reshape(-1) for n, t in inputs.items()}
    count = max(1, int(torch.tensor(full).prod()) if full else 1)
    scale = 1.0 / count if reduction == "mean" else 1.0
    result_values = {}
    try:
        for n in names:
            per_element = (
                torch.tensor(
                    [float_value(derivatives[n], {m: float(expanded[m][k]) for m in names}) for k in range(count)],
                    dtype=torch.float64,
                )
                * scale
            )
            if shapes[n] == full:
                result_values[n] = per_element.reshape(full)
            elif shapes[n] == ():
                result_values[n] = per_element.sum().reshape(())
            else:
                return Message("partially broadcast input")
    except Unsupported as exc:
        return Message("SymPy opinion skipped: {construct} is not evaluated numerically", construct=exc.construct)
    text = {n: str(derivatives[n]) for n in names}
    return result_values, text, _symbolic_equal(spec, derivatives, names)


def symbolic_opinion(spec, inputs: dict, analytical: dict, autograd: dict) -> dict:
    """Whether SymPy's derivative agrees with the hand derivation and with autograd.

    One symbol per input first (a formula a student can read); where that cannot convert or
    evaluate the expression, one symbol per input element (symbolic_tensor.py) on few elements."""
    import torch

    names = tuple(spec.inputs)
    if spec.expression is None:
        return {"status": "skipped", "reason": Message("a Python callable has no formula for SymPy")}
    total = sum(t.numel() for t in inputs.values())
    if total > MAX_ELEMENTS:
        return {"status": "skipped", "reason": Message("more than {count} input elements", count=MAX_ELEMENTS)}
    found = _per_input(spec, inputs)
    if isinstance(found, str):
        if total > ELEMENT_MAX_ELEMENTS:
            return {
                "status": "skipped",
                "reason": Message(
                    "{reason}; the element-by-element opinion takes at most {count} input elements",
                    reason=found,
                    count=ELEMENT_MAX_ELEMENTS,
                ),
            }
        found = element_opinion(spec, inputs)
        if isinstance(found, str):
            return {"status": "skipped", "reason": found}
    result_values, derivatives, symbolic_equal = found
    rtol, atol = spec.tolerance["rtol"], spec.tolerance["atol"]

    def agrees(other: dict) -> bool:
        return all(
            torch.allclose(
                other[n].detach().to("cpu", torch.float64).broadcast_to(result_values[n].shape),
                result_values[n],
                rtol=rtol,
                atol=atol,
                equal_nan=False,
            )
            for n in names
        )

    hand_ok, autograd_ok = agrees(analytical), agrees(autograd)
    verdicts = {True: Message("agrees"), False: Message("disagrees")}
    reason = Message(
        "SymPy differentiates {source} to {derivatives}; the hand derivation {hand}; autograd {autograd}",
        source=spec.expression.source,
        derivatives=", ".join(f"d/d{n} = {derivatives[n]}" for n in names),
        hand=verdicts[hand_ok],
        autograd=verdicts[autograd_ok],
    )
    return {
        "status": "agrees" if hand_ok and autograd_ok else "disagrees",
        "derivative": derivatives,
        "values": {n: result_values[n].tolist() for n in names},
        "analytical_agrees": hand_ok,
        "autograd_agrees": autograd_ok,
        "symbolically_equal": symbolic_equal,
        "reason": reason,
    }


def _symbolic_equal(spec, derivatives, names):
    """Whether each hand-written formula equals SymPy's derivative identically (None if unknown)."""

    verdicts = []
    for n in names:
        written = spec.analytical.get(n)
        if not hasattr(written, "source"):
            return None
        formula = _hand_formula(written.source, names)
        if formula is None:
            return None
        verdicts.append(identical(formula, derivatives[n]))
    if None in verdicts:
        return None
    return all(verdicts)
