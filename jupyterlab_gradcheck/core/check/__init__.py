"""One gradient check, from a declared record to a completed one.

Holds the spec, the engine, the autograd observations, finite differences (and the diagonal
path), comparisons, diagnosis, the numerical and torch.gradcheck verdicts, the step sweep,
defaults, devices and the environment. It may import `core.expr`, never the ledger or reports.
"""
