"""Torn tails: an append interrupted by a crash is detected, reported, kept and sealed.

The policy (docs/ledger.md): bytes after the last newline are a torn tail. Readers skip it,
`verify` reports it (exit 1, naming the line), and nothing drops it. The next append keeps
the bytes in place: a complete entry that only lacks its newline gets the newline; anything
else is ended with a newline and followed by a `note` entry (event `torn_tail_sealed`) with
the line number, length and SHA-256 of the kept bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time

from jupyterlab_gradcheck.core.ledger.store import Ledger, LineError, make_line, now_utc, read_line
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file
from support.ledger import lines_of


def _ledger_with_notes(tmp_path, count=3) -> Ledger:
    ledger = Ledger(tmp_path / "a.gradcheck.jsonl")
    for i in range(count):
        ledger.append("note", None, {"text": f"note {i}"})
    return ledger


def test_partial_entry_is_reported_kept_and_sealed(tmp_path):
    """Given a ledger whose last append stopped half way (a partial line, no newline),
    when it is verified, then verify fails naming a torn tail on line 5 (after the genesis
    entry and three notes) and nothing else;
    when an entry is then appended, the partial bytes stay in the file, a seal note names
    their line, length and SHA-256, the new entry follows, and verify passes with a warning."""
    ledger = _ledger_with_notes(tmp_path)
    committed = ledger.path.read_bytes()
    line, _ = make_line(
        {
            "seq": 4,
            "time": "t",
            "kind": "note",
            "check_id": None,
            "data": {"text": "lost in the crash"},
            "prev": "0" * 64,
        }
    )
    torn = line[: len(line) // 2]
    ledger.path.write_bytes(committed + torn)

    report = verify_ledger_file(ledger.path)
    assert not report["ok"]
    assert report["torn_tail"]["line"] == 5 and report["torn_tail"]["complete_entry"] is False
    assert [(e["line"], e["reason"].split(":")[0]) for e in report["errors"]] == [(5, "torn tail")]
    assert [e["seq"] for e in ledger.entries()] == [0, 1, 2, 3]

    entry = ledger.append("note", None, {"text": "after the crash"})
    content = ledger.path.read_bytes()
    assert content.startswith(committed + torn + b"\n")
    seal = json.loads(lines_of(ledger.path)[5])
    assert seal["kind"] == "note" and seal["seq"] == 4
    assert seal["data"]["lines"] == [{"line": 5, "bytes": len(torn), "sha256": hashlib.sha256(torn).hexdigest()}]
    assert entry["seq"] == 5 and entry["prev"] == seal["hash"]

    report = verify_ledger_file(ledger.path)
    assert report["ok"], report["errors"]
    assert report["sealed"] == [{"line": 5, "bytes": len(torn), "sealed_by": 6}]
    assert any("interrupted write" in w for w in report["warnings"])


def test_complete_entry_missing_its_newline_is_kept_as_that_entry(tmp_path):
    """Given a crash after the whole entry but before its newline, when the next append runs,
    then only the newline is added: the interrupted entry becomes seq 4 and the new one seq 5."""
    ledger = _ledger_with_notes(tmp_path)
    head = json.loads(lines_of(ledger.path)[-1])
    line, digest = make_line(
        {
            "seq": 4,
            "time": now_utc(),
            "kind": "note",
            "check_id": None,
            "data": {"text": "almost"},
            "prev": head["hash"],
        }
    )
    ledger.path.write_bytes(ledger.path.read_bytes() + line[:-1])
    assert verify_ledger_file(ledger.path)["torn_tail"]["complete_entry"] is True

    entry = ledger.append("note", None, {"text": "next"})
    assert (entry["seq"], entry["prev"]) == (5, digest)
    assert [e["data"]["text"] for e in ledger.entries()][-2:] == ["almost", "next"]
    assert verify_ledger_file(ledger.path)["ok"]


def test_an_interrupted_seal_is_sealed_with_the_first_torn_write(tmp_path):
    """Given a torn write whose seal was itself interrupted (torn bytes, a newline, then a
    partial seal note), when the next append runs, then one seal note covers both kept lines
    and verify passes."""
    ledger = _ledger_with_notes(tmp_path)
    ledger.path.write_bytes(ledger.path.read_bytes() + b'{"check_id":null,"da' + b"\n" + b'{"check_id":nu')
    ledger.append("note", None, {"text": "recovered"})
    report = verify_ledger_file(ledger.path)
    assert report["ok"], report["errors"]
    assert [s["line"] for s in report["sealed"]] == [5, 6]


WRITER = """
import os, random, sys
from jupyterlab_gradcheck.core.ledger.store import Ledger
ledger, rng = Ledger(sys.argv[1]), random.Random(int(sys.argv[2]))
while True:
    # entries of up to 64 KB span several pages, so a kill can land inside one write()
    size = rng.choice([50, 5_000, 64_000])
    entry = ledger.append("note", None, {"pad": "x" * size})
    os.write(1, ("%d %s\\n" % (entry["seq"], entry["hash"])).encode())
"""


def test_sigkill_in_a_loop_of_appends_loses_no_committed_entry(tmp_path):
    """Given a writer process appending entries of mixed sizes in a loop,
    when it is killed with SIGKILL at a random moment, 100 times over the same ledger,
    then after every kill each entry the writer reported as committed (append returned) is
    in the file with its hash, verify reports nothing worse than a torn tail, and an append
    by the next writer works under the policy (the ledger verifies again, checked every
    tenth trial and at the end)."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    ledger = Ledger(tmp_path / "killed.gradcheck.jsonl")
    rng = random.Random(1234)
    committed: dict[int, str] = {}
    torn_tails = 0
    started = time.monotonic()
    for trial in range(100):
        writer = subprocess.Popen([sys.executable, str(script), str(ledger.path), str(trial)], stdout=subprocess.PIPE)
        writer.stdout.readline()  # it has committed at least one entry: it is in its loop
        time.sleep(rng.uniform(0.0, 0.02))
        os.kill(writer.pid, signal.SIGKILL)
        output = writer.communicate(timeout=30)[0]
        assert writer.returncode == -signal.SIGKILL
        for line in output.decode().splitlines():
            seq, digest = line.split()
            committed[int(seq)] = digest

        stored = {}
        for raw in lines_of(ledger.path):
            try:
                info = read_line(raw, check_hash=False, decode=False)  # verify checks the bytes
            except LineError:
                continue  # a kept torn write
            if not (info.data or {}).get("event") == "torn_tail_sealed":
                stored[info.seq] = info.hash
        missing = {seq for seq, digest in committed.items() if stored.get(seq) != digest}
        assert not missing, f"trial {trial}: committed entries lost: {sorted(missing)[:5]}"

        report = verify_ledger_file(ledger.path)
        problems = [e for e in report["errors"] if not e["reason"].startswith("torn tail")]
        assert not problems, f"trial {trial}: {problems[:3]}"
        torn_tails += report["torn_tail"] is not None
        entry = ledger.append("note", None, {"text": f"after kill {trial}"})
        committed[entry["seq"]] = entry["hash"]
        if trial % 10 == 9:  # the append sealed any torn tail: the ledger verifies again
            assert verify_ledger_file(ledger.path)["ok"]
    print(
        json.dumps(
            {
                "trials": 100,
                "torn_tails_seen": torn_tails,
                "entries": len(committed),
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    )
