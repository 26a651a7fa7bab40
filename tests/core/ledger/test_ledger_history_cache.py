"""The light histories kept between reads (core/ledger/store.py): a later read decodes only
what was appended, and a ledger that was appended to by another writer, truncated, replaced
or rewritten in place is seen as it is now, exactly as a read from the first line sees it."""

from __future__ import annotations

import fcntl
import json
import os
import shutil

import pytest

from jupyterlab_gradcheck.core.errors import LedgerError, SpecError
from jupyterlab_gradcheck.core.ledger import store
from jupyterlab_gradcheck.core.ledger import store as reader
from jupyterlab_gradcheck.core.ledger.store import Ledger, make_line, now_utc
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file
from jupyterlab_gradcheck.core.run import run_and_record
from support.ledger import JUSTIFICATION, lines_of, rechain, write_lines

SQUARE = {"id": "square", "function": "x*x", "x": 3, "analytical_gradient": 6}
CUBE_WRONG = {"id": "cube", "function": "x*x*x", "x": 2, "analytical_gradient": 6}


def _from_first_line(ledger: Ledger) -> dict:
    """Every check's light history read from the first line, without the kept state."""
    with ledger.locked_fd(exclusive=False):
        return ledger.history_from_first_line().checks


def _ledger(tmp_path, name="a", runs=((SQUARE, 2),)) -> Ledger:
    ledger = Ledger(tmp_path / f"{name}.gradcheck.jsonl")
    for spec, count in runs:
        for _ in range(count):
            run_and_record(spec, ledger, sweep=False)
    return ledger


def test_a_read_after_appends_matches_a_read_from_the_first_line(tmp_path):
    """Given a ledger read once, when two more runs, a failing check and a justified tolerance
    change are appended (the last through a second Ledger object, as another writer would),
    then the next read equals a read from the first line: 3 runs of the square, the cube's
    kept failure and its new tolerance."""
    ledger = _ledger(tmp_path)
    assert ledger.history("square")["runs"] == 2
    run_and_record(SQUARE, ledger, sweep=False)
    run_and_record(CUBE_WRONG, ledger, sweep=False)
    Ledger(ledger.path).change_tolerance("cube", rtol=0.9, justification=JUSTIFICATION)
    checks = ledger.checks(records=False)
    assert checks == _from_first_line(ledger)
    assert checks["square"]["runs"] == 3 and checks["square"]["observation_seqs"] == [2, 4, 6]
    assert len(checks["cube"]["failures_kept"]) == 1 and checks["cube"]["tolerance"]["rtol"] == 0.9
    assert ledger.history("cube") == checks["cube"]


def test_a_truncated_ledger_is_read_again_from_its_first_line(tmp_path):
    """Given a ledger of 3 runs read once, when it is cut back to its first run (same file),
    then the next read reports 1 run, as a read from the first line does."""
    ledger = _ledger(tmp_path, runs=((SQUARE, 3),))
    assert ledger.history("square")["runs"] == 3
    write_lines(ledger.path, lines_of(ledger.path)[:3])  # the genesis entry and the first run
    assert ledger.history("square")["runs"] == 1
    assert ledger.checks(records=False) == _from_first_line(ledger)


def test_a_replaced_ledger_is_read_as_the_new_file(tmp_path):
    """Given a ledger of 2 square runs read once, when another ledger (1 cube run) is moved
    over it, then the next read knows only the cube."""
    ledger = _ledger(tmp_path)
    assert set(ledger.checks(records=False)) == {"square"}
    other = _ledger(tmp_path, "b", runs=((CUBE_WRONG, 1),))
    os.replace(other.path, ledger.path)
    checks = ledger.checks(records=False)
    assert set(checks) == {"cube"} and checks["cube"]["runs"] == 1
    assert checks == _from_first_line(ledger)


