"""One check as HTML: expectation beside observation, verdicts, diagnosis, history.

The inline widget, the Python API's `_repr_html_` and the HTML export show a check the same
way, so they all call this module. Expectation and observation stay in separate columns
(principle 1) and every observed value carries its shape, dtype and device (principle 3).
The pieces (badges, values, tables) are core/report/html_parts.py; the blocks beyond the first
order (each of several outputs, second order, function modes) core/report/function_blocks.py.
"""

from __future__ import annotations

import json
from html import escape

from ..i18n import N_, _, localize, ngettext
from .function_blocks import function_modes_html, outputs_html, second_order_html
from .html_parts import BOX as _BOX
from .html_parts import (
    FONT_DIM,
    MAX_SHOWN_ELEMENTS,
    badge,
    comparisons_table,
    described,
    format_value,
    observations_table,
    value_html,
)
from .html_parts import META as _META
from .html_parts import html_code as _code
from .html_parts import html_row as _row
from .html_parts import html_table as _table

#: What other modules take from here (MAX_SHOWN_ELEMENTS and format_value live in core/report/html_parts.py).
__all__ = [
    "MAX_SHOWN_ELEMENTS",
    "FONT_DIM",
    "badge",
    "format_value",
    "described",
    "record_html",
    "history_html",
    "failure_sentence",
    "diagnosis_block",
    "step_sweep_block",
    "expected_per_input",
    "verdict_of",
]


def expected_per_input(record: dict) -> dict:
    """The analytical gradient as written, split per input name (None when not declared)."""
    raw = record.get("analytical_gradient")
    names = list((record.get("inputs") or {}).keys())
    if isinstance(raw, dict):
        return {name: raw.get(name) for name in names}
    if len(names) == 1:
        return {names[0]: raw}
    return {name: raw for name in names}


def verdict_of(record: dict) -> str:
    """passed / failed / failed to run / not run, for the heading badge."""
    if record.get("failed_to_run"):
        return "failed to run"
    if not record.get("executed"):
        return "not run"
    return "passed" if record.get("passed") else "failed"


def expectation_observation_table(record: dict) -> str:
    """The central table: per input, the expectation written first beside what autograd gave."""
    observations = record.get("observations") or {}
    first = (observations.get("backward_pass_1") or {}).get("gradients") or {}
    rows = []
    for label, output, expected_by_input, observed_by_input in _per_output_expectations(record, first):
        for name, expected in expected_by_input.items():
            expectation = (
                value_html(expected)
                if expected is not None
                else (f'<span style="color:{FONT_DIM}">{escape(_("none declared"))}</span>')
            )
            observed = observed_by_input.get(name)
            observation = (
                described(observed) if observed else f'<span style="color:{FONT_DIM}">{escape(_("not run"))}</span>'
            )
            rows.append(
                _row(
                    [f"d {label} / d {_code(name)}", expectation, observation],
                    attrs=f' data-input="{escape(name)}"' + (f' data-output="{output}"' if output is not None else ""),
                )
            )
    tolerance = record.get("tolerance") or {}
    worst = _worst_analytical(record.get("comparisons") or [])
    rows.append(
        _row(
            [
                escape(_("tolerance")),
                _code(f"rtol={tolerance.get('rtol')} atol={tolerance.get('atol')}"),
                (
                    _code(
                        _("max abs err {abs_err} · max rel err {rel_err}").format(
                            abs_err=worst["max_abs_err"], rel_err=worst["max_rel_err"]
                        )
                    )
                    if worst
                    else f'<span style="color:{FONT_DIM}">{escape(_("no comparison yet"))}</span>'
                ),
            ]
        )
    )
    for label, word in (("origin", N_("origin")), ("destination", N_("destination"))):
        if record.get(label):
            rows.append(_row([escape(_(word)), escape(record[label]), ""]))
    return _table(
        ["", escape(_("Expectation")), escape(_("Observation"))], rows, "jp-gradcheck-expectation-observation"
    )


def _per_output_expectations(record: dict, first: dict) -> list:
    """(label, output index or None, expectation per input, observed gradient per input) for each output
    checked: one `f` for a one-output record, `f[k]` for each differentiable output of several."""
    entries = record.get("outputs")
    written = record.get("analytical_gradient")
    if not isinstance(entries, list):
        return [("f", None, expected_per_input(record), first)]
    per_output = written.get("outputs") if isinstance(written, dict) else None
    found = []
    for entry in entries:
        k = entry.get("index")
        if not entry.get("differentiable"):
            continue
        own = per_output[k] if isinstance(per_output, list) and k < len(per_output) else None
        observed = ((entry.get("observations") or {}).get("backward_pass_1") or {}).get("gradients") or {}
        found.append((f"f[{k}]", k, expected_per_input({**record, "analytical_gradient": own}), observed))
    return found


