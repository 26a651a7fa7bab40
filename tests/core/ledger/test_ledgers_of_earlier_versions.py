"""Ledgers written by earlier versions still verify, replay, and reproduce bit for bit.

tests/fixtures/ledgers-0.4.0 holds ledgers written by version 0.4.0 (before its modules were merged
into rooms by concept): a CLI run of the eight checks in lab1.specs.json, with a tolerance widened
after a failure and stored values in the blob store beside it, and three checks of Python callables
(lab2_written_by.py.txt wrote them). Whatever the code's layout, these must keep reading the same.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from jupyterlab_gradcheck.core.ledger.verify import verify_path
from jupyterlab_gradcheck.core.run import run_spec
from jupyterlab_gradcheck.core.values.blobs import store_dir_for
from jupyterlab_gradcheck.core.values.tensors import reading_store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ledgers-0.4.0"


@pytest.fixture
def ledgers(tmp_path) -> Path:
    """A copy of the fixture folder (verify and replay must not need to write, but a copy keeps the
    committed files safe whatever they do)."""
    return Path(shutil.copytree(FIXTURES, tmp_path / "ledgers"))


def _entries(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _numbers(record: dict) -> dict:
    """What a verdict rests on, as the record writes it: the observed gradient, the verdict, the
    failure's diagnosis and element, and every comparison's errors and outcome."""
    failure = record.get("failure") or {}
    return {
        "observed_gradient": record["observed_gradient"],
        "passed": record["passed"],
        "failure": (failure.get("diagnosis"), failure.get("index"), failure.get("comparison")),
        # sorted: the ledger stores a record's inputs with their keys sorted (canonical JSON), so a check of
        # inputs declared as x, w is re-run as w, x; each row is the same, named by its input
        "comparisons": sorted(
            (row["name"], str(row.get("input")), row.get("max_abs_err"), row.get("max_rel_err"), row["passed"])
            for row in record["comparisons"]
        ),
        "finite_difference": record["observations"]["finite_difference"].get("gradients"),
    }


def test_the_ledgers_of_0_4_0_verify_and_replay(ledgers):
    """Given the two ledgers written by 0.4.0, when they are verified with replay,
    then both are ok: lab1's 17 entries with its widening flagged and 8 of 8 observations reproduced,
    lab2's 6 entries with its one expression reproduced and its two Python callables skipped."""
    first = verify_path(str(ledgers / "lab1.gradcheck.jsonl"), replay=True)["reports"][0]
    second = verify_path(str(ledgers / "lab2.gradcheck.jsonl"), replay=True)["reports"][0]
    assert (first["ok"], first["entries"], first["replay"]["reproduced"], first["replay"]["differs"]) == (
        True,
        17,
        8,
        [],
    )
    assert [flag["flag"] for flag in first["flags"]] == ["widened_after_failure"]
    assert (
        second["ok"],
        second["entries"],
        second["replay"]["reproduced"],
        [row["check_id"] for row in second["replay"]["skipped"]],
    ) == (
        True,
        6,
        1,
        ["cube_function", "dot"],
    )


def test_every_recorded_observation_of_0_4_0_reproduces_bit_for_bit(ledgers):
    """Given each observation lab1 recorded under 0.4.0, when its declared check is run again through
    the entry routine (reading its stored values from the blob store beside the ledger), then the observed
    gradient, the verdict, the failure and every comparison's errors are the same numbers exactly."""
    path = ledgers / "lab1.gradcheck.jsonl"
    entries = _entries(path)
    declared = {entry["seq"]: entry["data"] for entry in entries if entry["kind"] == "expectation"}
    observed = [entry["data"] for entry in entries if entry["kind"] == "observation"]
    assert len(observed) == 8
    with reading_store(store_dir_for(path)):
        for data in observed:
            again = run_spec(dict(declared[data["expectation_seq"]]), None).record
            assert _numbers(again) == _numbers(data["record"]), data["record"]["id"]
