"""Finite differences: the steps and schemes, the structure that saves evaluations (an observed
diagonal, a learned sparse pattern and its column colouring), the rounding bound, refinement,
the projected path and the step sweep.

It may import `compare/`, `record/` and `core.expr`, never `autograd/` or the entry points.
"""
