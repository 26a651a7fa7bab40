"""A custom autograd Function defined in a notebook cell is named by its own source, executed by a real kernel.

`inspect.getsource` cannot find a class defined in a cell (its module, `__main__`, has no file),
but the kernel keeps every cell's text and the class's methods point to it. A student who checks
a wrong `MySin`, then fixes it in a later cell and checks it again, leaves two expectations of
one check in the ledger, each named by the hash of its own cell's class and each keeping that
text: the grader sees the expectation revised after it was observed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from jupyterlab_gradcheck.core.ledger.store import Ledger

JUPYTER = Path(sys.executable).with_name("jupyter")
#: Generous per-cell limit for a shared 2-core machine; the whole notebook runs in a few seconds.
CELL_TIMEOUT = 180

SETUP = """import torch
from jupyterlab_gradcheck.api import check

X = torch.linspace(-1.0, 1.0, 5, dtype=torch.float64)"""

#: The wrong derivation: the backward is 10% off.
WRONG = """class MySin(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 1.1 * torch.cos(x)"""

#: The same class, fixed.
FIXED = WRONG.replace("grad_output * 1.1 * torch.cos(x)", "grad_output * torch.cos(x)")

CHECK = """result = check(MySin, x=X, notebook="lab.ipynb")
print(json.dumps({"passed": result.passed, "origin": result.record["origin"], "id": result.record["id"]}))"""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """(folder, printed summaries of the two checks) after the notebook ran top to bottom in a real kernel."""
    from nbclient import NotebookClient

    folder = tmp_path_factory.mktemp("cells")
    cells = [SETUP + "\nimport json", WRONG, CHECK, FIXED, CHECK]
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(text) for text in cells])
    client = NotebookClient(
        notebook, timeout=CELL_TIMEOUT, kernel_name="python3", resources={"metadata": {"path": str(folder)}}
    )
    client.execute()
    nbformat.write(notebook, folder / "lab.ipynb")  # saved with its outputs, as nbconvert saves it
    printed = []
    for index in (2, 4):
        streams = [o["text"] for o in notebook.cells[index].outputs if o.get("name") == "stdout"]
        printed.append(json.loads([line for line in "".join(streams).splitlines() if line.startswith("{")][-1]))
    return folder, printed


def _expectations(folder: Path) -> list[dict]:
    lines = (folder / "lab.gradcheck.jsonl").read_text(encoding="utf-8").splitlines()
    return [entry["data"] for entry in map(json.loads, lines) if entry["kind"] == "expectation"]


def test_two_definitions_of_one_class_are_two_hashes_each_with_its_cells_text(executed):
    """Given a notebook that checks a wrong MySin, then defines a fixed MySin in a later cell and checks it,
    when a real kernel runs it into one ledger,
    then the wrong one fails and the fixed one passes under one check id, the two expectations name
    different hashes, and each expectation keeps its own cell's class text, whose SHA-256 it names."""
    folder, (first, second) = executed
    assert (first["passed"], second["passed"]) == (False, True)
    assert first["id"] == second["id"] == "MySin.apply@d0c15df7"
    wrong, fixed = _expectations(folder)
    for record, cell, printed in ((wrong, WRONG, first), (fixed, FIXED, second)):
        source = record["function_source"]
        assert source["text"] == cell
        assert (
            printed["origin"] == record["origin"] == f"the backward of __main__.MySin [sha256 {source['sha256'][:16]}]"
        )
    assert wrong["function_source"]["sha256"] != fixed["function_source"]["sha256"]
    assert "3abfe4e252957767" not in wrong["origin"] + fixed["origin"]  # torch's metaclass: the old constant


def test_the_revised_class_is_flagged_by_the_history_and_by_verify(executed):
    """Given the ledger of that notebook,
    when its history is read and `jupyter gradcheck verify` runs on the saved notebook,
    then the check's expectation was revised after its observation (seq 3, from the wrong class's
    name to the fixed one's), and verify exits 0 and names that flag."""
    folder, (first, second) = executed
    history = Ledger(folder / "lab.gradcheck.jsonl").checks()[first["id"]]
    assert history["expectation_revised_after_observation"] is True
    (change,) = history["expectation_changes"]
    assert change["after_observation"] is True
    assert (change["old"], change["new"]) == (
        {"x": f"<callable {first['origin']}>"},
        {"x": f"<callable {second['origin']}>"},
    )
    done = subprocess.run(
        [str(JUPYTER), "gradcheck", "verify", "lab.ipynb", "--json"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (report,) = json.loads(done.stdout)["reports"]
    assert report["flags"] == [
        {"check_id": first["id"], "flag": "expectation_revised_after_observation", "seqs": [change["seq"]]}
    ]
