"""The function under check evaluated at shifted copies of one input: phi(x) = sum(v * f(x)), on batches.

A `Probe` holds one input's finite-difference setting (the other inputs, v, the path taken, the
statistics the record reports) and evaluates phi on a stack of shifted copies, batched with
`torch.func.vmap` where that is faithful, one copy at a time where it is not, and chunk by chunk so
that the memory stays bounded whatever the input's size. finite_difference.py turns its evaluations
into difference quotients.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from ..compare import complex_tensors
from ..record import defaults
from . import shifts

#: Elements (stacked copies x the larger of input and output numel) per vmap call: this
#: bounds the memory a chunk needs, and so the peak, independently of n.
CHUNK_ELEMENTS = 1 << 20
#: Below this many stacked copies a plain loop is cheaper than vmap's tracing (core/check/record/defaults.py).
LOOP_BELOW = defaults.LOOP_BELOW
#: Relative agreement required between a batched and a separate evaluation (core/check/record/defaults.py).
BATCH_AGREEMENT = defaults.BATCH_AGREEMENT


@dataclass
class Probe:
    """phi(x) = sum(v * f(inputs with `name` replaced by x)), evaluable on batches of x."""

    function: object
    values: dict  #: detached inputs, already in the finite-difference dtype
    v: object  #: grad_output, in the finite-difference dtype
    name: str
    batched: bool = True
    #: Elements of the largest tensor one evaluation builds; bounds a chunk's memory.
    work: int = 1
    #: Whether to look for a diagonal (elementwise) chain before the general path.
    structured: bool = True
    #: False where the autograd graph already shows the recorder would refuse x (core/check/autograd/chain_paths.py).
    chain_possible: bool = True
    #: Which path the estimates came from: "general", the chain core/check/fd/diagonal.py observed, or
    #: "coloured" (a learned sparse pattern, core/check/fd/coloured_path.py).
    structure: str = "general"
    #: Why no structured path applied to this input ("" while one does or none was tried).
    structure_refused: str = ""
    #: Seconds the general path may take for this input before projected.ExhaustiveOverBudget (None: no limit).
    budget_s: float | None = None
    #: The coloured path's plan once learned (core/check/fd/coloured_path.py); False when it does not apply
    #: (the input is too small for it to pay: COLOURED_FROM_WORK, or complex).
    colouring: object = None
    stats: dict = field(default_factory=lambda: {"forward_evaluations": 0})
    #: Check the first batched evaluation against a separate evaluation of one copy.
    guard: bool = False
    #: Why the batched path was refused for this input ("" while it is used or never tried).
    refused: str = ""
    #: Whether difference_quotient also fills `rounding` (core/check/fd/error_bound.py).
    track_rounding: bool = False
    #: Per element of the last difference_quotient: the rounding bound of its quotient.
    rounding: object = None
    #: For a complex input: shift the imaginary part of each element instead of the real part.
    imaginary_shift: bool = False
    #: Step-sweep series to evaluate in the same call as this input's copies (a core/check/fd/sweep_riders.py Riding).
    riders: object = None
    #: Flat element -> the outputs it moved at a wide step (core/check/fd/refinement.py), and the elements of
    #: the rows being differenced, so that their bound counts those outputs where they came out equal.
    touched: dict | None = None
    rows_of: object = None
    _mapped: object = field(default=None, init=False, repr=False)

    def arguments(self, x) -> dict:
        """The keyword arguments of f with input `name` replaced by x (any dtype, real or complex)."""
        others = {
            k: (t.to(x.dtype) if x.is_complex() and not t.is_complex() else t)
            for k, t in self.values.items()
            if k != self.name
        }
        return {**others, self.name: x}

    def output(self, x):
        """f with input `name` replaced by x (any dtype, real or complex)."""
        return self.function(**self.arguments(x))

    def outputs(self, xs):
        """f for each x stacked along dimension 0, stacked the same way."""
        count = xs.shape[0]
        self.stats["forward_evaluations"] += count
        if self.batched and count >= LOOP_BELOW:
            try:
                if self._mapped is None:
                    self._mapped = torch.func.vmap(self.output)
                out = self._mapped(xs)
            except Exception:  # a callable vmap cannot trace: fall back, and say so
                self.batched = False
            else:
                if not self.guard or self.batch_agrees(xs, out):
                    return out
        # Each copy is cloned into storage of its own: a row of the stack is a view at an offset,
        # and a function that reads storage directly (as_strided with a storage_offset) would
        # read the first, unshifted row instead of its own.
        return torch.stack([self.output(x.clone()) for x in xs])

    def batch_agrees(self, xs, out) -> bool:
        """Whether batching is faithful for this function; else refuse the batched path, saying why.

        The batch's last copy is evaluated once more on its own, its values placed after other
        values in a larger buffer (a non-zero storage offset). A function that reads storage
        directly (as_strided with a storage_offset) then reads the other values and disagrees
        with the batch, and so does a batching rule that is wrong: either way each copy is
        evaluated on its own instead.
        """
        self.guard = False  # once per input: the first batch shows whether batching is faithful
        copy = xs[-1]
        buffer = torch.cat([copy.reshape(-1) + 1, copy.reshape(-1)])  # other values first
        single = self.output(buffer[copy.numel() :].view(copy.shape))
        self.stats["batch_check_evaluations"] = self.stats.get("batch_check_evaluations", 0) + 1
        if out[-1].dtype == single.dtype and torch.equal(out[-1], single):
            return True  # the same values (and no nan): the agreement below holds without computing it
        # the largest finite magnitude (a copy may hold nan or inf, which must then match exactly)
        scale = float(single.abs().nan_to_num(nan=0.0, posinf=0.0).max()) if single.numel() else 0.0
        if out[-1].shape == single.shape and torch.allclose(
            out[-1], single, rtol=BATCH_AGREEMENT, atol=BATCH_AGREEMENT * scale, equal_nan=True
        ):
            return True
        self.batched = False
        self.refused = (
            "a separate evaluation of one copy, its input at another storage offset, differed from the "
            "batched one (the function reads its input's storage directly, as as_strided does, or "
            "cannot be batched faithfully): every copy is evaluated on storage of its own"
        )
        return False

    def component(self):
        """The real values this probe shifts: the input, or the part of a complex input it shifts."""
        x = self.values[self.name]
        if not x.is_complex():
            return x
        return x.imag if self.imaginary_shift else x.real

    def contract(self, outputs):
        """sum(v * output) for each output stacked along dimension 0; sum(Re(conj(v) * output)) for a
        complex grad_output, the real loss of a complex output (core/check/record/complex_values.py)."""
        if self.v.is_complex():
            return complex_tensors.contract_real(outputs, self.v)
        v = self.v.to(outputs.dtype) if outputs.is_complex() else self.v
        # A product and a row sum, not a matrix-vector product: BLAS picks its gemv kernel by the
        # number of rows, so a row's rounding would depend on the chunk it landed in.
        return (outputs.reshape(outputs.shape[0], -1) * v.reshape(-1)).sum(1)

    def phi_batch(self, xs):
        """phi for each x stacked along dimension 0."""
        return self.contract(self.outputs(xs))

    def rows_per_chunk(self, copies: int) -> int:
        """Input elements whose `copies` shifted copies fit in one chunk."""
        width = max(self.values[self.name].numel(), self.v.numel(), self.work, 1)
        return max(1, CHUNK_ELEMENTS // (copies * width))

    def shifted(self, steps, *, imaginary: bool = False, indices=None):
        """Copies of x, copy k shifted by steps[k] at flat element indices[k] (core/check/fd/shifts.py)."""
        return shifts.shifted(self.values[self.name], steps, imaginary=imaginary, indices=indices)

    def shifted_range(self, start: int, stop: int, steps, *, imaginary: bool = False):
        """Copies of x for flat elements start..stop-1, one block per row of `steps` (core/check/fd/shifts.py)."""
        return shifts.shifted_range(self.values[self.name], start, stop, steps, imaginary=imaginary)
