"""Our check, `torch.autograd.gradcheck` and `gradgradcheck` on one entry of the custom-Function database.

- **ours**: `jupyterlab_gradcheck.api.check(function, ledger=False, ...)` with no `grad=`, so the
  expectation is the Function's own backward; `hessian="double_backward"` where the entry's
  backward is differentiable (PyTorch marks `supports_gradgrad` and it is not
  `once_differentiable`), so that the second order is compared too. The verdict is the record's
  `passed`; an exception out of `check` is a **crash**, counted and listed with its message.
- **gradcheck** and **gradgradcheck** as PyTorch's own OpInfo tests call them:
  `check_forward_ad` where the entry supports forward mode, `check_batched_grad` and
  `check_batched_forward_grad` where it says so, `check_undefined_grad`, and gradgradcheck with
  `check_fwd_over_rev` / `check_rev_over_rev` from `supports_fwgrad_bwgrad` / `supports_gradgrad`.
  In float64 with gradcheck's defaults; in float32 with FLOAT32_GRADCHECK (gradcheck's defaults
  are float64's: eps 1e-6 in float32 is rounding noise, and its own tests never run it there).
  Where gradcheck fails only because vmap cannot batch the backward or the jvp ("While computing
  batched gradients": numpy inside, an in-place jvp), that is recorded as `batched` and the tool
  runs again without the batched checks: it is a limit of vmap, not a verdict on the gradient.
  A `GradcheckError` is a rejection; another exception (gradcheck could not run the function)
  is recorded as a crash of gradcheck and counts as a rejection, as it fails PyTorch's test.
"""

from __future__ import annotations

import time

#: gradcheck's settings in float32: a step near float32's cube root of epsilon, and tolerances
#: that its rounding error (~1e-7 * |f| / eps) leaves room for.
FLOAT32_GRADCHECK = {"eps": 1e-3, "atol": 1e-3, "rtol": 1e-2}


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:240]}"


def ours_applies_hessian(entry) -> bool:
    return entry.gradgrad and not entry.once_differentiable


def run_ours(entry, function, inputs: dict, *, fixed: dict | None = None, hessian: bool | None = None) -> dict:
    """{"verdict": accept | reject | crash, "failure", "error", "seconds", "named"} of our check."""
    from jupyterlab_gradcheck.api import check

    use_hessian = ours_applies_hessian(entry) if hessian is None else hessian
    extra = {"hessian": "double_backward"} if use_hessian else {}
    if fixed:
        extra["fixed"] = fixed
    started = time.perf_counter()
    try:
        result = check(function, ledger=False, dtype=entry.dtype, device=entry.device, **extra, **inputs)
    except Exception as exc:  # a crash of ours is a finding of its own
        return {"verdict": "crash", "failure": None, "error": _one_line(exc), "seconds": time.perf_counter() - started}
    record = result.record
    failure = record.get("failure")
    return {
        "verdict": "accept" if record.get("passed") else "reject",
        "failure": _failure_summary(failure),
        "error": "" if record.get("passed") or failure else f"failed with failure None: {result.summary()[:240]}",
        "seconds": time.perf_counter() - started,
    }


def _failure_summary(failure: dict | None) -> dict | None:
    if not failure:
        return None
    return {
        "comparison": failure.get("comparison"),
        "input": failure.get("input"),
        "index": failure.get("index"),
        "output": failure.get("output"),
        "diagnosis": failure.get("diagnosis"),
        "reason": " ".join(str(failure.get("reason", "")).split())[:300],
    }


def gradcheck_settings(entry) -> dict:
    return dict(FLOAT32_GRADCHECK) if entry.dtype == "float32" else {}


def run_gradcheck(entry, function, inputs: dict, *, fixed: dict | None = None) -> dict:
    """{"verdict", "gradcheck", "gradgradcheck", "error", "seconds"}: both tools as PyTorch's tests call them."""
    names = list(inputs)
    held = dict(fixed or {})

    def positional(*args):
        return function(**dict(zip(names, args)), **held)

    leaves = tuple(inputs[n].clone().requires_grad_(True) for n in names)
    out = {"seconds": 0.0, "error": "", "batched": ""}
    started = time.perf_counter()
    for tool, call in _calls(entry, positional, leaves).items():
        verdict, error = _verdict(call, batched=True)
        if error.startswith(f"GradcheckError: {BATCHED_PREFIX}"):
            # vmap cannot batch this backward (numpy inside, an in-place jvp): a capability of vmap,
            # not a verdict on the gradient; recorded, and the tool is run again without it
            out["batched"] = out["batched"] or f"{tool}: {error}"
            verdict, error = _verdict(call, batched=False)
        out[tool] = verdict
        out["error"] = out["error"] or (f"{tool}: {error}" if error else "")
    out["seconds"] = time.perf_counter() - started
    out["verdict"] = (
        "accept" if all(out[t] == "accept" for t in ("gradcheck", "gradgradcheck") if t in out) else "reject"
    )
    return out


#: How gradcheck begins its message when vmap could not batch the backward or the jvp.
BATCHED_PREFIX = "While computing batched gradients"


def _calls(entry, positional, leaves) -> dict:
    """gradcheck (and gradgradcheck where the entry has a second order) as PyTorch's OpInfo tests call them."""
    import torch

    settings = gradcheck_settings(entry)
    forward = entry.forward_ad
    calls = {
        "gradcheck": lambda batched: torch.autograd.gradcheck(
            positional,
            leaves,
            check_forward_ad=forward,
            check_batched_grad=batched and entry.batched_grad,
            check_batched_forward_grad=batched and forward and entry.batched_forward_grad,
            check_undefined_grad=True,
            check_grad_dtypes=True,
            **settings,
        ),
    }
    if entry.gradgrad or entry.fwgrad_bwgrad:
        calls["gradgradcheck"] = lambda batched: torch.autograd.gradgradcheck(
            positional,
            leaves,
            check_fwd_over_rev=entry.fwgrad_bwgrad,
            check_rev_over_rev=entry.gradgrad,
            check_batched_grad=batched and entry.batched_grad,
            check_undefined_grad=True,
            check_grad_dtypes=True,
            **settings,
        )
    return calls


def _verdict(call, *, batched: bool) -> tuple[str, str]:
    """(accept | reject | crash, the message): a GradcheckError rejects, another exception is a crash."""
    import warnings

    from torch.autograd.gradcheck import GradcheckError

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # float32 inputs: gradcheck warns that they are not float64
        try:
            return ("accept" if call(batched) else "reject"), ""
        except GradcheckError as exc:
            return "reject", _one_line(exc)
        except Exception as exc:  # gradcheck could not run it: PyTorch's own test would fail
            return "crash", _one_line(exc)


def run_entry(entry) -> dict:
    """Ours and gradcheck on one correct (as written) entry."""
    function = entry.function()
    return {
        "entry": entry.label,
        "name": entry.name,
        "dtype": entry.dtype,
        "device": entry.device,
        "apart": entry.apart,
        "ours": run_ours(entry, function, entry.inputs),
        "gradcheck": run_gradcheck(entry, function, entry.inputs),
    }