def test_a_ledger_rewritten_in_place_is_read_again(tmp_path):
    """Given a ledger read once, when it is forged in place at the same size (its first
    expectation's rtol 1e-07 made 3e-07 and every hash recomputed, which changes its last
    line), then the next read sees the forged rtol as an unjustified change, as a read from
    the first line does."""
    ledger = _ledger(tmp_path)
    assert ledger.history("square")["unjustified_tolerance_changes"] == []

    def edit(entry):
        if entry["seq"] == 1:
            entry["data"]["tolerance"]["rtol"] = 3e-07

    size = os.stat(ledger.path).st_size
    rechain(ledger.path, edit)
    assert os.stat(ledger.path).st_size == size
    history = ledger.history("square")
    assert [(change["old"]["rtol"], change["new"]["rtol"]) for change in history["unjustified_tolerance_changes"]] == [
        (3e-07, 1e-07)
    ]
    assert ledger.checks(records=False) == _from_first_line(ledger)


def test_a_same_size_rewrite_with_a_new_mtime_is_read_again(tmp_path):
    """Given a ledger read once, when a digit of its first expectation's rtol is changed in
    place (same size, last line untouched) and the file gets a new modification time, then
    the next read is from the first line and reports the forged rtol 2e-07."""
    ledger = _ledger(tmp_path)
    assert ledger.history("square")["unjustified_tolerance_changes"] == []
    before = os.stat(ledger.path)
    lines = lines_of(ledger.path)
    assert b'"rtol":1e-07' in lines[1]  # line 1 is the genesis entry, then the expectation
    lines[1] = lines[1].replace(b'"rtol":1e-07', b'"rtol":2e-07')
    with open(ledger.path, "r+b") as handle:
        handle.write(b"".join(line + b"\n" for line in lines))
    os.utime(ledger.path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))
    history = ledger.history("square")
    assert [change["old"]["rtol"] for change in history["unjustified_tolerance_changes"]] == [2e-07]
    assert ledger.checks(records=False) == _from_first_line(ledger)


def test_a_torn_tail_is_read_once_it_is_completed(tmp_path):
    """Given a ledger whose last run's observation is missing its newline (a torn write),
    when it is read, then that run is not counted; when the next append seals it (the entry
    is complete, so only the newline is added), then it is counted, with the new run too."""
    ledger = _ledger(tmp_path)
    raw = ledger.path.read_bytes()
    ledger.path.write_bytes(raw[:-1])  # the last observation without its newline
    reader.forget_histories()
    assert ledger.history("square")["runs"] == 1
    run_and_record(SQUARE, ledger, sweep=False)
    assert ledger.history("square")["runs"] == 3
    assert ledger.checks(records=False) == _from_first_line(ledger)


def test_histories_handed_out_are_copies(tmp_path):
    """Given a history read from the kept state, when the caller edits it, then the next
    read still reports the ledger's own values."""
    ledger = _ledger(tmp_path)
    history = ledger.history("square")
    history["observation_seqs"].append(99)
    history["tolerance"]["rtol"] = 1.0
    ledger.checks(records=False)["square"]["expectation"]["analytical_gradient"] = 7
    again = ledger.history("square")
    assert again["observation_seqs"] == [2, 4] and again["tolerance"]["rtol"] == 1e-07
    assert again["expectation"]["analytical_gradient"] == 6


def test_a_missing_ledger_has_no_history_and_only_a_few_files_are_kept(tmp_path):
    """Given no ledger file, then there is no history; given more ledgers than KEPT_LEDGERS
    read in turn, then only that many are kept, and the first is read again correctly."""
    assert Ledger(tmp_path / "none.gradcheck.jsonl").history("square") is None
    assert Ledger(tmp_path / "none.gradcheck.jsonl").checks(records=False) == {}
    first = _ledger(tmp_path, "first", runs=((SQUARE, 1),))
    first.history("square")
    for index in range(reader.KEPT_LEDGERS):
        copy = tmp_path / f"copy{index}.gradcheck.jsonl"
        shutil.copyfile(first.path, copy)
        assert Ledger(copy).history("square")["runs"] == 1
    assert reader.kept_count() == reader.KEPT_LEDGERS
    assert first.history("square")["runs"] == 1


