"""Where the kernel's ledger lives.

A check run from a notebook belongs in that notebook's ledger, beside it. Inside Jupyter
Server the kernel learns its notebook from `JPY_SESSION_NAME` (the notebook's path); elsewhere
(a script, a console, a kernel started by hand) the caller names the notebook or the ledger
file. An explicit argument wins over the environment because it is what the user wrote.

The notebook that is open in JupyterLab is saved by the frontend, which keeps the ledger
binding in its metadata; writing that file from the kernel would race the editor, so a
ledger reached through the session's own notebook does not rewrite the notebook's metadata.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.ledger.store import Ledger, ledger_path_for

SESSION_VARIABLE = "JPY_SESSION_NAME"

HOW_TO_GIVE_ONE = (
    "pass notebook='lab1.ipynb' (its ledger is lab1.gradcheck.jsonl beside it) "
    "or ledger='lab1.gradcheck.jsonl'"
)


class LedgerLocationMissing(ValueError):
    """No ledger could be located; the one-line message says how to name one."""

    code = "ledger_location_missing"


def session_notebook() -> Path | None:
    """The notebook this kernel was started for by Jupyter Server, if any."""
    session = os.environ.get(SESSION_VARIABLE, "").strip()
    return Path(session) if session.endswith(".ipynb") else None


def open_ledger(notebook: str | os.PathLike | None = None, ledger: str | os.PathLike | None = None) -> Ledger:
    """The ledger named by `ledger=`, else beside `notebook=`, else beside the session's notebook.

    Raises LedgerLocationMissing, saying how to give a location, when none is known.
    """
    open_notebook = session_notebook()
    if ledger is not None:
        path = Path(ledger).expanduser()
        beside_open = open_notebook is not None and _same(ledger_path_for(open_notebook), path)
        return Ledger(path, bind=not beside_open)
    if notebook is not None:
        path = Path(notebook).expanduser()
        if path.suffix != ".ipynb":
            raise LedgerLocationMissing(f"notebook={str(notebook)!r} is not a notebook (.ipynb); {HOW_TO_GIVE_ONE}")
        is_open = open_notebook is not None and _same(open_notebook, path)
        return Ledger.for_notebook(path, bind=not is_open)
    if open_notebook is not None:
        return Ledger.for_notebook(open_notebook, bind=False)
    session = os.environ.get(SESSION_VARIABLE, "").strip()
    if session:
        reason = f"{SESSION_VARIABLE}={session!r} is not a notebook (.ipynb)"
    else:
        reason = f"{SESSION_VARIABLE} is unset, so this kernel was not started for a notebook by Jupyter Server"
    raise LedgerLocationMissing(f"no ledger location: {reason}; {HOW_TO_GIVE_ONE}")


def _same(a: Path, b: Path) -> bool:
    return os.path.abspath(a) == os.path.abspath(b)
