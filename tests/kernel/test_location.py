"""Where the in-kernel surfaces find the ledger: the session's notebook, or what the user names."""

from __future__ import annotations

import nbformat
import pytest

from jupyterlab_gradcheck.core.ledger.binding import forwarding_path, remove_forwarding, write_forwarding
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.kernel import kernel_run as location
from jupyterlab_gradcheck.kernel.kernel_run import LedgerLocationMissing, open_ledger, run_attested

SEED = {"function": "x*x", "x": 3, "analytical_gradient": 6}


def test_the_session_notebook_names_the_ledger_beside_it(tmp_path, monkeypatch):
    """Given a kernel that Jupyter Server started for work/lab1.ipynb,
    when no location is named, the ledger is work/lab1.gradcheck.jsonl, and the open
    notebook's metadata is left to the frontend that saves it."""
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "work" / "lab1.ipynb"))
    ledger = open_ledger()
    assert ledger.path == tmp_path / "work" / "lab1.gradcheck.jsonl"
    assert ledger.bind is False


def test_a_forwarding_record_from_the_server_wins_over_the_stale_session_name(tmp_path, monkeypatch):
    """Given a kernel started for work/Untitled.ipynb (JPY_SESSION_NAME, never refreshed by a
    rename), when the server leaves the record that the notebook is now work/lab1.ipynb beside
    the kernel's connection file, then the next check's ledger is work/lab1.gradcheck.jsonl;
    with no record, or an unreadable one, it is Untitled's."""
    connection = tmp_path / "runtime" / "kernel-1234.json"
    connection.parent.mkdir()
    monkeypatch.setattr(location, "connection_file", lambda: str(connection))
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "work" / "Untitled.ipynb"))
    assert open_ledger().path == tmp_path / "work" / "Untitled.gradcheck.jsonl"

    record = write_forwarding(connection, tmp_path / "work" / "lab1.ipynb")
    assert record == forwarding_path(connection) == tmp_path / "runtime" / "kernel-1234.gradcheck-notebook.json"
    assert open_ledger().path == tmp_path / "work" / "lab1.gradcheck.jsonl"

    record.write_text("{not json", encoding="utf-8")
    assert open_ledger().path == tmp_path / "work" / "Untitled.gradcheck.jsonl"
    remove_forwarding(connection)
    assert not record.exists()
    assert open_ledger().path == tmp_path / "work" / "Untitled.gradcheck.jsonl"


def test_an_explicit_argument_wins_over_the_session(tmp_path, monkeypatch):
    """Given a session notebook, when notebook= or ledger= is given, that is what is used."""
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "lab1.ipynb"))
    assert open_ledger(notebook=tmp_path / "other.ipynb").path == tmp_path / "other.gradcheck.jsonl"
    assert open_ledger(ledger=tmp_path / "x.jsonl").path == tmp_path / "x.jsonl"
    assert open_ledger(notebook=tmp_path / "n.ipynb", ledger=tmp_path / "y.jsonl").path == tmp_path / "y.jsonl"


@pytest.mark.parametrize(
    "session, reason",
    [
        (None, "JPY_SESSION_NAME is unset"),
        ("console-1", "JPY_SESSION_NAME='console-1' is not a notebook (.ipynb)"),
    ],
)
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


def test_the_kernel_writes_no_notebook_and_attests_each_entry_instead(tmp_path, monkeypatch):
    """Given lab1.ipynb open in this session and hw.ipynb closed on disk (both mode 0644),
    when a check is recorded for each from the kernel,
    then neither notebook file is rewritten (same bytes, same mode: an editor or nbconvert holds
    it and would save over it), and each run attests its observation entry instead: the ledger's
    id, file name, the check, and the seq and hash that are in the ledger."""
    for name in ("lab1.ipynb", "hw.ipynb"):
        nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / name))
        (tmp_path / name).chmod(0o644)
    before = {name: (tmp_path / name).read_bytes() for name in ("lab1.ipynb", "hw.ipynb")}
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "lab1.ipynb"))

    attested = [
        run_attested(SEED, open_ledger())[1],
        run_attested(SEED, open_ledger(notebook=tmp_path / "hw.ipynb"))[1],
    ]

    for name, content in before.items():
        assert (tmp_path / name).read_bytes() == content
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o644
    for name, attestation in zip(("lab1", "hw"), attested):
        ledger = Ledger(tmp_path / f"{name}.gradcheck.jsonl")
        observation = ledger.entries()[-1]
        assert attestation == {
            "ledger_id": ledger.ledger_id(),
            "ledger": f"{name}.gradcheck.jsonl",
            "check_id": observation["check_id"],
            "seq": 2,
            "hash": observation["hash"],
        }
        assert observation["kind"] == "observation"
