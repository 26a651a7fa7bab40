"""The verify report of one ledger: its fields, how an error is added, and how `ok` is settled.

Every part of verify (the chain, the binding, the attestations, the witness) adds its findings
to the same report through `add_error`, each with its scope, and `settle_ok` derives `chain_ok`,
`binding_ok` and `ok` from them.
"""

from __future__ import annotations

from .line_format import GENESIS


def new_report() -> dict:
    return {
        "ok": True,
        "entries": 0,
        "checks": [],
        "head": GENESIS,
        "errors": [],
        "warnings": [],
        "torn_tail": None,
        "sealed": [],
        "flags": [],
        "binding": None,
        "ledger_id": None,
    }


def drop_internals(report: dict) -> dict:
    """The report without what only the verifier uses (hashes and times by seq, the last line read)."""
    for key in ("_hashes", "_times", "_unreported", "_last_complete_line"):
        report.pop(key, None)
    return report


def add_error(report: dict, line: int | None, reason: str, scope: str = "chain") -> None:
    report["errors"].append({"line": line, "reason": reason, "scope": scope})


def settle_ok(report: dict) -> None:
    """`chain_ok`, `binding_ok` (None when there is no binding to compare) and `ok`."""
    report["chain_ok"] = not any(e["scope"] == "chain" for e in report["errors"])
    binding = report.get("binding")
    if binding is not None:
        report["binding_ok"] = binding["ok"]
    else:
        report["binding_ok"] = False if report.get("notebook") else None
    report["ok"] = not report["errors"]
