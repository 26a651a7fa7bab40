"""Two processes appending to one ledger at the same time, as a kernel and the server can."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from jupyterlab_gradcheck.core.ledger.store import Ledger
from jupyterlab_gradcheck.core.ledger.verify import verify_ledger_file

WRITER = """
import os, sys, time
from jupyterlab_gradcheck.core.ledger.store import Ledger
ledger, name, count, go = Ledger(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
while not os.path.exists(go):
    time.sleep(0.001)
for i in range(count):
    ledger.append("note", None, {"writer": name, "i": i})
"""


def test_two_processes_append_1000_entries_each(tmp_path):
    """Given two writer processes released at the same moment,
    when each appends 1,000 entries to the same ledger,
    then the ledger holds one genesis entry and 2,000 entries with a valid chain and seq
    1..2000, and each writer's entries are all there, in the order it wrote them."""
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    path, go = tmp_path / "shared.gradcheck.jsonl", tmp_path / "go"
    writers = [subprocess.Popen([sys.executable, str(script), str(path), name, "1000", str(go)]) for name in ("a", "b")]
    time.sleep(0.5)  # both are importing and waiting on the flag
    go.touch()
    for writer in writers:
        assert writer.wait(timeout=120) == 0

    report = verify_ledger_file(path)
    assert report["ok"], report["errors"][:3]
    assert report["entries"] == 2000 and report["torn_tail"] is None
    genesis, *entries = Ledger(path).entries()
    assert genesis["data"]["event"] == "genesis"  # exactly one: whichever writer came first wrote it
    assert [e["seq"] for e in entries] == list(range(1, 2001))
    for name in ("a", "b"):
        assert [e["data"]["i"] for e in entries if e["data"]["writer"] == name] == list(range(1000))
    interleaved = sum(1 for x, y in zip(entries, entries[1:]) if x["data"]["writer"] != y["data"]["writer"])
    # Not an assertion about the lock: a record of how much the two really overlapped.
    print(json.dumps({"writer_switches": interleaved}))
