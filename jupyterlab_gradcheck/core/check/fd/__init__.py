"""Finite differences: the steps and schemes, the evaluations of shifted copies, the structure that
saves evaluations (an observed diagonal, a learned sparse pattern and its column colouring), the
rounding bound, refinement (smaller steps) and re-judging (wider steps, a float64 second opinion), the projected path with its time budget, and the step sweep.

It may import `compare/`, `record/` and `core.expr`, never `autograd/` or the entry points.
"""
