"""Copying across a class: 300 submissions, three of them copies, each made a different way.

Given a class folder of 300 real ledgers (tests/grading/class_folder.py) where three students
handed in a classmate's ledger (a byte copy, a copy continued with a run of their own, and a copy
re-chained under a fresh ledger id), when the folder is exported as the per-submission CSV and
verified, then exactly those three pairs are flagged, each with the way it shares the ledger,
and no other student is named.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import class_folder as cf
import pytest

from jupyterlab_gradcheck.core.report.grading import to_submission_csv
from jupyterlab_gradcheck.core.report.html_export import to_html
from jupyterlab_gradcheck.core.report.submissions import collect

pytestmark = pytest.mark.slow
SIZE = 300


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, list]:
    root = tmp_path_factory.mktemp("class")
    return root, cf.make_class(root, SIZE)


def test_three_copied_pairs_are_flagged_and_no_other(folder):
    """Given the 300-submission folder, when it is collected and written as the per-submission
    CSV, then shared_with names exactly the three copiers and their sources, each the other,
    with the ways they share; and the time per submission is printed for benchmarks/results.md."""
    root, copies = folder
    started = time.perf_counter()
    submissions = collect([str(root)])
    elapsed = time.perf_counter() - started
    rows = list(csv.DictReader(io.StringIO(to_submission_csv(submissions))))
    shared = {row["student_id"]: row["shared_with"] for row in rows if row["shared_with"]}
    expected = {}
    for copier, source, _way in copies:
        expected[copier], expected[source] = source, copier
    assert (len(rows), shared) == (SIZE, expected)
    ways = {s["student"]: s["shared_with"][0]["how"] for s in submissions if s["shared_with"]}
    assert [ways[copier] for copier, _source, _way in copies] == [
        ["ledger_id", "entry_hash", "identical_run"],
        ["ledger_id", "entry_hash"],
        ["identical_run"],
    ]
    print(
        f"\n{SIZE} submissions collected with copy detection in {elapsed:.2f} s ({elapsed / SIZE * 1000:.1f} ms each)"
    )


def test_verify_names_each_pair_and_exits_1(folder):
    """Given the same folder, when `jupyter gradcheck verify` reads it, then it prints one
    'shared ledger' line per copied pair, naming both students, and exits 1 (a finding)."""
    root, copies = folder
    completed = subprocess.run(
        [str(Path(sys.executable).with_name("jupyter-gradcheck")), "verify", str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        env={"LANGUAGE": "en", "PATH": str(Path(sys.executable).parent)},
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("shared ledger: ")]
    named = sorted(tuple(line.split(" (")[0].removeprefix("shared ledger: ").split(" and ")) for line in lines)
    assert (completed.returncode, named) == (1, sorted((source, copier) for copier, source, _way in copies))


def test_verify_json_names_the_pairs(folder):
    """Given the same folder, when `verify --json` reads it, then its answer carries `shared`:
    the three pairs, each with both students and the ways they share, and exits 1."""
    root, copies = folder
    completed = subprocess.run(
        [str(Path(sys.executable).with_name("jupyter-gradcheck")), "verify", str(root), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        env={"LANGUAGE": "en", "PATH": str(Path(sys.executable).parent)},
    )
    shared = json.loads(completed.stdout)["shared"]
    assert (completed.returncode, [pair["students"] for pair in shared]) == (
        1,
        [[source, copier] for copier, source, _way in copies],
    )


def test_the_html_export_lists_the_pairs(folder):
    """Given the same folder, when it is exported as HTML, then its "Shared ledgers" section
    lists exactly the three pairs, each source and copier with the ways they share."""
    root, copies = folder
    page = to_html(collect([str(root)]), language="en")
    section = page.split('<section class="shared">', 1)[1].split("</section>", 1)[0]
    items = [item.removesuffix("</ul>").removesuffix("</li>") for item in section.split("<li>")[1:]]
    expected = {
        "byte copy": "ledger_id, entry_hash, identical_run",
        "continued": "ledger_id, entry_hash",
        "re-chained": "identical_run",
    }
    assert items == [f"{source} · {copier}: {expected[way]}" for copier, source, way in copies]
