"""The notebook's side of a verify: its metadata binding and its outputs' attestations together.

A notebook binds its ledger in two ways. The front end writes `metadata.gradcheck` through the
notebook model (ledger name and id, entry count, head hash). Every check run in a kernel also
leaves an attestation in its cell's output (core.ledger.attestation), which any saver keeps,
nbconvert and nbgrader included. Either binds; both are held against the ledger:

- an attested entry missing from the ledger, or different in it, is an error naming the cell;
- the metadata binding is compared as before (truncated, swapped or rewritten, or behind);
- when the metadata names an earlier ledger of the notebook (another ledger id, or none) while
  the outputs attest this one, the notebook was re-executed against a fresh ledger (nbconvert
  saves its outputs, never the front end's metadata): that is a new epoch, reported as a
  warning, and the binding is the attestations'.
"""

from __future__ import annotations

from ..i18n import Message
from .attestation import calls_the_checker, compare_attestations, notebook_attestations
from .binding import binding_of, compare_binding
from .verify_chain import add_error, settle_ok


def judge_binding(report: dict, document: dict | None, ledger_name: str, where: str) -> dict:
    """Fill `report["binding"]` (and its errors and warnings) from the notebook `document`,
    which is None when no notebook binds this ledger; return the settled report."""
    meta = binding_of(document) if document is not None else None
    if meta is not None and "embedded" not in meta and str(meta.get("ledger", "")).split("/")[-1] != ledger_name:
        meta = None  # the metadata binds another ledger file: it says nothing about this one
    attestations = notebook_attestations(document) if document is not None else []
    found = {"entries": report["last_seq"], "head": report["head"], "ledger_id": report.get("ledger_id")}
    attested = compare_attestations(
        attestations,
        ledger_name=ledger_name,
        ledger_id=report.get("ledger_id"),
        hashes=report["_hashes"],
        last_seq=report["last_seq"],
    )
    errors, warnings = list(attested["errors"]), []
    newest = attested["newest"]
    source = []
    if meta is not None:
        meta_errors, meta_warnings = compare_binding(meta, report["_hashes"], report["last_seq"], report["head"])
        earlier = meta.get("ledger_id") != report.get("ledger_id")
        if meta_errors and newest is not None and earlier:
            warnings.append(
                Message(
                    "new epoch: the notebook's metadata binds an earlier ledger ({entries} entries, head "
                    "{head}); its outputs attest this one (id {ledger_id}) up to seq {seq}, and "
                    "{earlier_epoch} attested entries of an earlier ledger are missing",
                    entries=meta.get("entries"),
                    head=str(meta.get("head"))[:12],
                    ledger_id=str(report.get("ledger_id"))[:12],
                    seq=newest["seq"],
                    earlier_epoch=attested["earlier_epoch"],
                )
            )
        else:
            errors += meta_errors
            warnings += meta_warnings
            source.append("metadata")
    if newest is not None:
        source.append("attestations")
        if meta is None and newest["seq"] < report["last_seq"]:
            warnings.append(
                Message(
                    "the newest attestation in the notebook's outputs is seq {seq}; the ledger has "
                    "{after} entries after it (made outside this notebook's outputs, or not yet saved)",
                    seq=newest["seq"],
                    after=report["last_seq"] - newest["seq"],
                )
            )
    if not source:
        if document is not None and calls_the_checker(document) and report["last_seq"] == 0:
            errors.append(Message("{where}: the notebook calls the checker but binds no entry", where=where))
        report["binding"] = None
        report["warnings"].append(Message("{where}: no notebook binding to compare the head with", where=where))
    else:
        recorded = (
            meta
            if "metadata" in source
            else {
                "ledger": ledger_name,
                "ledger_id": newest.get("ledger_id"),
                "entries": newest["seq"],
                "head": newest["hash"],
            }
        )
        report["binding"] = {
            "ok": not errors,
            "source": "+".join(source),
            "recorded": recorded,
            "found": found,
            "attested": len(attestations),
        }
    for reason in errors:
        add_error(report, None, reason, scope="binding")
    report["warnings"].extend(warnings)
    settle_ok(report)
    return report