def _worst_analytical(comparisons: list) -> dict | None:
    analytical = [c for c in comparisons if c.get("left") == "analytical" and c.get("max_abs_err") is not None]
    return max(analytical, key=lambda c: c["max_abs_err"]) if analytical else None


def failure_sentence(failure: dict) -> str:
    """`x[2]: analytical 5.0 vs backward_pass_1 1.0 (abs err 4.0, rel err 4.0)`, as plain text; for a
    function of several outputs `output 1, x[2]: ...`; for a failure at no element (a backward that
    crashed) its reason."""
    if failure.get("index") is None and failure.get("abs_err") is None and failure.get("reason"):
        return localize(str(failure["reason"]))
    index = failure.get("index")
    where = f"{failure.get('input')}{json.dumps(index) if index else ''}"
    if failure.get("output") is not None:
        where = _("output {output}, {where}").format(output=failure["output"], where=where)
    left, _vs, right = str(failure.get("comparison", "")).partition("_vs_")
    left, right = failure.get("left_label") or left or "left", failure.get("right_label") or right or "right"
    return _("{where}: {left} {left_value} vs {right} {right_value} (abs err {abs_err}, rel err {rel_err})").format(
        where=where,
        left=left,
        left_value=format_value(failure.get("left")),
        right=right,
        right_value=format_value(failure.get("right")),
        abs_err=failure.get("abs_err"),
        rel_err=failure.get("rel_err"),
    )


def diagnosis_block(record: dict) -> str:
    """The diagnosis of every failed comparison: where, by how much, and why we think so."""
    failures = record.get("failures") or ([record["failure"]] if record.get("failure") else [])
    if not failures:
        return ""
    items = []
    for failure in failures:
        items.append(
            f"<li>{_code(str(failure.get('comparison')))}: {escape(_('worst element'))} "
            f"{_code(failure_sentence(failure))}. {escape(_('Diagnosis'))} "
            f"{badge(str(failure.get('diagnosis', 'probable_bug')))} {escape(localize(str(failure.get('reason', ''))))}</li>"
        )
    return (
        f'<div class="jp-gradcheck-diagnosis"><b>{escape(_("Diagnosis"))}</b><ul style="margin:2px 0">'
        f"{''.join(items)}</ul></div>"
    )


def symbolic_block(record: dict) -> str:
    """SymPy's opinion: its derivative and whether it agrees with the expectation and autograd."""
    symbolic = record.get("symbolic")
    if not symbolic:
        return ""
    status = symbolic.get("status", "skipped")
    parts = [f"<b>SymPy</b> {badge(status)}"]
    derivative = symbolic.get("derivative")
    if isinstance(derivative, dict) and derivative:
        parts.append(", ".join(f"d/d{_code(k)} = {_code(str(v))}" for k, v in derivative.items()))
    for key, label in (("analytical_agrees", N_("expectation")), ("autograd_agrees", "autograd")):
        if key in symbolic and symbolic[key] is not None:
            parts.append(escape(f"{_(label)} {_('agrees') if symbolic[key] else _('disagrees')}"))
    if symbolic.get("reason"):
        parts.append(escape(localize(str(symbolic["reason"]))))
    return f'<div class="jp-gradcheck-symbolic">{" · ".join(parts)}</div>'


def environment_line(record: dict) -> str:
    """torch, python, platform and device of the run."""
    env = record.get("environment")
    if not env:
        return ""
    bits = [
        f"torch {env.get('torch')}",
        f"python {env.get('python')}",
        str(env.get("platform", "")),
        f"{_('device')} {env.get('device_name', env.get('device', ''))}",
    ]
    if env.get("cuda"):
        bits.append(f"CUDA {env['cuda']}")
    return f'<div class="jp-gradcheck-environment" style="color:{FONT_DIM};font-size:0.9em">{escape(" · ".join(bits))}</div>'


def step_sweep_block(record: dict) -> str:
    """The step-sweep plot of the record's `step_sweep` data, drawn by the core's SVG; for a function with
    several outputs the heading names the output whose element the sweep differenced."""
    sweep = record.get("step_sweep")
    if not isinstance(sweep, dict) or not sweep.get("series"):
        return ""
    from .sweep_svg import render

    heading = (
        _("Step sweep")
        if sweep.get("output") is None
        else _("Step sweep, output {output}").format(output=sweep["output"])
    )
    return f'<div class="jp-gradcheck-sweep-plot"><b>{escape(heading)}</b><br>{render(sweep)}</div>'


