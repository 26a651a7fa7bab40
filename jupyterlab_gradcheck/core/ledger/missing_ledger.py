"""The verify report of a submission whose ledger cannot be read: missing, or refused.

A notebook whose ledger is missing is an error when anything says it had one (a binding, an
attested output, a call of the checker), else a warning that no checks were recorded. A binding
that names a file outside the notebook's folder, and a file a server refuses to read, are
errors naming why, so one such file never hides the rest of a folder.
"""

from __future__ import annotations

from pathlib import Path

from ..i18n import Message
from .attestation import calls_the_checker, notebook_attestations
from .chain_report import add_error, new_report, settle_ok


def refused_binding(path: Path, meta, reason: str) -> dict:
    report = new_report()
    report.update(path=str(path), notebook=str(path), ledger=None, _hashes={}, last_seq=0)
    add_error(report, None, reason, scope="binding")
    report["binding"] = {"ok": False, "recorded": meta, "found": None}
    settle_ok(report)
    return report


def missing_ledger(path: Path, document: dict, meta, ledger_path: Path) -> dict:
    """The report of a notebook whose ledger is missing: an error when anything says it had one."""
    report = new_report()
    report.update(
        path=str(path), notebook=str(path), ledger=str(ledger_path), _hashes={}, last_seq=0, ledger_missing=True
    )
    attested = notebook_attestations(document)
    if isinstance(meta, dict):
        add_error(
            report,
            None,
            Message("the notebook binding names {name}, which is missing", name=ledger_path.name),
            scope="binding",
        )
    if attested:
        add_error(
            report,
            None,
            Message(
                "the notebook's outputs attest {count} entries of {name}, which is missing: the ledger was deleted",
                count=len(attested),
                name=ledger_path.name,
            ),
            scope="binding",
        )
    elif calls_the_checker(document):
        add_error(
            report,
            None,
            Message(
                "the notebook calls the checker, but its ledger {name} is missing: the ledger was deleted",
                name=ledger_path.name,
            ),
            scope="binding",
        )
    if report["errors"]:
        report["binding"] = {"ok": False, "recorded": meta, "found": None, "attested": len(attested)}
    else:
        report["warnings"].append(
            Message("{name}: no ledger, no binding and no checker call (no checks recorded)", name=path.name)
        )
    settle_ok(report)
    if not report["errors"]:
        report["binding_ok"] = None  # nothing recorded, nothing to bind
    return report


def refused_report(kind: str, item: Path, reason: str) -> dict:
    """The report of a file that is not read at all (a server refuses one a link leads outside
    its root): an error naming why, so one such file never hides the rest of a folder."""
    report = new_report()
    report.update(
        path=str(item), notebook=str(item) if kind == "notebook" else None, ledger=None, last_seq=0, refused=True
    )
    add_error(report, None, reason, scope="path")
    settle_ok(report)
    return report
