"""API paths stay inside the server root: traversal, absolute paths and symbolic links out."""

from __future__ import annotations

import csv
import hashlib
import io
import os
from pathlib import Path

import nbformat
import pytest

SECRET = "secret-outside-the-root-7f3a"
SEED = {"function": "x*x", "x": 3, "analytical_gradient": 6}


def _snapshot(folder: Path) -> dict:
    """Every file under `folder` with its size, modification time and SHA-256."""
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def outside(tmp_path, jp_root_dir, lab1) -> Path:
    """A folder beside the root holding a notebook and a ledger, reachable only through
    links from inside the root: `escape/` (a folder link) and work/lab2.gradcheck.jsonl
    (a ledger link beside a real notebook)."""
    folder = tmp_path / "outside"
    folder.mkdir()
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["note"] = SECRET
    nbformat.write(notebook, str(folder / "victim.ipynb"))
    (folder / "stolen.gradcheck.jsonl").write_text(SECRET + "\n")
    root = Path(jp_root_dir)
    os.symlink(folder, root / "escape")
    nbformat.write(nbformat.v4.new_notebook(), str(root / "work" / "lab2.ipynb"))
    os.symlink(folder / "stolen.gradcheck.jsonl", root / "work" / "lab2.gradcheck.jsonl")
    bound = nbformat.v4.new_notebook()  # a notebook whose binding names a ledger outside
    bound.metadata["gradcheck"] = {"ledger": "../../outside/stolen.gradcheck.jsonl", "entries": 1, "head": "0" * 64}
    (root / "graded").mkdir()
    nbformat.write(bound, str(root / "graded" / "lab3.ipynb"))
    return folder


REFUSED = [
    ("../../etc/passwd", 400, "bad_path"),
    ("work/../../outside/victim.ipynb", 400, "bad_path"),
    ("/etc/passwd", 400, "bad_path"),
    (None, 400, "bad_path"),  # replaced by the absolute path of the outside notebook
    ("escape/victim.ipynb", 403, "path_forbidden"),
    ("work/lab2.ipynb", 403, "path_forbidden"),
]


async def test_paths_leaving_the_root_are_refused_and_nothing_outside_is_touched(api, outside, jp_root_dir):
    """Given a notebook and a ledger outside the server root, reachable through '..', an
    absolute path or a symbolic link,
    when every route that takes a path is asked for them,
    then each request is refused (400 for '..' and absolute paths, 403 for links that
    leave the root); a folder's verify and export answer 200 with each file that leads outside
    reported on its own as not read (one student's link never blocks a class); no answer
    carries the outside files' content, and no file outside the root is created or changed."""
    before = _snapshot(outside)
    answers = []
    for given, expected_status, code in REFUSED:
        notebook = str(outside / "victim.ipynb") if given is None else given
        requests = [
            ("POST", "checks", {"notebook": notebook, "check": SEED}, {}),
            ("GET", "ledger", None, {"path": notebook}),
            ("POST", "tolerance", {"notebook": notebook, "check_id": "c", "rtol": 1e-6, "justification": "j"}, {}),
            (
                "POST",
                "expectation",
                {"notebook": notebook, "check_id": "c", "analytical_gradient": 6, "justification": "j"},
                {},
            ),
            ("GET", "export", None, {"path": notebook, "format": "json"}),
            ("POST", "verify", {"path": notebook}, {}),
        ]
        for method, route, body, query in requests:
            status, _, payload = await api(method, route, body, **query)
            answers.append(payload)
            assert (status, payload["code"]) == (expected_status, code), (method, route, notebook, payload)
    for method, route, body, query in (
        ("GET", "export", None, {"path": "escape", "format": "csv"}),
        ("POST", "verify", {"path": "escape"}, {}),
    ):
        status, _, payload = await api(method, route, body, **query)  # the folder itself is a link out
        answers.append(payload)
        assert (status, payload["code"]) == (403, "path_forbidden"), (route, payload)
    for folder, refused in (
        ("graded", {"graded/lab3.ipynb"}),  # a binding naming a ledger outside
        (".", {"graded/lab3.ipynb", "work/lab2.ipynb"}),
    ):  # escape/ is a link: not walked
        status, _, report = await api("POST", "verify", {"path": folder})
        answers.append(report)
        assert status == 200, report
        not_read = {r["path"] for r in report["reports"] if r.get("refused")}
        assert not_read == refused, report
        for item in report["reports"]:
            if item.get("refused"):
                assert not item["ok"] and "leads outside the server root" in item["errors"][0]["reason"]
        status, _, text = await api("GET", "export", None, path=folder, format="csv")
        answers.append(text)
        assert status == 200, text
        rows = list(csv.DictReader(io.StringIO(text)))
        assert {r["notebook_id"] for r in rows if r["status"] == "verify_failed"} >= {
            p.rsplit("/", 1)[-1] for p in refused
        }

    assert all(SECRET not in str(answer) for answer in answers)
    assert _snapshot(outside) == before
    assert not (Path(jp_root_dir) / "escape" / "victim.gradcheck.jsonl").exists()
