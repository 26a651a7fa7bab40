"""Comparisons and their tolerances: one forward pass and the vector v of v^T J, tensors and
complex tensors as a record writes them, and the comparison of two gradients element by element
(in plain floats, with torch, or stacked as rows), with the record each writes.

It may import `record/` and `core.expr`, never `fd/`, `autograd/` or the entry points.
"""
