"""JSON export: everything, for a grading script to read.

Per submission: the student and assignment, its status and whether the witness saw it (as in
the CSV), the verify report (chain, binding, flags, witness findings), each
check's history and every ledger entry exactly as written, so a reader can recompute the
hashes itself. Tensors above 256 elements stay in their stored form (a SHA-256, a shape, a dtype
and a summary); `blob_store` is the folder beside the ledger whose `<sha256>.safetensors` files
hold them (null when the ledger has none).
"""

from __future__ import annotations

import json

from ..ledger.history import public_history
from ..ledger.tail import now_utc
from .csv_export import status_of, witnessed_of

FORMAT = "jupyterlab-gradcheck-export"
VERSION = 1


def export_document(submissions: list[dict]) -> dict:
    """The export as a JSON-ready dict."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "generated": now_utc(),
        "submissions": [
            {
                "student": s["student"],
                "assignment": s["assignment"],
                "notebook": s["notebook"],
                "ledger": s["ledger"],
                "blob_store": s.get("blob_store"),
                "chain_ok": s["chain_ok"],
                "binding_ok": s["binding_ok"],
                "replay_ok": s.get("replay_ok"),
                "status": status_of(s),
                "witnessed": witnessed_of(s),
                "verify": s["verify"],
                "checks": {check_id: public_history(h) for check_id, h in s["checks"].items()},
                "entries": s["entries"],
            }
            for s in submissions
        ],
    }


def to_json(submissions: list[dict]) -> str:
    """The export as indented JSON text."""
    return json.dumps(export_document(submissions), indent=2, ensure_ascii=False) + "\n"
