"""The extension's options (traitlets) reach the checks it runs."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from jupyterlab_gradcheck.server.extension import GradcheckExtension
from support.server import server_config


@pytest.mark.parametrize("jp_server_config", [server_config(max_input_elements=4, default_device="cuda:9")])
async def test_max_input_elements_and_default_device_apply_to_every_check(api, lab1, ledger_lines, jp_server_config):
    """Given a server configured with at most 4 input elements and default device cuda:9
    (a tenth GPU, which no test machine has),
    when checks arrive with 5 elements, with no device, and with 4 elements on the cpu,
    then the first is 400 naming the input, the second 400 device_unavailable (the
    default applied), and only the third runs."""
    five = {"function": "sum(x*x)", "x": [1, 2, 3, 4, 5], "analytical_gradient": "2*x", "device": "cpu"}
    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": five})
    assert (status, body["code"], body["field"]) == (400, "bad_input", "inputs.x"), body
    assert "more than 4 elements" in body["message"]

    status, _, body = await api(
        "POST", "checks", {"notebook": lab1, "check": {"function": "x*x", "x": 3, "analytical_gradient": 6}}
    )
    assert (status, body["code"]) == (400, "device_unavailable"), body
    assert ledger_lines() == []

    four = {**five, "x": [1, 2, 3, 4]}
    status, _, body = await api("POST", "checks", {"notebook": lab1, "check": four})
    assert status == 200 and body["record"]["passed"] is True, body
    assert body["record"]["device"] == "cpu"


@pytest.mark.parametrize(
    "option, value", [("workers", 0), ("timeout", 0.0), ("queue_size", -1), ("default_device", "gpu")]
)
def test_an_impossible_option_is_refused_when_configured(option, value):
    """Given an option value the extension cannot work with,
    when it is set,
    then traitlets refuses it with the option's name, instead of a server that starts broken."""
    with pytest.raises(TraitError, match=option):
        GradcheckExtension(**{option: value})


@pytest.mark.parametrize("device", ["cpu", "cuda", "cuda:1", "mps", "auto"], ids=lambda d: f"default={d}")
def test_every_device_name_the_records_accept_is_a_valid_default(device):
    """Given a device name a check record may carry,
    when it is configured as the default device,
    then the extension keeps it (the validator refuses only what records refuse)."""
    assert GradcheckExtension(default_device=device).default_device == device
