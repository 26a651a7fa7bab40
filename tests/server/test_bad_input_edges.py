"""Bad input at the edges of the number and path types is a 400, never a 500, and no message
names the server's own folders."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

HUGE = int("9" * 320)  # beyond float's range: float(HUGE) raises OverflowError
LONG = "n" * 300  # one path component over the 255 bytes a filesystem name may have


@pytest.mark.parametrize(
    "check, field",
    [
        (
            {"function": "x*x", "x": 3, "analytical_gradient": 6, "tolerance": {"rtol": HUGE, "atol": 0}},
            "tolerance.rtol",
        ),
        (
            {"function": "x*x", "x": 3, "analytical_gradient": 6, "finite_difference": {"step": HUGE}},
            "finite_difference.step",
        ),
        ({"function": "x*x", "x": HUGE, "analytical_gradient": 6}, "inputs.x"),
        ({"function": "x*x", "x": 3, "analytical_gradient": HUGE}, "analytical_gradient"),
    ],
)
async def test_an_integer_beyond_the_float_range_is_a_400_naming_its_field(api, lab1, ledger_lines, check, field):
    """Given a check whose number is a 320-digit integer, when it is POSTed, then the answer is
    400 bad_input naming the field and the integer's size, and nothing is written."""
    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": check})
    assert (status, body["code"], body["field"]) == (400, "bad_input", field), body
    assert "digits" in body["message"]
    assert ledger_lines() == []


async def test_a_path_component_over_the_name_limit_is_a_400_on_every_route(api):
    """Given a notebook path whose file name is 300 bytes long, when it is used by POST checks,
    GET ledger and POST verify, then each answers 400 bad_path naming the limit (the filesystem
    would have raised ENAMETOOLONG)."""
    path = f"work/{LONG}.ipynb"
    answers = [
        await api("POST", "checks", {"notebook": path, "check": {"function": "x*x", "x": 3, "analytical_gradient": 6}}),
        await api("GET", "ledger", None, path=path),
        await api("POST", "verify", {"path": path}),
    ]
    for status, _, body in answers:
        assert (status, body["code"]) == (400, "bad_path"), body
        assert "306 bytes; the limit is 255" in body["message"]


async def test_a_ledger_error_names_the_ledger_relative_to_the_root(api, jp_root_dir):
    """Given a notebook whose ledger path is a folder (the ledger cannot be opened), when a check
    is POSTed, then the error names work/lab9.gradcheck.jsonl and never the server's own folder."""
    root = Path(jp_root_dir)
    (root / "work").mkdir(exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), str(root / "work" / "lab9.ipynb"))
    (root / "work" / "lab9.gradcheck.jsonl").mkdir()
    status, _, body = await api(
        "POST",
        "checks",
        {"notebook": "work/lab9.ipynb", "check": {"function": "x*x", "x": 3, "analytical_gradient": 6}},
    )
    assert body["code"] == "ledger_error", (status, body)
    assert "work/lab9.gradcheck.jsonl" in body["message"]
    assert str(root) not in body["message"] and str(root.resolve()) not in body["message"]
