"""The check's declaration and its fields: the spec; its inputs, expectation, tolerances,
per-output fields, Hessian and fixed arguments; the callable's source; the defaults, the rules,
the device field, the observations' names and the cost estimate.

It imports no torch, not even inside a function: the server process loads only this room. It may
import `core.expr`, never the other rooms of `core/check`.
"""