def record_html(record: dict, *, history: dict | None = None) -> str:
    """The whole check: heading, the expectation/observation table, details and history."""
    heading = (
        f'<div style="margin:2px 0 4px 0"><b>{_code(str(record.get("id", record.get("function", ""))))}</b> '
        f'{badge(verdict_of(record))} <span style="{_META}">{escape(_("function"))} '
        f"{_code(str(record.get('function')))} · dtype {escape(str(record.get('dtype')))} · "
        f"{escape(_('device'))} {escape(str(record.get('device')))}</span></div>"
    )
    parts = [heading, expectation_observation_table(record)]
    if record.get("failed_to_run") and record.get("reason"):
        parts.append(f"<div><b>{escape(_('Failed to run'))}</b>: {escape(localize(str(record['reason'])))}</div>")
    parts += [
        diagnosis_block(record),
        symbolic_block(record),
        comparisons_table(record),
        observations_table(record),
        outputs_html(record),
        second_order_html(record),
        function_modes_html(record),
        step_sweep_block(record),
        environment_line(record),
    ]
    if history is not None:
        parts.append(history_html(history))
    return f'<div class="jp-gradcheck-record" style="{_BOX}">{"".join(p for p in parts if p)}</div>'


def history_html(history: dict) -> str:
    """One check's ledger history (`Ledger.checks()[id]`): runs, failures kept, edits and why."""
    runs = history.get("runs", 0)
    kept = history.get("failures_kept") or []
    rows = []
    for failure in kept:
        found = failure.get("failures") or []
        what = "; ".join(failure_sentence(f) for f in found) or escape(str(failure.get("reason") or ""))
        label = "failed to run" if failure.get("failed_to_run") else "failed"  # badge codes
        rows.append(
            (
                failure.get("seq") or 0,
                _row(
                    [
                        _code(str(failure.get("seq"))),
                        escape(str(failure.get("time", ""))),
                        badge(label),
                        _code(what) if found else escape(what),
                        "",
                    ]
                ),
            )
        )
    failed_seqs = {failure.get("seq") for failure in kept}
    latest = history.get("latest_observation") or {}
    for seq in history.get("observation_seqs") or []:
        if seq not in failed_seqs:
            time = latest.get("time", "") if latest.get("seq") == seq else ""
            rows.append((seq, _row([_code(str(seq)), escape(str(time)), badge("passed"), escape(_("run")), ""])))
    for change in history.get("tolerance_history") or []:
        flags = [f for f in ("widened", "tightened", "after_failure") if change.get(f)]
        rows.append(
            (
                change.get("seq") or 0,
                _row(
                    [
                        _code(str(change.get("seq"))),
                        escape(str(change.get("time", ""))),
                        escape(_("tolerance change ({target})").format(target=change.get("target"))),
                        _code(f"{_tol(change.get('old'))} -> {_tol(change.get('new'))}")
                        + (f' <span style="{_META}">{escape(", ".join(flags))}</span>' if flags else ""),
                        escape(str(change.get("justification") or "")),
                    ]
                ),
            )
        )
    for change in history.get("expectation_changes") or []:
        event = (
            _("expectation change (after an observation)")
            if change.get("after_observation")
            else _("expectation change")
        )
        rows.append(
            (
                change.get("seq") or 0,
                _row(
                    [
                        _code(str(change.get("seq"))),
                        escape(str(change.get("time", ""))),
                        escape(event),
                        _code(f"{format_value(change.get('old'))} -> {format_value(change.get('new'))}"),
                        escape(str(change.get("justification") or "")),
                    ]
                ),
            )
        )
    rows = [row for _seq, row in sorted(rows, key=lambda item: item[0])]
    counts = ", ".join(
        (
            ngettext("{count} run", "{count} runs", runs).format(count=runs),
            ngettext("{count} failure kept", "{count} failures kept", len(kept)).format(count=len(kept)),
            _("{count} tolerance edit(s)").format(count=len(history.get("tolerance_history") or [])),
        )
    )
    summary = f'<div><b>{escape(_("History"))}</b> <span style="{_META}">{escape(counts)}</span></div>'
    if not rows:
        return f'<div class="jp-gradcheck-history">{summary}</div>'
    return (
        f'<div class="jp-gradcheck-history">{summary}'
        f"{_table([escape(_(h)) for h in ('seq', N_('time'), N_('event'), N_('what'), N_('justification'))], rows, 'jp-gradcheck-history-table')}</div>"
    )


def _tol(value) -> str:
    if isinstance(value, dict):
        return f"rtol={value.get('rtol')} atol={value.get('atol')}"
    return str(value)
