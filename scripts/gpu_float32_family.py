"""The OpInfo float32 family on cuda, for scripts/gpu-check.sh.

The first float32 sample of each operator of PyTorch's OpInfo database (benchmarks/opinfo_samples.py,
its inputs made on cuda), checked by our full check on cuda against autograd's own gradient, within a
time budget in seconds (the first argument, 150 by default). It counts each outcome, the crashes and
the failed records without a `failure`; the CPU sweep (benchmarks/bench_opinfo.py) grades the rest.
Exit status 1 on a crash or a failed record without a failure, else 0.
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("GRADCHECK_BENCH_DEVICE", "cuda")


def main() -> int:
    import torch

    from benchmarks.opinfo_float32 import outcome
    from benchmarks.opinfo_samples import cases
    from benchmarks.opinfo_sweep import autograd_gradient, run_ours

    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 150.0
    started = time.perf_counter()
    twins, _ = cases(family="float32", samples_per_op=1)
    outcomes, crashes, silent = Counter(), [], []
    for twin in twins:
        if time.perf_counter() - started > budget:
            break
        torch.manual_seed(0)
        try:
            gradient = autograd_gradient(twin.function, twin.inputs)
        except Exception:  # autograd itself cannot differentiate the sample: outside the family
            continue
        result = run_ours(twin.function, twin.inputs, gradient, dtype="float32")
        if result["accepts"] is None:
            crashes.append(f"{twin.label}: {result['error']}")
            continue
        record = result["record"]
        if record["passed"] is False and record["failure"] is None:
            silent.append(twin.label)
        outcomes[outcome(result)] += 1
    done = sum(outcomes.values()) + len(crashes)
    print(
        f"opinfo float32 on {os.environ['GRADCHECK_BENCH_DEVICE']}: {done} of {len(twins)} samples in {time.perf_counter() - started:.0f} s; "
        f"outcomes {dict(outcomes)}; crashes {len(crashes)}; failed records without a failure {len(silent)}"
    )
    for line in crashes[:20]:
        print(f"  crash: {line[:300]}")
    for label in silent[:20]:
        print(f"  failed without a failure: {label}")
    return 1 if crashes or silent else 0


if __name__ == "__main__":
    sys.exit(main())
