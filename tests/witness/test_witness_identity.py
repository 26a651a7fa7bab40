"""Who a receipt belongs to: standalone, the student whose own token sent it, and nobody else."""

from __future__ import annotations

import json
import os
import stat
import subprocess

from jupyterlab_gradcheck.witness.log import read_log
from jupyterlab_gradcheck.witness.service import Students, mint_tokens
from support.witness import JUPYTER, TOKEN, Witness, call, free_port

HEAD = "a" * 64


def _report(**change) -> dict:
    report = {
        "ledger_id": "L-ana",
        "notebook": "lab1.ipynb",
        "seq": 1,
        "head": HEAD,
        "entry_time": "2026-12-04T10:00:00+00:00",
        "check_id": "square",
        "kind": "expectation",
        "passed": None,
        "source": "kernel",
    }
    return {**report, **change}


def test_each_student_reports_with_their_own_token_and_the_receipt_names_them(witness):
    """Given a standalone witness with a class list, when ana and bob each post a head with their
    own token and no `user` in the report, then each receipt names the token's owner, keeps every
    reported field (kind, passed, source), and the log holds both, in order."""
    status, ana = call(witness.url + "/heads", _report(), witness.tokens["ana"])
    assert status == 200, ana
    status, bob = call(
        witness.url + "/heads",
        _report(ledger_id="L-bob", seq=2, kind="observation", passed=False, source="server"),
        witness.tokens["bob"],
    )
    assert status == 200, bob
    assert (ana["receipt"]["user"], bob["receipt"]["user"]) == ("ana", "bob")
    assert (bob["receipt"]["kind"], bob["receipt"]["passed"], bob["receipt"]["source"]) == (
        "observation",
        False,
        "server",
    )
    assert [(r["user"], r["ledger_id"], r["log_seq"]) for r in read_log(witness.log)] == [
        ("ana", "L-ana", 1),
        ("bob", "L-bob", 2),
    ]


def test_a_report_naming_another_student_is_refused_and_nothing_is_appended(witness):
    """Given a witness that holds one head of ana's, when carol posts the framing report
    {"user": "ana", "seq": 34, "head": "fff..."} with her own token, then the witness answers 403
    with code forbidden naming both, and its log still holds only ana's own head; the same report
    naming carol herself is accepted."""
    assert call(witness.url + "/heads", _report(user="ana"), witness.tokens["ana"])[0] == 200
    framing = _report(user="ana", seq=34, head="f" * 64)
    status, answer = call(witness.url + "/heads", framing, witness.tokens["carol"])
    assert status == 403
    assert answer == {"code": "forbidden", "message": "this token is carol's; it cannot report heads for ana"}
    assert [(r["user"], r["seq"]) for r in read_log(witness.log)] == [("ana", 1)]
    status, own = call(witness.url + "/heads", _report(user="carol", seq=34, head="f" * 64), witness.tokens["carol"])
    assert (status, own["receipt"]["user"], own["receipt"]["seq"]) == (200, "carol", 34)


def test_the_instructors_token_reads_the_whole_log_and_cannot_post(witness):
    """Given ana's and bob's heads in the log, when the instructor's shared token posts a head,
    then it is refused (403) and nothing is appended; when it reads the log, it gets every
    receipt, while ana's token reads only ana's and an unknown token reads nothing (403)."""
    call(witness.url + "/heads", _report(), witness.tokens["ana"])
    call(witness.url + "/heads", _report(ledger_id="L-bob"), witness.tokens["bob"])
    status, answer = call(witness.url + "/heads", _report(user="ana", seq=2), TOKEN)
    assert status == 403 and answer["message"].startswith("the instructor's token reads the log")
    assert len(read_log(witness.log)) == 2
    status, everything = call(witness.url + "/log", token=TOKEN)
    assert status == 200 and [r["user"] for r in everything["receipts"]] == ["ana", "bob"]
    status, own = call(witness.url + "/log", token=witness.tokens["ana"])
    assert status == 200 and [r["user"] for r in own["receipts"]] == ["ana"]
    assert call(witness.url + "/log", token="made-up")[0] == 403


def test_tokens_minted_while_the_witness_runs_take_effect_and_the_file_stays_private(witness):
    """Given a running witness, when the instructor mints a token for a new student erin with
    `jupyter gradcheck witness --students S.json --mint erin ana`, then it prints one token per
    name (ana's the one she already had), the file stays mode 0600, and erin's new token is
    accepted at once, naming erin."""
    done = subprocess.run(
        [str(JUPYTER), "gradcheck", "witness", "--students", str(witness.students), "--mint", "erin", "ana"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    printed = dict(line.split(" ") for line in done.stdout.splitlines())
    assert set(printed) == {"erin", "ana"} and printed["ana"] == witness.tokens["ana"]
    assert len(printed["erin"]) >= 32  # 24 random bytes, base64url
    assert stat.S_IMODE(os.stat(witness.students).st_mode) == 0o600
    status, answer = call(witness.url + "/heads", _report(ledger_id="L-erin"), printed["erin"])
    assert (status, answer["receipt"]["user"]) == (200, "erin")


def _start_fails(tmp_path, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(JUPYTER), "gradcheck", "witness", "--log", str(tmp_path / "w.jsonl"), "--port", str(free_port()), *args],
        env={**os.environ, "GRADCHECK_WITNESS_TOKEN": TOKEN},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_standalone_witness_needs_a_private_class_list(tmp_path):
    """Given no hub, when the witness is started without --students, or with a class list that
    others can read (mode 0644), then it refuses to start (exit 2) with a one-line message naming
    what is wrong (the option, the file), and writes no log."""
    done = _start_fails(tmp_path)
    assert done.returncode == 2 and "--students S.json" in done.stderr
    shared = tmp_path / "students.json"
    shared.write_text(json.dumps({"t" * 32: "ana"}))
    shared.chmod(0o644)
    done = _start_fails(tmp_path, "--students", str(shared))
    assert done.returncode == 2
    assert f"the students file {shared} can be read by others (mode 0o644)" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "w.jsonl").exists()


def test_a_witness_restarted_on_its_log_keeps_its_chain_and_its_students(tmp_path):
    """Given a witness that signed ana's head, when it is stopped and started again on the same
    log and class list, then ana's next head chains onto the first receipt (prev = its hash)."""
    running = Witness(tmp_path / "w.jsonl")
    running.start()
    try:
        first = call(running.url + "/heads", _report(), running.tokens["ana"])[1]["receipt"]
        running.kill()
        running.start()
        second = call(running.url + "/heads", _report(seq=2), running.tokens["ana"])[1]["receipt"]
    finally:
        running.kill()
    assert (second["log_seq"], second["prev"]) == (2, first["hash"])


def test_a_class_list_that_turns_unreadable_keeps_the_list_in_force(tmp_path):
    """Given a class list read by the witness, when the file is made readable by others, then the
    students it held keep their tokens and the reason is kept; when it is fixed with a new student,
    the new student's token is taken."""
    path = tmp_path / "students.json"
    mint_tokens(path, ["ana"])
    students = Students(path)
    ana = next(iter(json.loads(path.read_text())))
    path.chmod(0o644)
    path.write_text(json.dumps({ana: "ana", "x" * 32: "mallory"}))
    assert students.user_for_token(ana) == "ana" and students.user_for_token("x" * 32) is None
    assert "can be read by others" in students.problem
    path.chmod(0o600)
    path.write_text(json.dumps({ana: "ana", "y" * 32: "erin"}))
    assert students.user_for_token("y" * 32) == "erin" and students.problem is None
