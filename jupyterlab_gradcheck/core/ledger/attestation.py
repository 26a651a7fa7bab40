"""Attestations: what a check's displayed output says about the ledger entry it wrote.

Each check run in a kernel displays, beside its table, a small JSON object of its own MIME
type naming the ledger (its id and file name), the check, and the seq and hash of the
observation it appended. Whoever saves the notebook saves the outputs with it: JupyterLab,
nbconvert, nbclient, nbgrader's autograde. So a notebook executed headless, which no front end
ever binds through `metadata.gradcheck`, still binds its ledger: every attested entry must be in
the ledger at that seq with that hash, and the newest attestation is a binding in its own right.
A kernel never writes the `.ipynb` an editor or nbconvert holds; the attestations travel in
the outputs instead.
"""

from __future__ import annotations

from pathlib import Path

from ..i18n import Message

MIME_TYPE = "application/vnd.jupyterlab-gradcheck.attestation+json"
#: Markers of a cell that calls the checker, for a notebook whose ledger is missing.
CHECKER_CALLS = ("check(", "check_record(", "GradcheckPanel(")


def attestation_for(ledger, entry: dict) -> dict:
    """The attestation of an observation `entry` appended to `ledger`."""
    return {
        "ledger_id": ledger.ledger_id(),
        "ledger": Path(ledger.path).name,
        "check_id": entry.get("check_id"),
        "seq": entry["seq"],
        "hash": entry["hash"],
    }


def notebook_attestations(document: dict) -> list[dict]:
    """`{"cell", "execution_count", **attestation}` for every attestation in a notebook's
    saved outputs, in cell order (cell numbers count from 1)."""
    found = []
    cells = document.get("cells") if isinstance(document, dict) else None
    for number, cell in enumerate(cells if isinstance(cells, list) else [], start=1):
        if not isinstance(cell, dict):
            continue
        for output in cell.get("outputs") or []:
            data = output.get("data") if isinstance(output, dict) else None
            item = data.get(MIME_TYPE) if isinstance(data, dict) else None
            if isinstance(item, dict) and isinstance(item.get("seq"), int) and isinstance(item.get("hash"), str):
                found.append({"cell": number, "execution_count": cell.get("execution_count"), **item})
    return found


def calls_the_checker(document: dict) -> bool:
    """Whether the notebook's code imports the checker and calls it (a check, a record, the panel)."""
    cells = document.get("cells") if isinstance(document, dict) else None
    code = "\n".join(
        "".join(c["source"]) if isinstance(c.get("source"), list) else str(c.get("source") or "")
        for c in cells or []
        if isinstance(c, dict) and c.get("cell_type") == "code"
    )
    return "jupyterlab_gradcheck" in code and any(call in code for call in CHECKER_CALLS)


def _where(item: dict) -> str:
    count = item.get("execution_count")
    if count is None:
        return Message("cell {cell}", cell=item["cell"])
    return Message("cell {cell} [{count}]", cell=item["cell"], count=count)


def compare_attestations(
    attestations: list[dict], *, ledger_name: str, ledger_id: str | None, hashes: dict[int, str], last_seq: int
) -> dict:
    """Hold a ledger against the attestations a notebook's outputs carry for it.

    Returns `{"errors", "newest", "earlier_epoch"}`: an error for each attested
    entry that is missing (truncated) or different (rewritten) in the ledger, naming the cell;
    `earlier_epoch` counts attested entries of another ledger id of this notebook (a ledger
    replaced by a fresh one), which the ledger cannot hold.
    """
    errors = []
    mine = [a for a in attestations if a.get("ledger") in (None, ledger_name)]
    other_epoch = [a for a in mine if ledger_id is not None and a.get("ledger_id") not in (None, ledger_id)]
    current = [a for a in mine if a not in other_epoch]
    for item in current:
        seq, digest = item["seq"], item["hash"]
        if seq > last_seq or seq not in hashes:
            errors.append(
                Message(
                    "{where} attests entry seq {seq} (hash {hash}), which the ledger lacks (it ends at "
                    "seq {last_seq}): the ledger was truncated",
                    where=_where(item),
                    seq=seq,
                    hash=digest[:12],
                    last_seq=last_seq,
                )
            )
        elif hashes[seq] != digest:
            errors.append(
                Message(
                    "{where} attests entry seq {seq} with hash {hash}, but the ledger has {found}: the "
                    "ledger was swapped or rewritten",
                    where=_where(item),
                    seq=seq,
                    hash=digest[:12],
                    found=hashes[seq][:12],
                )
            )
    if other_epoch:
        ids = sorted({str(a.get("ledger_id"))[:12] for a in other_epoch})
        found = {"count": len(other_epoch), "ids": ", ".join(ids), "ledger_id": str(ledger_id)[:12]}
        errors.append(
            Message(
                "the notebook's outputs attest {count} entry of ledger {ids}, which this ledger "
                "({ledger_id}) lacks: the ledger was replaced by another",
                **found,
            )
            if len(other_epoch) == 1
            else Message(
                "the notebook's outputs attest {count} entries of ledger {ids}, which this ledger "
                "({ledger_id}) lacks: the ledger was replaced by another",
                **found,
            )
        )
    newest = max(current, key=lambda a: a["seq"], default=None)
    return {"errors": errors, "newest": newest, "earlier_epoch": len(other_epoch)}
