"""Comparisons and their tolerances: one forward pass and the vector v of v^T J, tensors as a
record writes them, and the comparison of two gradients element by element.

It may import `record/` and `core.expr`, never `fd/`, `autograd/` or the entry points.
"""
