"""A notebook renamed through the server keeps its one ledger, and its kernel follows it."""

from __future__ import annotations

import asyncio
import json
import os

import nbformat
import pytest

from jupyterlab_gradcheck.core.ledger.binding import MIME_TYPE, update_binding
from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.ledger.verify import verify_notebook

CHECK = 'from jupyterlab_gradcheck import check\ncheck("x*x", "2*x", x={x}, id="{id}")'


async def until(condition, what: str, limit: float = 10.0) -> None:
    """Poll `condition` (the server follows a rename in an event listener, just after it)."""
    for _ in range(int(limit / 0.05)):
        if condition():
            return
        await asyncio.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def new_notebook(path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), str(path))


def steps(entries: list[dict]) -> list[tuple]:
    return [(e["seq"], e["kind"], e["check_id"]) for e in entries]


async def test_a_notebook_renamed_on_its_first_save_keeps_one_ledger_and_its_kernel_follows(
    jp_root_dir, notebook_kernel, rename, api, ledger_lines
):
    """Given Untitled.ipynb whose kernel has checked `first` into Untitled.gradcheck.jsonl,
    when the notebook is renamed to lab1.ipynb as JupyterLab renames it on its first save
    (contents, then the session's path), the kernel (whose JPY_SESSION_NAME still names
    Untitled.ipynb) checks `second` and the panel's route checks `third`,
    then one ledger, lab1.gradcheck.jsonl with Untitled's ledger id, holds the three checks in
    order (seq 1 to 6) with its chain intact, and no ledger is left under the old name."""
    work = jp_root_dir / "work"
    new_notebook(work / "Untitled.ipynb")
    session, run = await notebook_kernel("work/Untitled.ipynb")
    assert (await run(CHECK.format(x=3.0, id="first")))[0] == "ok"
    old, moved = work / "Untitled.gradcheck.jsonl", work / "lab1.gradcheck.jsonl"
    ledger_id = Ledger(old).ledger_id()
    assert ledger_id

    await rename("work/Untitled.ipynb", "work/lab1.ipynb", session)
    await until(lambda: moved.is_file(), "the ledger to move")
    status, outputs = await run("import os\nprint(os.environ['JPY_SESSION_NAME'])\n" + CHECK.format(x=2.0, id="second"))
    assert status == "ok", outputs
    assert outputs[0]["text"].strip().endswith("Untitled.ipynb")  # the kernel was never told by its environment
    status, _, body = await api(
        "POST",
        "checks",
        {"notebook": "work/lab1.ipynb", "check": {"id": "third", "function": "x*x", "x": 1, "analytical_gradient": 2}},
    )
    assert status == 200, body

    assert steps(ledger_lines("work/lab1.gradcheck.jsonl")) == [
        (1, "expectation", "first"),
        (2, "observation", "first"),
        (3, "expectation", "second"),
        (4, "observation", "second"),
        (5, "expectation", "third"),
        (6, "observation", "third"),
    ]
    assert Ledger(moved).ledger_id() == ledger_id
    assert sorted(p.name for p in work.glob("*.gradcheck.jsonl")) == ["lab1.gradcheck.jsonl"]
    attested = [o["data"][MIME_TYPE] for o in outputs if MIME_TYPE in o.get("data", {})]
    assert [(a["ledger"], a["ledger_id"], a["seq"]) for a in attested] == [("lab1.gradcheck.jsonl", ledger_id, 4)]


async def test_a_folder_renamed_under_a_running_kernel_takes_its_next_check_along(
    jp_root_dir, notebook_kernel, rename, ledger_lines
):
    """Given hw/lab1.ipynb whose kernel has checked `first`, when its folder is renamed to hw1
    and the kernel checks `second`, then hw1/lab1.gradcheck.jsonl holds both checks (seq 1 to 4)
    and no hw folder came back."""
    new_notebook(jp_root_dir / "hw" / "lab1.ipynb")
    session, run = await notebook_kernel("hw/lab1.ipynb")
    assert (await run(CHECK.format(x=3.0, id="first")))[0] == "ok"
    await rename("hw", "hw1", None)
    await asyncio.sleep(0.2)  # the listener runs just after the rename; JupyterLab patches no session here
    assert (await run(CHECK.format(x=2.0, id="second")))[0] == "ok"
    assert [e["check_id"] for e in ledger_lines("hw1/lab1.gradcheck.jsonl")] == ["first", "first", "second", "second"]
    assert not (jp_root_dir / "hw").exists()


async def test_a_closed_notebook_renamed_in_the_file_browser_names_its_moved_ledger(jp_root_dir, api, rename):
    """Given a closed lab1.ipynb whose saved binding names lab1.gradcheck.jsonl (two entries),
    when the file browser renames it to final.ipynb,
    then final.gradcheck.jsonl is the ledger, the saved binding names it (nothing else in the
    file changed, its modification time included), and `verify` calls the notebook OK."""
    notebook = jp_root_dir / "work" / "lab1.ipynb"
    new_notebook(notebook)
    status, _, body = await api(
        "POST",
        "checks",
        {"notebook": "work/lab1.ipynb", "check": {"id": "sq", "function": "x*x", "x": 3, "analytical_gradient": 6}},
    )
    assert status == 200, body
    update_binding(notebook, Ledger.for_notebook(notebook))
    before = json.loads(notebook.read_text(encoding="utf-8"))
    mtime = os.stat(notebook).st_mtime_ns

    await rename("work/lab1.ipynb", "work/final.ipynb", None)
    final = jp_root_dir / "work" / "final.ipynb"
    await until(lambda: (jp_root_dir / "work" / "final.gradcheck.jsonl").is_file(), "the ledger to move")
    await until(lambda: '"final.gradcheck.jsonl"' in final.read_text(encoding="utf-8"), "the binding to follow")

    after = json.loads(final.read_text(encoding="utf-8"))
    before["metadata"]["gradcheck"]["ledger"] = "final.gradcheck.jsonl"
    assert after == before
    assert os.stat(final).st_mtime_ns == mtime
    report = verify_notebook(final)
    assert (report["ok"], report["binding_ok"], report["errors"]) == (True, True, [])
