"""The blocks of a record beyond the first-order table: each output of a function returning several,
a custom Function's second order, and its forward mode, batched and undefined gradients.

Each is shown like the first-order observations: every value with its shape, dtype and device, or
why it was skipped, and each comparison with its verdict.
"""

from __future__ import annotations

from html import escape

from ..i18n import N_, _, localize
from .html_parts import badge, comparisons_table, described, observations_table
from .html_parts import html_code as _code
from .html_parts import html_row as _row
from .html_parts import html_table as _table


def _observation_rows(observations: dict, value_key: str) -> list[str]:
    rows = []
    for key, observation in observations.items():
        name = observation.get("name", key)
        if observation.get("status") == "skipped":
            rows.append(_row([_code(name), badge("skipped"), escape(localize(str(observation.get("reason", ""))))]))
        elif value_key in observation:
            rows.append(
                _row(
                    [
                        _code(name),
                        described(observation[value_key]),
                        escape(localize(str(observation.get("note") or observation.get("description") or ""))),
                    ]
                )
            )
        elif "status" in observation:
            rows.append(
                _row([_code(name), badge(observation["status"]), escape(localize(str(observation.get("reason", ""))))])
            )
    return rows


def _function_block(title: str, rows: list[str], comparisons: list[dict]) -> str:
    if not rows and not comparisons:
        return ""
    table = (
        _table(
            [escape(_(h)) for h in (N_("observation"), N_("value"), N_("note"))],
            rows,
            "jp-gradcheck-function-observations",
        )
        if rows
        else ""
    )
    return f"<div><b>{escape(title)}</b>{table}{comparisons_table({'comparisons': comparisons})}</div>"


def second_order_html(record: dict) -> str:
    """The record's `second_order` block ("" when it has none)."""
    block = record.get("second_order")
    if not block:
        return ""
    if block.get("status") == "skipped":
        return (
            f"<div><b>{escape(_('Second order'))}</b> {badge('skipped')} "
            f"{escape(localize(str(block.get('reason', ''))))}</div>"
        )
    return _function_block(
        _("Second order: the Hessian of {input}").format(input=block.get("input", "")),
        _observation_rows(block.get("observations") or {}, "hessian"),
        block.get("comparisons") or [],
    )


def function_modes_html(record: dict) -> str:
    """The record's `function_modes` block ("" when it has none)."""
    modes = record.get("function_modes")
    if not modes:
        return ""
    observations = {key: {"name": key, **modes[key]} for key in ("forward_ad", "batched_grad") if key in modes}
    for key, value_key in (("forward_ad", "tangent"), ("batched_grad", "gradients")):
        if key in observations and value_key in observations[key]:
            observations[key]["value"] = observations[key].pop(value_key)
    comparisons = [row for key in ("forward_ad", "batched_grad") for row in modes.get(key, {}).get("comparisons", [])]
    undefined = modes.get("undefined_grad") or {}
    return _function_block(
        _("Forward mode and batched gradients"), _observation_rows(observations, "value"), comparisons
    ) + _function_block(_("Undefined gradients"), _undefined_rows(undefined), undefined.get("comparisons") or [])


def _undefined_rows(block: dict) -> list[str]:
    """One row per case of the undefined_grad observation: each input's gradient, or the crash."""
    rows = []
    for case in block.get("cases") or []:
        which = case.get("undefined")
        name = (
            _code("undefined_grad")
            + " "
            + escape(
                _("(every output's gradient undefined)")
                if which == "all"
                else _("(output {k}'s gradient undefined)").format(k=which)
            )
        )
        if case.get("status") == "crashed":
            rows.append(_row([name, badge("crashed"), escape(localize(str(case.get("reason", ""))))]))
            continue
        for input_name, gradient in (case.get("gradients") or {}).items():
            value = described(gradient) if gradient else _code("None")
            rows.append(_row([f"{name} d/d{_code(input_name)}", value, badge("returned")]))
    return rows


def outputs_html(record: dict) -> str:
    """Each output of a function returning several: its shape, dtype and device, and its own
    observations, or why it was not checked ("" for a one-output record)."""
    entries = record.get("outputs")
    if not isinstance(entries, list):
        return ""
    parts = []
    for entry in entries:
        meta = escape(
            _("shape {shape} · dtype {dtype} · device {device}").format(
                shape=entry.get("shape"), dtype=entry.get("dtype"), device=entry.get("device")
            )
        )
        title = f"<b>{escape(_('Output {k}').format(k=entry.get('index')))}</b> <span>{meta}</span>"
        if not entry.get("differentiable"):
            body = f" {badge('skipped')} {escape(_('not differentiable (not a float tensor requiring grad): not checked'))}"
        else:
            body = f" {badge('passed' if entry.get('passed') else 'failed')}" + observations_table(entry)
        parts.append(f'<div class="jp-gradcheck-output" data-output="{entry.get("index")}">{title}{body}</div>')
    return "".join(parts)
