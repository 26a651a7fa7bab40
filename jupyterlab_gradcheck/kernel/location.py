"""Where the kernel's ledger lives.

A check run from a notebook belongs in that notebook's ledger, beside it. Inside Jupyter
Server the kernel learns its notebook from `JPY_SESSION_NAME` (the notebook's path); elsewhere
(a script, a console, a kernel started by hand) the caller names the notebook or the ledger
file. An explicit argument wins over the environment because it is what the user wrote.

A kernel never writes a notebook file: the one it runs for is held by an editor or by
nbconvert, which saves its own copy over whatever the kernel wrote. The binding travels instead
in each check's output (an attestation, core.ledger.attestation), which every saver keeps, and
JupyterLab's front end copies it into `metadata.gradcheck` through the notebook model.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.i18n import Message
from ..core.ledger.notebook_moves import forwarded_notebook
from ..core.ledger.store import Ledger

SESSION_VARIABLE = "JPY_SESSION_NAME"

HOW_TO_GIVE_ONE = Message(
    "pass notebook='lab1.ipynb' (its ledger is lab1.gradcheck.jsonl beside it) or ledger='lab1.gradcheck.jsonl'"
)


class LedgerLocationMissing(ValueError):
    """No ledger could be located; the one-line message says how to name one."""

    code = "ledger_location_missing"


def session_notebook() -> Path | None:
    """The notebook this kernel runs for in Jupyter Server, if any: where the server last said
    it was renamed to, else the one it was started for."""
    session = os.environ.get(SESSION_VARIABLE, "").strip()
    if not session.endswith(".ipynb"):
        return None
    return forwarded_notebook(connection_file()) or Path(session)


def connection_file() -> str | None:
    """This kernel's connection file, when running in an IPython kernel (ipykernel)."""
    try:
        from ipykernel.kernelapp import IPKernelApp
    except ImportError:
        return None
    if not IPKernelApp.initialized():
        return None
    return IPKernelApp.instance().abs_connection_file or None


def open_ledger(notebook: str | os.PathLike | None = None, ledger: str | os.PathLike | None = None) -> Ledger:
    """The ledger named by `ledger=`, else beside `notebook=`, else beside the session's notebook.

    Raises LedgerLocationMissing, saying how to give a location, when none is known.
    """
    open_notebook = session_notebook()
    if ledger is not None:
        return Ledger(Path(ledger).expanduser(), bind=False)
    if notebook is not None:
        path = Path(notebook).expanduser()
        if path.suffix != ".ipynb":
            raise LedgerLocationMissing(
                Message(
                    "notebook={notebook!r} is not a notebook (.ipynb); {how}",
                    notebook=str(notebook),
                    how=HOW_TO_GIVE_ONE,
                )
            )
        return Ledger.for_notebook(path, bind=False)
    if open_notebook is not None:
        return Ledger.for_notebook(open_notebook, bind=False)
    session = os.environ.get(SESSION_VARIABLE, "").strip()
    if session:
        reason = Message(
            "{variable}={session!r} is not a notebook (.ipynb)", variable=SESSION_VARIABLE, session=session
        )
    else:
        reason = Message(
            "{variable} is unset, so this kernel was not started for a notebook by Jupyter Server",
            variable=SESSION_VARIABLE,
        )
    raise LedgerLocationMissing(Message("no ledger location: {reason}; {how}", reason=reason, how=HOW_TO_GIVE_ONE))
