"""The witness's key: its public half answered and written beside the log, its private half
readable by the witness's own OS user alone."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import subprocess

from jupyterlab_gradcheck.witness.log import public_key_fingerprint, read_public_key_file, signature_ok
from support.witness import JUPYTER, TOKEN, Witness, call, free_port


def test_the_public_key_and_its_fingerprint_are_answered_and_written_beside_the_log(witness):
    """Given a freshly started witness, when GET public-key is asked (no token), then it answers
    the base64 key and "sha256:" + the hex SHA-256 of its 32 raw bytes; W.jsonl.pub holds the same
    key on one line, readable by anyone; and a receipt it signs verifies with that key."""
    status, answer = call(witness.url + "/public-key")
    assert status == 200 and set(answer) == {"public_key", "fingerprint"}
    raw = base64.b64decode(answer["public_key"])
    assert len(raw) == 32
    assert answer["fingerprint"] == "sha256:" + hashlib.sha256(raw).hexdigest()
    assert answer["fingerprint"] == public_key_fingerprint(answer["public_key"])
    pub = witness.log.with_name("w.jsonl.pub")
    assert pub.read_text() == answer["public_key"] + "\n"
    assert read_public_key_file(witness.log) == answer["public_key"]
    assert stat.S_IMODE(pub.stat().st_mode) == 0o644
    report = {"ledger_id": "L", "notebook": "lab1.ipynb", "seq": 1, "head": "a" * 64}
    receipt = call(witness.url + "/heads", report, witness.tokens["ana"])[1]["receipt"]
    assert signature_ok(receipt, answer["public_key"])


def test_the_private_key_is_created_readable_by_the_witness_alone_whatever_the_umask(tmp_path):
    """Given a witness started under the most permissive umask (0o000: any mode the code does not
    force would show), then its private key file is mode 0600, owned by the witness's own OS user,
    and its public key file 0644."""
    running = Witness(tmp_path / "w.jsonl")
    before = os.umask(0)
    try:
        running.start()
    finally:
        os.umask(before)
    running.kill()
    key = tmp_path / "w.jsonl.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert key.stat().st_uid == os.getuid()
    assert stat.S_IMODE((tmp_path / "w.jsonl.pub").stat().st_mode) == 0o644


def test_a_key_that_others_can_read_is_refused_naming_the_file(tmp_path):
    """Given a witness key that was made readable by its group (chmod 640), when the witness is
    started on it, then it refuses (exit 2) with a one-line message naming the key file and its
    mode, serves nothing and appends nothing; once the mode is 0600 again it starts with the same
    key (the fingerprint is unchanged)."""
    first = Witness(tmp_path / "w.jsonl")
    first.start()
    fingerprint = call(first.url + "/public-key")[1]["fingerprint"]
    first.kill()
    key = tmp_path / "w.jsonl.key"
    key.chmod(0o640)
    done = subprocess.run(
        [str(JUPYTER), "gradcheck", "witness", "--log", str(tmp_path / "w.jsonl"), "--port", str(free_port())]
        + ["--students", str(first.students)],
        env={**os.environ, "GRADCHECK_WITNESS_TOKEN": TOKEN},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert f"the witness key {key} can be read by others (mode 0o640)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "w.jsonl").exists()
    key.chmod(0o600)
    first.start()
    try:
        assert call(first.url + "/public-key")[1]["fingerprint"] == fingerprint
    finally:
        first.kill()
