"""GET ledger/blob: one page of a stored tensor's values, served only for a blob its ledger names;
and GET ledger, which sends stored values as they are, small whatever the tensors' size."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from jupyterlab_gradcheck.core.values.blobs import blob_path, store_dir_for
from support.stored_records import big_check, ledger_with_stored_check

#: The budget of one record in the ledger view: a 10^5-element check sent inline was 2 MB.
RECORD_BUDGET = 64 * 1024


@pytest.fixture
def big_ledger(jp_root_dir, lab1):
    """work/lab1.ipynb's ledger holding a 10^5-element check with its values stored."""
    ledger, record = ledger_with_stored_check(Path(jp_root_dir) / lab1, big_check(10**5))
    return ledger, record


async def test_the_ledger_view_of_a_big_check_sends_stored_values_not_tensors(api, lab1, big_ledger):
    """Given a ledger whose check has a 10^5-element input and gradients,
    when GET ledger reads it,
    then each entry's record stays under 64 KB and holds the stored form (sha256, shape,
    summary) exactly as the ledger keeps it: no blob's values are inlined."""
    _, record = big_ledger
    status, _, view = await api("GET", "ledger", path=lab1)
    assert status == 200, view
    observation = next(entry for entry in view["entries"] if entry["kind"] == "observation")
    for entry in view["entries"]:
        assert len(json.dumps(entry)) < RECORD_BUDGET, entry["kind"]
    sent = observation["data"]["record"]
    assert sent["inputs"]["x"] == record["inputs"]["x"]
    assert sent["inputs"]["x"]["stored"]["shape"] == [100000]
    assert sent["observations"]["autograd_grad"]["gradients"]["x"]["value"]["summary"]["min"] == pytest.approx(
        math.cos(1.0),
        rel=1e-12,  # the gradient cos(x) is smallest at x = +-1; float64 rounding only
    )
    history = view["checks"]["big_sin"]
    assert len(json.dumps(history)) < 4 * RECORD_BUDGET  # the expectation, the record and the history's own fields


async def test_show_values_reads_the_first_page_and_the_next(api, lab1, big_ledger):
    """Given the stored input x = linspace(-1, 1, 10^5),
    when its blob is read with offset 0 limit 3, then offset 99998 with the default limit,
    then the pages hold exactly those elements of x, with the shape, dtype and total."""
    _, record = big_ledger
    sha = record["inputs"]["x"]["stored"]["sha256"]
    status, _, page = await api("GET", "ledger/blob", path=lab1, sha=sha, offset="0", limit="3")
    assert status == 200, page
    assert page["shape"] == [100000] and page["dtype"] == "float64" and page["total"] == 100000
    assert page["offset"] == 0 and page["sha256"] == sha
    assert page["values"] == record["inputs"]["x"]["summary"]["head"][:3]
    status, _, tail = await api("GET", "ledger/blob", path="work/lab1.gradcheck.jsonl", sha=sha, offset="99998")
    assert status == 200, tail
    assert tail["offset"] == 99998 and tail["values"][-1] == 1.0 and len(tail["values"]) == 2


@pytest.mark.parametrize(
    "query, field, english, spanish",
    [
        ({"sha": "ABC"}, "sha", "sha must be 64 lowercase hexadecimal digits", "sha debe ser 64 dígitos"),
        (
            {"limit": "0"},
            "limit",
            "limit must be a whole number from 1 to 10000, got '0'",
            "limit debe ser un número entero de 1 a 10000",
        ),
        (
            {"limit": "10001"},
            "limit",
            "limit must be a whole number from 1 to 10000",
            "limit debe ser un número entero de 1 a 10000",
        ),
        (
            {"offset": "-1"},
            "offset",
            "offset must be a whole number of at least 0, got '-1'",
            "offset debe ser un número entero de al menos 0",
        ),
    ],
)
async def test_a_malformed_sha_or_limit_is_refused_in_the_reader_language(
    api, lab1, big_ledger, query, field, english, spanish
):
    """Given a request with a malformed sha, limit or offset,
    when it is sent in English and in Spanish,
    then both are 400 bad_input naming the field, each message in its language."""
    _, record = big_ledger
    arguments = {"path": lab1, "sha": record["inputs"]["x"]["stored"]["sha256"], **query}
    status, _, body = await api("GET", "ledger/blob", headers={"Accept-Language": "en"}, **arguments)
    assert (status, body["code"], body["field"]) == (400, "bad_input", field), body
    assert body["message"].startswith(english), body["message"]
    status, _, body = await api("GET", "ledger/blob", headers={"Accept-Language": "es"}, **arguments)
    assert (status, body["field"]) == (400, field), body
    assert body["message"].startswith(spanish), body["message"]


