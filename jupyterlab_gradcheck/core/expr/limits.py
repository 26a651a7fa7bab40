"""Documented limits on what a check may ask for, so that bad input fails before it runs.

Each default is chosen so that the course exercises and engineering checks fit with room to
spare, while a hostile record cannot make the process allocate or loop without bound.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Bounds applied by the expression parser and the record validator."""

    #: Characters in one expression: long enough for any hand derivation worth writing.
    max_expression_length: int = 2000
    #: Depth of the expression tree: deep nesting is a parser attack, not a derivative.
    max_expression_depth: int = 32
    #: Nodes in the expression tree.
    max_expression_nodes: int = 400
    #: Largest absolute value of a constant exponent in `**` or `pow`.
    max_exponent: float = 64.0
    #: Largest absolute numeric literal in an expression.
    max_literal: float = 1e12
    #: An instructor's cap on the elements over all inputs of one check. None (the default): the
    #: cap follows the device's free memory (core/check/record/memory_admission.py) and, on a
    #: server, the work its timeout allows (server/service.py `admit`).
    max_input_elements: int | None = None
    #: Elements of one value written as a nested list in a record (and entries of an integer
    #: list or a subscript in an expression): parsing JSON numbers costs about a microsecond
    #: each. Larger tensors come from Python, where they travel as stored values
    #: (core/check/record/stored_values.py) and only memory bounds them.
    max_list_elements: int = 100_000
    #: Elements of any intermediate result the function builds (inferred from the shapes):
    #: broadcasting a 20000x1 input against a 1x20000 one stays within the input limit but
    #: would build 4e8 elements (3.2 GB in float64). 5e7 elements is 400 MB in float64.
    max_intermediate_elements: int = 50_000_000
    #: Nesting depth of an input list (a tensor of rank 8 is plenty for a gradient check).
    max_input_rank: int = 8
    #: Number of named inputs.
    max_inputs: int = 16
    #: Characters in a free-text field (origin, destination, justification, id).
    max_text_length: int = 4000
    #: Relative tolerances from this value up are refused: rtol >= 1 accepts any gradient
    #: of the right sign and magnitude up to twice the reference, so it checks nothing. An
    #: instructor may raise it (the server's `max_rtol` option).
    max_rtol: float = 1.0


DEFAULT_LIMITS = Limits()
