"""Where the in-kernel surfaces find the ledger: the session's notebook, or what the user names."""

from __future__ import annotations

import json

import nbformat
import pytest

from jupyterlab_gradcheck.kernel.kernel_run import run_in_kernel
from jupyterlab_gradcheck.kernel.location import LedgerLocationMissing, open_ledger

SEED = {"function": "x*x", "x": 3, "analytical_gradient": 6}


def test_the_session_notebook_names_the_ledger_beside_it(tmp_path, monkeypatch):
    """Given a kernel that Jupyter Server started for work/lab1.ipynb,
    when no location is named, the ledger is work/lab1.gradcheck.jsonl, and the open
    notebook's metadata is left to the frontend that saves it."""
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "work" / "lab1.ipynb"))
    ledger = open_ledger()
    assert ledger.path == tmp_path / "work" / "lab1.gradcheck.jsonl"
    assert ledger.bind is False


def test_an_explicit_argument_wins_over_the_session(tmp_path, monkeypatch):
    """Given a session notebook, when notebook= or ledger= is given, that is what is used."""
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "lab1.ipynb"))
    assert open_ledger(notebook=tmp_path / "other.ipynb").path == tmp_path / "other.gradcheck.jsonl"
    assert open_ledger(ledger=tmp_path / "x.jsonl").path == tmp_path / "x.jsonl"
    assert open_ledger(notebook=tmp_path / "n.ipynb", ledger=tmp_path / "y.jsonl").path == tmp_path / "y.jsonl"


@pytest.mark.parametrize("session, reason", [
    (None, "JPY_SESSION_NAME is unset"),
    ("console-1", "JPY_SESSION_NAME='console-1' is not a notebook (.ipynb)"),
])
def test_without_a_location_the_message_says_how_to_give_one(monkeypatch, session, reason):
    """Given a kernel outside a notebook session, when no location is named,
    then a one-line message gives the reason and both ways to name one."""
    if session is None:
        monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    else:
        monkeypatch.setenv("JPY_SESSION_NAME", session)
    with pytest.raises(LedgerLocationMissing) as raised:
        open_ledger()
    message = str(raised.value)
    assert message.startswith(f"no ledger location: {reason}")
    assert "notebook='lab1.ipynb'" in message and "ledger='lab1.gradcheck.jsonl'" in message
    assert "\n" not in message


def test_a_notebook_argument_must_be_a_notebook(tmp_path):
    """Given notebook='lab1.py', when opened, the message says it is not a notebook."""
    with pytest.raises(LedgerLocationMissing, match=r"notebook='.*lab1.py' is not a notebook \(.ipynb\)"):
        open_ledger(notebook=tmp_path / "lab1.py")


def test_a_named_closed_notebook_gets_its_binding_but_the_open_one_does_not(tmp_path, monkeypatch):
    """Given lab1.ipynb open in this session and hw.ipynb closed on disk,
    when a check is recorded for each,
    then hw.ipynb's metadata names its ledger and head (the core's binding), while lab1.ipynb's
    file is not rewritten from the kernel."""
    for name in ("lab1.ipynb", "hw.ipynb"):
        nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / name))
    before = (tmp_path / "lab1.ipynb").read_bytes()
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "lab1.ipynb"))

    run_in_kernel(SEED, open_ledger())
    run_in_kernel(SEED, open_ledger(notebook=tmp_path / "hw.ipynb"))

    assert (tmp_path / "lab1.ipynb").read_bytes() == before
    binding = json.loads((tmp_path / "hw.ipynb").read_text())["metadata"]["gradcheck"]
    assert (binding["ledger"], binding["entries"]) == ("hw.gradcheck.jsonl", 2)
