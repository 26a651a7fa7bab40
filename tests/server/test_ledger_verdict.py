"""`GET ledger` gives the panel the verdict `jupyter gradcheck verify` gives the grader."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jupyterlab_gradcheck.core.ledger.binding import update_binding
from jupyterlab_gradcheck.core.ledger.store import Ledger

JUPYTER = Path(sys.executable).with_name("jupyter")


def cli_verdict(notebook: Path) -> tuple:
    done = subprocess.run(
        [str(JUPYTER), "gradcheck", "verify", notebook.name, "--json"],
        cwd=notebook.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)["reports"][0]
    return done.returncode, report["ok"], report["binding_ok"], len(report["errors"]), len(report["warnings"])


def truncate_last_line(path: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        ("never saved with a binding", (0, True, False, 0, 1)),
        ("binding behind by one entry", (0, True, True, 0, 1)),
        ("binding current", (0, True, True, 0, 0)),
        ("ledger truncated under the binding", (1, False, False, 1, 0)),
    ],
)
async def test_get_ledger_and_verify_agree_on_a_notebooks_binding(api, lab1, jp_root_dir, state, expected):
    """Given lab1.ipynb and its ledger in one of four states, when the panel asks `GET ledger`
    and a grader runs `jupyter gradcheck verify`, then both give the same verdict (ok, binding_ok,
    how many errors and warnings): a binding only behind the ledger, or not yet saved, is OK with a
    warning for both, and only a ledger that lost a bound entry is an error."""
    notebook = jp_root_dir / lab1
    ledger = Ledger.for_notebook(notebook, bind=False)
    ledger.note("first")
    ledger.note("second")
    if state != "never saved with a binding":
        update_binding(notebook, ledger)
    if state == "binding behind by one entry":
        ledger.note("third")
    if state == "ledger truncated under the binding":
        truncate_last_line(ledger.path)

    status, _, view = await api("GET", "ledger", path=lab1)
    assert status == 200, view
    chain = view["chain"]
    panel = (0 if chain["ok"] else 1, chain["ok"], chain["binding_ok"], len(chain["errors"]), len(chain["warnings"]))
    assert panel == cli_verdict(notebook) == expected