async def test_a_blob_no_entry_names_is_not_served(api, lab1, big_ledger, jp_root_dir):
    """Given a file in the store that no entry of the ledger names (copied there by hand),
    when it is asked for by its name, then the answer is 404 and none of its bytes are read out."""
    ledger, _ = big_ledger
    stray = "f" * 64
    blob_path(store_dir_for(ledger.path), stray).write_bytes(b"not a tensor the ledger knows")
    status, _, body = await api("GET", "ledger/blob", path=lab1, sha=stray)
    assert (status, body["code"], body["field"]) == (404, "not_found", "sha"), body
    assert "no entry of this ledger names the blob ffffffffffffffff" in body["message"]


async def test_a_missing_blob_is_404_and_a_changed_blob_409(api, lab1, big_ledger):
    """Given the check's stored input, when its blob is deleted, then reading it is 404 naming it
    missing; given the gradient's blob with one byte changed, reading it is 409 blob_changed."""
    ledger, record = big_ledger
    store = store_dir_for(ledger.path)
    x_sha = record["inputs"]["x"]["stored"]["sha256"]
    blob_path(store, x_sha).unlink()
    status, _, body = await api("GET", "ledger/blob", path=lab1, sha=x_sha)
    assert (status, body["code"]) == (404, "not_found"), body
    assert f"the blob {x_sha[:16]} is missing" in body["message"]

    grad_sha = record["observed_gradient"]["stored"]["sha256"]
    path = blob_path(store, grad_sha)
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    status, _, body = await api("GET", "ledger/blob", path=lab1, sha=grad_sha, headers={"Accept-Language": "es"})
    assert (status, body["code"], body["field"]) == (409, "blob_changed", "sha"), body
    assert grad_sha[:16] in body["message"] and "cambiado" in body["message"]


async def test_a_path_outside_the_root_or_without_a_ledger_is_refused(api, lab1):
    """Given no ledger yet beside lab1, when a blob is asked for there, then 404; given '../x',
    then 400 bad_path: no file outside the root is opened."""
    status, _, body = await api("GET", "ledger/blob", path=lab1, sha="a" * 64)
    assert (status, body["code"]) == (404, "not_found"), body
    status, _, body = await api("GET", "ledger/blob", path="../x.gradcheck.jsonl", sha="a" * 64)
    assert (status, body["code"]) == (400, "bad_path"), body


async def test_a_check_posted_to_the_server_is_read_back_a_page_at_a_time(api, lab1):
    """Given sin(x) over 1000 points POSTed as a check, its derivative written cos(x),
    when the ledger is read and the observed gradient's blob is asked for in two pages,
    then the ledger holds the gradient in its stored form, the first page starts with the
    summary's head, and the two pages together are cos(x) at the 1000 points."""
    x = [-1 + 2 * k / 999 for k in range(1000)]
    check = {"id": "big_sin", "function": "sum(sin(x))", "x": x, "analytical_gradient": "cos(x)"}
    status, _, answer = await api("POST", "checks", {"notebook": lab1, "check": check})
    assert status == 200 and answer["record"]["passed"], answer
    status, _, view = await api("GET", "ledger", path=lab1)
    record = next(entry for entry in view["entries"] if entry["kind"] == "observation")["data"]["record"]
    gradient = record["observations"]["autograd_grad"]["gradients"]["x"]["value"]
    assert gradient["stored"]["shape"] == [1000] and gradient["summary"]["min"] == math.cos(1.0)
    sha = gradient["stored"]["sha256"]
    status, _, first = await api("GET", "ledger/blob", path=lab1, sha=sha, limit="600")
    status, _, rest = await api("GET", "ledger/blob", path=lab1, sha=sha, offset="600", limit="600")
    assert (first["offset"], len(first["values"]), rest["offset"], len(rest["values"])) == (0, 600, 600, 400)
    assert first["values"][:8] == gradient["summary"]["head"]
    assert first["values"] + rest["values"] == pytest.approx(
        [math.cos(v) for v in x], rel=1e-15, abs=0
    )  # libm vs torch cos: last-bit rounding
