"""A notebook renamed keeps its ledger and its blob store: the store folder moves with the ledger, or
merges into a folder already under the new name, and the moved ledger verifies.
"""

from __future__ import annotations

import os

import torch

from jupyterlab_gradcheck.api import check
from jupyterlab_gradcheck.core.ledger.binding import move_ledger
from jupyterlab_gradcheck.core.ledger.store import Ledger, ledger_path_for
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file
from jupyterlab_gradcheck.core.values.blobs import referenced_shas, store_dir_for
from jupyterlab_gradcheck.core.values.form import PENDING


def _checked(notebook, scale: float) -> list[str]:
    x = torch.linspace(0, 1, 500, dtype=torch.float64) * scale
    result = check(lambda x: (x * x).sum(), lambda x: 2 * x, x=x, ledger=ledger_path_for(notebook))
    return referenced_shas(result.record)


def test_a_rename_moves_the_store_with_the_ledger(tmp_path):
    """Given lab1's ledger with a check of 500 elements, when lab1 is renamed lab2, then lab2's ledger has
    the store lab2.gradcheck.blobs with every blob, lab1's store is gone, and the moved ledger verifies."""
    shas = _checked(tmp_path / "lab1.ipynb", 1.0)
    PENDING.clear()
    moved = move_ledger(tmp_path / "lab1.ipynb", tmp_path / "lab2.ipynb")
    assert moved == tmp_path / "lab2.gradcheck.jsonl"
    assert not (tmp_path / "lab1.gradcheck.blobs").exists()
    assert sorted(os.listdir(tmp_path / "lab2.gradcheck.blobs")) == sorted(f"{sha}.safetensors" for sha in shas)
    report = verify_ledger_file(moved, with_notebook=False)
    assert report["ok"] and report["blob_errors"] == []


def test_a_rename_merges_into_a_store_already_there(tmp_path):
    """Given lab1's ledger with blobs and a leftover lab2.gradcheck.blobs holding one other blob and one of
    lab1's, when lab1 is renamed lab2, then the folder holds the union, the moved ledger verifies, and
    lab1's folder is gone."""
    shas = _checked(tmp_path / "lab1.ipynb", 1.0)
    leftover = store_dir_for(tmp_path / "lab2.gradcheck.jsonl")
    leftover.mkdir()
    kept = store_dir_for(ledger_path_for(tmp_path / "lab1.ipynb")) / f"{shas[0]}.safetensors"
    (leftover / kept.name).write_bytes(kept.read_bytes())
    (leftover / ("0" * 64 + ".safetensors")).write_bytes(b"other")
    PENDING.clear()
    moved = move_ledger(tmp_path / "lab1.ipynb", tmp_path / "lab2.ipynb")
    names = sorted(os.listdir(leftover))
    assert names == sorted({f"{sha}.safetensors" for sha in shas} | {"0" * 64 + ".safetensors"})
    assert not (tmp_path / "lab1.gradcheck.blobs").exists()
    assert verify_ledger_file(moved, with_notebook=False)["ok"]
    assert len(Ledger(moved).entries()) == 3  # genesis, expectation, observation: the same file
