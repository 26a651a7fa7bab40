"""PyTorch's own verdict: `torch.autograd.gradcheck` on the same function and inputs.

It is recorded beside ours, not instead of it. gradcheck uses a fixed step eps=1e-6 and
atol=1e-5, rtol=1e-3, which only make sense in double precision, so it runs for float64 (and
complex128) inputs and is recorded as skipped, with that reason, for the other dtypes.
Its fast mode is used (`gradcheck_fast`): slow mode costs as much as our whole check, and ours is
the element-by-element verdict; a scalar function of one scalar gets slow mode. The record says
which.
"""

from __future__ import annotations

from ...i18n import Message


def gradcheck_fast(input_elements: int, output_elements: int) -> bool:
    """gradcheck's mode for a function of that many input and output elements: fast, but slow for a scalar function
    of one scalar, whose one Jacobian entry slow mode compares exactly in less time than fast mode's random projection
    of it (0.6-0.8 ms against 1.0 ms for x*x)."""
    return not (input_elements == 1 and output_elements == 1)


def torch_gradcheck(
    function, leaves: dict, dtype: str, device: str, *, fast: bool = True, undefined_grad: bool = True
) -> dict:
    """The `torch_gradcheck` observation: status, verdict, reason, and the settings used.

    `fast` is gradcheck's fast mode on or off (`gradcheck_fast`). `undefined_grad=False` leaves out its
    undefined-gradient test (for a graph of PyTorch's own derivative formulas only: that test hands a backward
    undefined output gradients, which in such a graph reach only formulas PyTorch's own test suite runs it on); the
    settings then say so, and `left_out` says why.
    """
    import sys

    import torch.autograd.gradcheck  # noqa: F401  (registers the module below)

    GradcheckError = sys.modules["torch.autograd.gradcheck"].GradcheckError
    base = {
        "name": "torch_gradcheck",
        "description": Message("torch.autograd.gradcheck on the same function"),
        "dtype": dtype,
        "device": device,
        "inputs": {n: {"shape": list(t.shape), "dtype": dtype, "device": str(t.device)} for n, t in leaves.items()},
    }
    if dtype not in ("float64", "complex128"):  # complex128: gradcheck checks the real and imaginary parts
        return {
            **base,
            "status": "skipped",
            "verdict": None,
            "reason": Message(
                "gradcheck needs double precision; with {dtype} its fixed eps=1e-6 step "
                "is below what the dtype resolves",
                dtype=dtype,
            ),
        }
    names = list(leaves)
    inputs = tuple(leaves[n].detach().clone().requires_grad_(True) for n in names)

    if len(names) == 1:
        name = names[0]

        def positional(value):
            return function(**{name: value})
    else:

        def positional(*args):
            return function(**dict(zip(names, args)))

    settings = {
        "eps": 1e-6,
        "atol": 1e-5,
        "rtol": 1e-3,
        "fast_mode": fast,
        **({} if undefined_grad else {"check_undefined_grad": False}),
    }
    if not undefined_grad:
        base["left_out"] = Message(
            "its undefined-gradient test: the graph holds only PyTorch's own derivative "
            "formulas, which PyTorch runs that test on itself"
        )
    try:
        torch.autograd.gradcheck(positional, inputs, raise_exception=True, **settings)
    except GradcheckError as exc:
        first = " ".join(str(exc).split("\n")[0].split())
        return {**base, "status": "failed", "verdict": False, "reason": first[:300], "settings": settings}
    except Exception as exc:  # gradcheck itself could not run this function
        return {
            **base,
            "status": "error",
            "verdict": None,
            "reason": f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
            "settings": settings,
        }
    return {**base, "status": "passed", "verdict": True, "reason": Message("gradcheck passed"), "settings": settings}
