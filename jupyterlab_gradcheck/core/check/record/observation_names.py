"""What each of the four autograd observations is, in words, as a record and a report name it.

Torch-free, so that a report (core/report/html_parts.py) names the observations without loading the
module that makes them (core/check/autograd/observations.py).
"""

from __future__ import annotations

from ...i18n import N_

#: Each observation's name -> what it holds (translated when shown).
DESCRIPTIONS = {
    "backward_pass_1": N_("x.grad after one forward pass and one backward()"),
    "backward_pass_2_accumulated": N_(
        "x.grad after a second forward pass and backward() with no clearing in between: "
        "backward() adds into .grad, so a pure function gives twice pass 1"
    ),
    "after_clear_none": N_("x.grad after the deliberate clearing x.grad = None and a fresh pass"),
    "autograd_grad": N_("return value of torch.autograd.grad(y, x, grad_output); it does not write .grad"),
}
