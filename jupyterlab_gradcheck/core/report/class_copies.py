"""Copying across a class folder, as `verify` shows it: each pair of submissions of different
students that share a ledger (core.ledger.copies), named by student and path."""

from __future__ import annotations

from pathlib import Path

from ..i18n import Message
from ..ledger.copies import shared_pairs
from .submissions import load


def class_pairs(reports: list[dict], root) -> list[dict]:
    """`{"students", "paths", "how"}` for every pair of the verify `reports` under `root` that
    share a ledger."""
    submissions = [
        load("notebook" if str(r["path"]).endswith(".ipynb") else "ledger", Path(str(r["path"])), r, root)
        for r in reports
        if not r.get("refused")
    ]
    return [
        {
            "students": [submissions[p["a"]]["student"], submissions[p["b"]]["student"]],
            "paths": [submissions[p["a"]]["path"], submissions[p["b"]]["path"]],
            "how": p["how"],
        }
        for p in shared_pairs(submissions)
    ]


def pair_lines(pairs: list[dict]) -> list[str]:
    """One line per pair: `shared ledger: ana and ben (ledger_id, entry_hash): PATH, PATH`."""
    return [
        Message(
            "shared ledger: {first} and {second} ({how}): {first_path}, {second_path}",
            first=pair["students"][0] or "?",
            second=pair["students"][1] or "?",
            how=", ".join(pair["how"]),
            first_path=pair["paths"][0],
            second_path=pair["paths"][1],
        ).localized()
        for pair in pairs
    ]