# ------------------------------------------------------------- the head kept for appends
def _read_then_append_raw(tmp_path, raw: bytes) -> Ledger:
    """A ledger of 2 square runs that this process has read, then `raw` appended to its file
    by another writer (not through this process's Ledger)."""
    ledger = _ledger(tmp_path)
    assert ledger.history("square")["runs"] == 2
    with open(ledger.path, "ab") as handle:
        handle.write(raw)
    return ledger


def test_appends_after_a_read_chain_on_the_kept_head_without_reading_the_tail(tmp_path, monkeypatch):
    """Given a ledger this process has read, when two more checks run, then neither append
    reads the file's end (the head is known from the kept state), the entries chain (each
    prev is the hash before it) and verify passes."""
    ledger = _ledger(tmp_path)
    ledger.history("square")
    calls = []
    original = store.read_head
    monkeypatch.setattr(store, "read_head", lambda fd, path: calls.append(fd) or original(fd, path))
    run_and_record(SQUARE, ledger, sweep=False)
    run_and_record(CUBE_WRONG, ledger, sweep=False)
    assert calls == []
    entries = ledger.entries()
    assert [e["seq"] for e in entries] == list(range(0, 9))
    assert all(later["prev"] == earlier["hash"] for earlier, later in zip(entries, entries[1:]))
    assert verify_ledger_file(ledger.path)["ok"]


def test_an_entry_appended_by_another_writer_becomes_the_head(tmp_path):
    """Given a ledger this process has read, when another writer appends a valid note, then
    the next append here chains onto that note (seq 6, prev = its hash) and verify passes."""
    ledger = _ledger(tmp_path)
    ledger.history("square")
    last = json.loads(lines_of(ledger.path)[-1])
    line, digest = make_line(
        {
            "seq": 5,
            "time": now_utc(),
            "kind": "note",
            "check_id": None,
            "data": {"text": "from another process"},
            "prev": last["hash"],
        }
    )
    with open(ledger.path, "ab") as handle:
        handle.write(line)
    entry = ledger.note("here")
    assert (entry["seq"], entry["prev"]) == (6, digest)
    assert verify_ledger_file(ledger.path)["ok"]


