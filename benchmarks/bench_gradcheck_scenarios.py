"""B13: agreement with PyTorch's own gradcheck test scenarios (benchmarks/gradcheck_scenarios.py).

Per family of PyTorch's tests: how many of our verdicts (`api.check`, a crash counting as a
disagreement) are the verdict PyTorch's test expects, beside how many of bare gradcheck's are.
The quick run and the full run are the same: the scenarios are small.
"""

from __future__ import annotations

from . import graded, row


def run(quick: bool) -> list[dict]:
    import torch

    from .gradcheck_scenarios import agreement

    torch.set_num_threads(1)
    rows = []
    families = agreement()
    for family in families:
        rows.append(
            row(
                f"B13 PyTorch's scenarios, {family['family']}: ours agree",
                f"{family['ours']}/{family['scenarios']}",
                "",
                "-",
                "INFO",
                f"bare gradcheck agrees on {family['gradcheck']}/{family['scenarios']}",
            )
        )
    total = {key: sum(f[key] for f in families) for key in ("scenarios", "ours", "gradcheck")}
    rows.append(
        graded(
            "B13 PyTorch's scenarios, all families: ours agree",
            total["ours"],
            f"of {total['scenarios']}",
            f"= {total['scenarios']}",
            total["ours"] == total["scenarios"],
            f"bare gradcheck, called as PyTorch's tests call it, agrees on {total['gradcheck']}",
        )
    )
    return rows
