"""A class of students for the cheating stories: each works as in JupyterLab (checks run from
the notebook, their attestations kept in the cells' outputs, the metadata bound on save), with a
witness configured, and then edits their files as a cheater would, offline."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

import nbformat

from jupyterlab_gradcheck.api import check_record
from jupyterlab_gradcheck.core.ledger.binding import MIME_TYPE, update_binding
from jupyterlab_gradcheck.core.ledger.store import Ledger, make_line, read_entry
from jupyterlab_gradcheck.witness import client as witness_client


@contextlib.contextmanager
def working_as(student: str, witness_url: str | None, token: str):
    """The environment of `student`'s kernel: their hub name and, when given, the witness."""
    saved = {
        key: os.environ.get(key)
        for key in ("JUPYTERHUB_USER", witness_client.URL_VARIABLE, witness_client.TOKEN_VARIABLE)
    }
    os.environ["JUPYTERHUB_USER"] = student
    if witness_url:
        os.environ[witness_client.URL_VARIABLE], os.environ[witness_client.TOKEN_VARIABLE] = witness_url, token
    else:
        os.environ.pop(witness_client.URL_VARIABLE, None)
    try:
        yield
        if witness_url and witness_client.client() is not None:
            assert witness_client.client().drain(30), "the witness did not take every report"
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class Notebook:
    """A student's notebook as JupyterLab keeps it: one code cell per check with its output."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.document = nbformat.v4.new_notebook(
            cells=[nbformat.v4.new_code_cell("from jupyterlab_gradcheck.api import check_record")]
        )
        self.save()

    def run(self, record: dict, **options):
        """Run a check from a new cell; its attestation (if any) is the cell's output."""
        result = check_record(record, notebook=str(self.path), **options)
        cell = nbformat.v4.new_code_cell(
            f"check_record({json.dumps(record)})", execution_count=len(self.document.cells)
        )
        if result.attestation is not None:
            cell.outputs = [
                nbformat.v4.new_output("display_data", data={MIME_TYPE: result.attestation, "text/plain": "attested"})
            ]
        self.document.cells.append(cell)
        return result

    def save(self) -> None:
        """Save as JupyterLab does: the document, with the ledger's head bound in its metadata."""
        nbformat.write(self.document, str(self.path))
        ledger = self.path.with_name(self.path.stem + ".gradcheck.jsonl")
        if ledger.exists():
            update_binding(self.path, Ledger(ledger))

    def clear_outputs(self) -> None:
        """What a cheater does to the attestations: Edit > Clear All Outputs, then save."""
        document = nbformat.read(str(self.path), as_version=4)
        for cell in document.cells:
            if cell.cell_type == "code":
                cell.outputs = []
        nbformat.write(document, str(self.path))


def rewrite(ledger: Path, keep=lambda entry: True, edit=lambda entry: None) -> None:
    """A careful forgery: keep some entries, edit some, renumber and recompute every hash."""
    out, prev, seq = [], None, -1
    for raw in ledger.read_bytes().split(b"\n")[:-1]:
        entry = read_entry(raw)
        if not keep(entry):
            continue
        entry.pop("hash")
        edit(entry)
        seq += 1
        entry["seq"] = seq
        if prev is not None:
            entry["prev"] = prev
            if entry["kind"] == "observation":
                entry["data"]["expectation_seq"] = _renumbered(out, entry)
        line, prev = make_line(entry)
        out.append(line)
    ledger.write_bytes(b"".join(out))


def _renumbered(lines: list[bytes], observation: dict) -> int:
    """The new seq of the last expectation of the observation's check among the kept lines."""
    for raw in reversed(lines):
        entry = json.loads(raw)
        if entry["kind"] == "expectation" and entry["check_id"] == observation["check_id"]:
            return entry["seq"]
    return observation["data"]["expectation_seq"]


def rebind(notebook: Path) -> None:
    """The cheater's last step: the notebook's metadata made to name the ledger as it is now."""
    update_binding(notebook, Ledger(notebook.with_name(notebook.stem + ".gradcheck.jsonl")))
