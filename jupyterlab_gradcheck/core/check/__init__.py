"""One gradient check, from a declared record to a completed one.

The entry points sit here: `engine` (run a record, or a callable, to a completed record),
`first_order` (one output's comparisons and diagnosis) with `differences` (its finite
differences), `numerical_verdict` (finite differences against one backward, alone), `diagnosis`
(why an element failed) and `environment` (the devices here, and what ran a check). Below them,
four rooms, each importing only those after it:

- `autograd/`: what autograd is observed to do (the passes, custom Functions, the callable's
  signature, several outputs, forward mode and batched gradients, undefined gradients, second
  order, torch.autograd.gradcheck);
- `fd/`: finite differences (steps, schemes, structure, refinement, the step sweep);
- `compare/`: one forward pass, complex tensors, and the comparisons with their tolerances;
- `record/`: the check's declaration and its fields, torch-free (the server process loads only it).

The package may import `core.expr`, never the ledger or reports.
"""