def test_a_torn_tail_after_a_read_is_sealed_by_the_next_append(tmp_path):
    """Given a ledger this process has read, when another writer leaves half an entry
    (no newline), then the next append keeps those bytes, seals them with a note naming
    line 6 (after the genesis entry and 2 runs), and verify passes with that sealed write."""
    line, _ = make_line(
        {
            "seq": 5,
            "time": "t",
            "kind": "note",
            "check_id": None,
            "data": {"text": "lost in the crash"},
            "prev": "0" * 64,
        }
    )
    torn = line[: len(line) // 2]
    ledger = _read_then_append_raw(tmp_path, torn)
    entry = ledger.note("after the crash")
    seal = json.loads(lines_of(ledger.path)[6])
    assert seal["data"]["event"] == "torn_tail_sealed" and seal["data"]["lines"][0]["line"] == 6
    assert (entry["seq"], entry["prev"]) == (6, seal["hash"])
    report = verify_ledger_file(ledger.path)
    assert report["ok"], report["errors"]
    assert report["sealed"] == [{"line": 6, "bytes": len(torn), "sealed_by": 7}]  # the note is line 7


def test_an_invalid_last_line_after_a_read_refuses_the_append(tmp_path):
    """Given a ledger this process has read, when another writer adds a complete line that
    is not an entry, then the next append is refused with a LedgerError and writes nothing."""
    ledger = _read_then_append_raw(tmp_path, b'{"not": "an entry"}\n')
    size = os.stat(ledger.path).st_size
    with pytest.raises(LedgerError, match="not a valid entry"):
        ledger.note("refused")
    assert os.stat(ledger.path).st_size == size


# ------------------------------------------------- reading and declaring under one lock
def _can_lock(path) -> bool:
    """Whether another open file description gets the exclusive flock right now."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def test_a_held_ledger_keeps_other_writers_out_until_the_block_ends(tmp_path):
    """Given a ledger held with `locked()`, when another writer tries to lock it, then it is
    kept out while the block runs (in which the history reads 2 runs and an expectation is
    appended as seq 5), and gets the lock once the block has ended."""
    ledger = _ledger(tmp_path)
    with ledger.locked() as held:
        assert not _can_lock(ledger.path)
        assert held.history("square")["runs"] == 2
        entry = held.record_expectation(dict(json.loads(lines_of(ledger.path)[1])["data"]))
    assert entry["seq"] == 5 and entry["kind"] == "expectation"
    assert _can_lock(ledger.path)
    assert verify_ledger_file(ledger.path)["ok"]


def test_a_refused_rerun_writes_nothing_and_releases_the_lock(tmp_path):
    """Given a ledger of the square whose tolerance is rtol 1e-07, when a re-run writes rtol
    1e-03 explicitly, then it is refused with a SpecError naming the ledger's tolerance,
    the file is unchanged and the lock is free again."""
    ledger = _ledger(tmp_path)
    before = ledger.path.read_bytes()
    with pytest.raises(SpecError, match="differs from the ledger's current"):
        run_and_record({**SQUARE, "tolerance": {"rtol": 1e-3, "atol": 1e-10}}, ledger, sweep=False)
    assert ledger.path.read_bytes() == before
    assert _can_lock(ledger.path)


def test_a_rerun_with_a_new_derivation_records_the_change_under_the_same_lock(tmp_path):
    """Given a ledger of the square expecting 6, when it is re-run expecting 7, then an
    expectation_change (via rerun, after_observation true) precedes the new expectation,
    and the history reports 7."""
    ledger = _ledger(tmp_path)
    run_and_record({**SQUARE, "analytical_gradient": 7}, ledger, sweep=False)
    kinds = [entry["kind"] for entry in ledger.entries()]
    assert kinds[5:] == ["expectation_change", "expectation", "observation"]  # after genesis and 2 runs
    change = ledger.entries()[5]["data"]
    assert (change["old"], change["new"], change["via"], change["after_observation"]) == (6, 7, "rerun", True)
    assert ledger.history("square")["analytical_gradient"] == 7


def test_an_expectation_written_here_is_kept_as_reading_it_back_would_give(tmp_path):
    """Given a ledger this process has read, when expectations are appended whose data holds
    nested lists, non-ASCII text, -0.0, a large integer, NaN (stored as "NaN"), a tuple,
    and an int and a str subclass, then the kept history equals a read from the first line,
    value for value and type for type (the subclasses come back as plain int and str)."""

    class Level(int):
        pass

    class Label(str):
        pass

    ledger = _ledger(tmp_path)
    ledger.history("square")
    rich = {
        "id": "rich",
        "inputs": {"w": [[1.5, -0.0], [2**70, 3]]},
        "origin": "∂f/∂w",
        "analytical_gradient": [float("nan"), (1, 2)],
        "tolerance": {"rtol": 1e-07, "atol": 0.0},
        "finite_difference": {"rtol": 1e-06, "atol": 1e-09},
    }
    ledger.append("expectation", "rich", rich)
    ledger.append("expectation", "odd", {**rich, "id": "odd", "level": Level(3), "origin": Label("hand")})
    kept, read = ledger.checks(records=False), _from_first_line(ledger)
    assert kept == read
    assert kept["rich"]["expectation"]["analytical_gradient"] == ["NaN", [1, 2]]
    assert repr(kept["rich"]["expectation"]["inputs"]["w"][0][1]) == "-0.0"
    odd = kept["odd"]["expectation"]
    assert (type(odd["level"]), type(odd["origin"]), odd["level"], odd["origin"]) == (int, str, 3, "hand")
