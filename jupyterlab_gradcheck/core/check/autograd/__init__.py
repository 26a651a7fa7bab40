"""What autograd is observed to do: the four backward passes, the paths of elementwise chains,
custom Functions and their expected backward, whether a callable can take the inputs, a function
of several outputs, forward mode and batched gradients, undefined gradients, second order, and
torch.autograd.gradcheck's verdict.

It may import `fd/`, `compare/`, `record/` and `core.expr`, never the entry points above it.
"""
