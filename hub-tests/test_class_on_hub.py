"""A class on a real JupyterHub: two students, each with her own server under /user/<name>/, and
the witness as a hub-managed service (examples/jupyterhub_config.py, docs/jupyterhub.md)."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import time
from pathlib import Path

from hub import PASSWORDS, PUBLIC_URL, ROOT, WITNESS, as_student, call, log_in, processes_in

CHECKS = {
    "ana": {"id": "square", "function": "x*x", "x": 3, "analytical_gradient": 6},
    "bob": {"id": "cube", "function": "x*x*x", "x": 2, "analytical_gradient": 12},
}
SCREENSHOT = ROOT / "docs" / "screenshots" / "hub-side-panel.png"
JUPYTER_GRADCHECK = Path(sys.executable).with_name("jupyter-gradcheck")


def _run_check(student) -> dict:
    answer = student.server_call("POST", "gradcheck/checks", {"notebook": "lab1.ipynb", "check": CHECKS[student.name]})
    assert answer.status == 200, answer
    return answer.json()


def _ledger(student, token=None):
    return student.server_call("GET", "gradcheck/ledger?path=lab1.ipynb", token=token)


def _witness_log(token: str) -> list[dict]:
    answer = call("GET", WITNESS + "/log", token=token)
    assert answer.status == 200, answer
    return answer.json()["receipts"]


def _wait_for_heads(instructor_token: str, wanted: dict[str, str], timeout: float = 30.0) -> list[dict]:
    """The witness log once it holds, for every user in `wanted`, a receipt of that head (reports
    go out from a background thread after the check answers)."""
    deadline = time.monotonic() + timeout
    while True:
        receipts = _witness_log(instructor_token)
        seen = {(r["user"], r["head"]) for r in receipts}
        if all((user, head) in seen for user, head in wanted.items()) or time.monotonic() > deadline:
            return receipts
        time.sleep(0.25)


def test_a_student_gets_a_token_with_her_own_password_only(hub):
    """Given the hub with the class list (ana, bob), when ana logs in with her password, then the hub
    issues a token that it says is ana's; when she asks with bob's name, a wrong password or a name
    not on the list, the hub answers 403 and issues nothing."""
    answer = log_in("ana", PASSWORDS["ana"])
    assert answer.status == 201, answer
    whoami = call("GET", "/hub/api/user", token=answer.json()["token"]).json()
    assert (whoami["kind"], whoami["name"]) == ("user", "ana")
    # (whose token is asked for, who logs in, with which password)
    for owner, name, password in (
        ("bob", "ana", PASSWORDS["ana"]),
        ("ana", "ana", PASSWORDS["bob"]),
        ("eve", "eve", "anything"),
    ):
        refused = call("POST", f"/hub/api/users/{owner}/tokens", {"auth": {"username": name, "password": password}})
        assert refused.status == 403, (owner, name, refused)


def test_each_student_checks_under_her_own_base_url_and_the_witness_signs_both_heads(hub, students):
    """Given ana's and bob's servers, started by the hub under /user/ana/ and /user/bob/, when each
    runs a check through the REST API with her own token, then each check passes and lands in that
    student's own ledger (an expectation and an observation), and the witness service, which each
    server reports to with its own hub token, holds signed receipts up to the head of both ledgers,
    each under the user the hub names; the instructor's `verify --witness` through the hub finds
    ana's ledger witnessed."""
    ana, bob = students["ana"], students["bob"]
    done = {student.name: _run_check(student) for student in (ana, bob)}
    for name, answer in done.items():
        assert answer["record"]["passed"] is True, answer["record"]
        assert answer["record"]["observed_gradient"] == CHECKS[name]["analytical_gradient"]
        assert answer["ledger"]["path"] == "lab1.gradcheck.jsonl"
    assert done["ana"]["ledger"]["ledger_id"] != done["bob"]["ledger"]["ledger_id"]
    heads = {}
    for student in (ana, bob):
        entries = _ledger(student).json()["entries"]
        assert [(e["kind"], e["check_id"]) for e in entries if e["kind"] != "note"] == [
            ("expectation", CHECKS[student.name]["id"]),
            ("observation", CHECKS[student.name]["id"]),
        ]
        assert entries[-1]["hash"] == done[student.name]["ledger"]["head"]
        heads[student.name] = (entries[-1]["seq"], entries[-1]["hash"])

    receipts = _wait_for_heads(hub.instructor_token, {n: a["ledger"]["head"] for n, a in done.items()})
    for name, answer in done.items():
        theirs = [r for r in receipts if r["ledger_id"] == answer["ledger"]["ledger_id"]]
        # Every entry's head is reported, from genesis on (a head may arrive twice: the kernel and
        # the server both report it), under the hub's user name, ending at the ledger's head.
        assert {(r["user"], r["notebook"]) for r in theirs} == {(name, "lab1.ipynb")}
        assert {r["seq"] for r in theirs} == set(range(1, heads[name][0] + 1))
        assert (heads[name][0], heads[name][1]) in {(r["seq"], r["head"]) for r in theirs}
        assert all(r["signature"] for r in theirs)

    # The instructor holds ana's ledger file against the witness, through the hub, with her token.
    ledger = hub.homes / "ana" / "lab1.gradcheck.jsonl"
    verified = subprocess.run(
        [str(JUPYTER_GRADCHECK), "verify", str(ledger), "--witness", PUBLIC_URL + WITNESS],
        env={**os.environ, "GRADCHECK_WITNESS_TOKEN": hub.instructor_token},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "witness: saw this ledger (2 of 2 entries, from ana): witnessed" in verified.stdout


def test_one_students_token_cannot_read_or_write_the_others_ledger(hub, students):
    """Given bob's ledger with his check in it, when ana presents her own token at bob's server
    (/user/bob/) to read his ledger, export it, read the ledger file, run a check, widen a
    tolerance or verify, then every request is refused (403), and bob's ledger is byte for byte
    what it was: the same entries and head."""
    ana, bob = students["ana"], students["bob"]
    if not _ledger(bob).json()["entries"]:
        _run_check(bob)
    before = _ledger(bob).json()
    attempts = [
        ("GET", "gradcheck/ledger?path=lab1.ipynb", None),
        ("GET", "gradcheck/export?path=lab1.ipynb&format=json", None),
        ("GET", "api/contents/lab1.gradcheck.jsonl", None),
        ("POST", "gradcheck/checks", {"notebook": "lab1.ipynb", "check": CHECKS["ana"]}),
        (
            "POST",
            "gradcheck/tolerance",
            {"notebook": "lab1.ipynb", "check_id": "cube", "rtol": 0.5, "justification": "written by someone else"},
        ),
        ("POST", "gradcheck/verify", {"path": "lab1.ipynb"}),
        ("PUT", "api/contents/lab1.gradcheck.jsonl", {"type": "file", "format": "text", "content": ""}),
    ]
    for method, path, body in attempts:
        refused = bob.server_call(method, path, body, token=ana.token)
        assert refused.status == 403, (method, path, refused)
    after = _ledger(bob).json()
    assert after["entries"] == before["entries"]
    assert after["entries"][-1]["hash"] == before["entries"][-1]["hash"]
    assert _ledger(ana, token=bob.token).status == 403  # and the other way round


def test_the_witness_takes_the_user_from_the_hub_token_not_from_the_report(hub, students):
    """Given the witness running as a hub service, when ana posts a head with her own token but a
    report that names bob, then it is refused with 403 and nothing is appended (a client never
    names its user); when she posts it without naming anyone, then the receipt names ana (the
    hub's word); when ana and bob
    read the log with their tokens, each sees only receipts of their own; when the log is read or
    written with no token, a made-up token or the token of a hub service (the witness's own, which
    names no student), then the witness answers 403 and its log does not grow."""
    ana, bob = students["ana"], students["bob"]
    if not any(r["user"] == "bob" for r in _witness_log(hub.instructor_token)):
        _wait_for_heads(hub.instructor_token, {"bob": _run_check(bob)["ledger"]["head"]})
    forged = {
        "ledger_id": "f" * 32,
        "notebook": "lab1.ipynb",
        "user": "bob",
        "seq": 1,
        "head": "b" * 64,
        "entry_time": "2026-01-01T00:00:00+00:00",
        "check_id": "cube",
    }
    before = len(_witness_log(hub.instructor_token))
    assert call("POST", WITNESS + "/heads", forged, token=ana.token).status == 403
    assert len(_witness_log(hub.instructor_token)) == before
    forged.pop("user")
    answer = call("POST", WITNESS + "/heads", forged, token=ana.token)
    assert answer.status == 200, answer
    assert answer.json()["receipt"]["user"] == "ana"
    assert answer.json()["receipt"]["head"] == "b" * 64

    everything = _witness_log(hub.instructor_token)
    assert {r["user"] for r in everything} == {"ana", "bob"}
    for student in (ana, bob):
        own = _witness_log(student.token)
        assert own == [r for r in everything if r["user"] == student.name]
        assert own  # each has receipts of their own, and none of the other's

    service_token = _witness_service_token(hub.folder)
    for token in (None, "not-a-token", service_token):
        assert call("POST", WITNESS + "/heads", forged, token=token).status == 403, token
        assert call("GET", WITNESS + "/log", token=token).status == 403, token
    assert len(_witness_log(hub.instructor_token)) == len(everything)


def _witness_service_token(folder: Path) -> str:
    """The witness service's own hub token, read from its process's environment (the hub gave it)."""
    for pid in processes_in(folder):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"witness" in cmdline:
            for item in environ:
                if item.startswith(b"JUPYTERHUB_API_TOKEN="):
                    return item.split(b"=", 1)[1].decode()
    raise AssertionError("no witness service process with a JUPYTERHUB_API_TOKEN found")


def test_the_side_panel_is_served_under_the_students_base_url(hub, students):
    """Given ana's server with her check in lab1.ipynb's ledger, when a real Chromium logs in
    through the hub's login form as ana, opens /user/ana/lab/tree/lab1.ipynb and the side panel
    from the command palette, then the page's base URL is /user/ana/ and the panel lists ana's
    check (square, passed) and not bob's; when she runs sin(x) from the panel's form and saves, the
    panel lists both checks as passed with the chain and the binding intact, and the screenshot is
    saved as docs/screenshots/hub-side-panel.png; when the same browser then opens /user/bob/lab,
    the hub refuses it (403)."""
    ana = students["ana"]
    if not _ledger(ana).json()["entries"]:
        _run_check(ana)
    SCREENSHOT.unlink(missing_ok=True)
    env = {
        **os.environ,
        "HUB_URL": PUBLIC_URL,
        "HUB_USER": "ana",
        "HUB_PASSWORD": PASSWORDS["ana"],
        "SCREENSHOT": str(SCREENSHOT),
        "HUB_OTHER_USER": "bob",
    }
    done = subprocess.run(
        ["node", str(ROOT / "hub-tests" / "side-panel-screenshot.mjs")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["baseUrl"] == "/user/ana/"
    assert seen["path"].startswith("/user/ana/lab")
    # The panel lists the newest check first: the one run from its form, then the REST one.
    assert [c["status"] for c in seen["checks"]] == ["passed", "passed"]
    assert seen["checks"][0]["id"].startswith("sin(x)@") and seen["checks"][1]["id"] == "square"
    # Saved from the browser, the notebook's binding names the ledger's head.
    assert "chain OK" in seen["chain"] and "binding broken" not in seen["chain"], seen["chain"]
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert seen["otherStatus"] == 403  # ana's browser login does not open bob's JupyterLab


def test_each_student_runs_as_her_own_account_and_cannot_read_the_others_files(hub, students):
    """Given ana's and bob's servers, each spawned as the student's own OS account, with bob's
    ledger in his home and the witness's key and log in the hub's folder, when ana's account (what
    her kernel or terminal runs as) lists bob's home, reads or appends to bob's ledger, or reads
    the witness's private key or its log, then each is refused with "Permission denied" and bob's
    ledger keeps its bytes; and the processes of ana's server belong to her account."""
    bob = students["bob"]
    if not _ledger(bob).json()["entries"]:
        _run_check(bob)
    ledger = hub.homes / "bob" / "lab1.gradcheck.jsonl"
    before = ledger.read_bytes()
    witness = hub.folder / "witness"
    attempts = [
        ("ls", str(hub.homes / "bob")),
        ("cat", str(ledger)),
        ("sh", "-c", f"echo forged >> {ledger}"),
        ("cat", str(witness / "witness.jsonl.key")),
        ("cat", str(witness / "witness.jsonl")),
    ]
    for command in attempts:
        done = as_student("ana", *command)
        assert (done.returncode != 0, "Permission denied" in done.stderr) == (True, True), (command, done)
    assert ledger.read_bytes() == before
    owners = {Path(f"/proc/{pid}").stat().st_uid for pid in processes_in(hub.homes / "ana")}
    assert owners == {pwd.getpwnam("ana").pw_uid}, owners
