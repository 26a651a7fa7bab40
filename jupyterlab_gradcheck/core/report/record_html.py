"""One check as HTML: expectation beside observation, verdicts, diagnosis, history.

The inline widget, the Python API's `_repr_html_` and the HTML export show a check the same
way, so they all call this module. Expectation and observation stay in separate columns
(principle 1) and every observed value carries its shape, dtype and device (principle 3).
Colours are JupyterLab theme variables with fixed fallbacks, so the table reads in the dark
theme and in a standalone HTML file alike. Styles are inline because notebook outputs and
widget values keep inline styles but may drop `<style>` blocks.
"""

from __future__ import annotations

import json
from html import escape

from ..check.observations import DESCRIPTIONS
from ..i18n import N_, _, localize, ngettext

#: Theme variables with fallbacks for pages outside JupyterLab.
FONT = "var(--jp-ui-font-color1, #212121)"
FONT_DIM = "var(--jp-ui-font-color2, #616161)"
BACKGROUND = "var(--jp-layout-color1, #fff)"
HEADER_BACKGROUND = "var(--jp-layout-color2, #eee)"
BORDER = "var(--jp-border-color2, #bdbdbd)"
CODE_FONT = "var(--jp-code-font-family, monospace)"
INVERSE = "var(--jp-ui-inverse-font-color0, #fff)"
BADGE_COLOURS = {
    "passed": "var(--jp-success-color1, #388e3c)",
    "agrees": "var(--jp-success-color1, #388e3c)",
    "failed": "var(--jp-error-color1, #d32f2f)",
    "disagrees": "var(--jp-error-color1, #d32f2f)",
    "error": "var(--jp-error-color1, #d32f2f)",
    "failed to run": "var(--jp-error-color1, #d32f2f)",
    "not run": "var(--jp-warn-color1, #f57c00)",
    "skipped": "var(--jp-layout-color4, #757575)",
    "probable_bug": "var(--jp-error-color1, #d32f2f)",
    "precision_limited": "var(--jp-warn-color1, #f57c00)",
    "kink": "var(--jp-warn-color1, #f57c00)",
    "nondeterministic": "var(--jp-warn-color1, #f57c00)",
}
#: The words a verdict badge shows; a diagnosis code (probable_bug, kink...) is shown as written.
VERDICT_WORDS = {"passed": N_("passed"), "agrees": N_("agrees"), "failed": N_("failed"),
                 "disagrees": N_("disagrees"), "error": N_("error"), "failed to run": N_("failed to run"),
                 "not run": N_("not run"), "skipped": N_("skipped")}
#: List values longer than this are shown with their first elements and a count.
MAX_SHOWN_ELEMENTS = 12
#: Observations shown in the detail table, in the order the engine makes them.
OBSERVATION_ORDER = (
    "backward_pass_1", "backward_pass_2_accumulated", "after_clear_none", "autograd_grad",
    "finite_difference",
)

_TABLE = f"border-collapse:collapse;margin:4px 0 10px 0;color:{FONT};background:{BACKGROUND}"
_CELL = f"border:1px solid {BORDER};padding:3px 8px;text-align:left;vertical-align:top"
_HEAD = f"{_CELL};background:{HEADER_BACKGROUND};font-weight:600"
_CODE = f"font-family:{CODE_FONT}"
_META = f"color:{FONT_DIM};font-size:0.9em;margin-left:6px"
_BOX = (f"color:{FONT};background:{BACKGROUND};font-family:var(--jp-ui-font-family, sans-serif);"
        "font-size:var(--jp-ui-font-size1, 13px);line-height:1.4;overflow-x:auto")


def badge(status: str) -> str:
    """A coloured verdict label: passed, failed, skipped, agrees, disagrees..."""
    colour = BADGE_COLOURS.get(status, BADGE_COLOURS["skipped"])
    return (f'<span class="jp-gradcheck-badge" data-status="{escape(status)}" style="background:{colour};'
            f'color:{INVERSE};border-radius:3px;padding:0 6px;font-size:0.85em;font-weight:600;'
            f'white-space:nowrap">{escape(_(VERDICT_WORDS.get(status, status)).upper())}</span>')


def format_value(value) -> str:
    """A record value as text: numbers exactly as stored, long lists shortened with a count."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        flat = _flatten(value)
        if len(flat) > MAX_SHOWN_ELEMENTS:
            shown = ", ".join(_number(v) for v in flat[:MAX_SHOWN_ELEMENTS])
            return _("[{shown}, ...] ({count} elements, flattened)").format(shown=shown, count=len(flat))
        return json.dumps(value, separators=(", ", ": "))
    return _number(value)


def _number(value) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return repr(value) if isinstance(value, (int, float)) else str(value)


def _flatten(value) -> list:
    if isinstance(value, list):
        return [inner for item in value for inner in _flatten(item)]
    return [value]


def _code(text: str) -> str:
    return f'<code style="{_CODE}">{escape(text)}</code>'


def _row(cells, head: bool = False, attrs: str = "") -> str:
    tag, style = ("th", _HEAD) if head else ("td", _CELL)
    return f"<tr{attrs}>" + "".join(f'<{tag} style="{style}">{c}</{tag}>' for c in cells) + "</tr>"


def _table(header, rows, css_class: str) -> str:
    body = "".join(rows)
    return (f'<table class="{css_class}" style="{_TABLE}"><thead>{_row(header, head=True)}</thead>'
            f"<tbody>{body}</tbody></table>")


def described(gradient: dict) -> str:
    """An observed value with its shape, dtype and device beside it."""
    meta = escape(_("shape {shape} · dtype {dtype} · device {device}").format(
        shape=json.dumps(gradient.get("shape")), dtype=gradient.get("dtype"), device=gradient.get("device")))
    return f'{_code(format_value(gradient.get("value")))}<span class="jp-gradcheck-meta" style="{_META}">{meta}</span>'


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
    for name, expected in expected_per_input(record).items():
        expectation = _code(format_value(expected)) if expected is not None else (
            f'<span style="color:{FONT_DIM}">{escape(_("none declared"))}</span>')
        observed = first.get(name)
        observation = described(observed) if observed else f'<span style="color:{FONT_DIM}">{escape(_("not run"))}</span>'
        rows.append(_row([f"d f / d {_code(name)}", expectation, observation],
                         attrs=f' data-input="{escape(name)}"'))
    tolerance = record.get("tolerance") or {}
    worst = _worst_analytical(record.get("comparisons") or [])
    rows.append(_row([
        escape(_("tolerance")),
        _code(f'rtol={tolerance.get("rtol")} atol={tolerance.get("atol")}'),
        (_code(_("max abs err {abs_err} · max rel err {rel_err}").format(abs_err=worst["max_abs_err"],
                                                                        rel_err=worst["max_rel_err"]))
         if worst else f'<span style="color:{FONT_DIM}">{escape(_("no comparison yet"))}</span>'),
    ]))
    for label, word in (("origin", N_("origin")), ("destination", N_("destination"))):
        if record.get(label):
            rows.append(_row([escape(_(word)), escape(record[label]), ""]))
    return _table(["", escape(_("Expectation")), escape(_("Observation"))], rows,
                  "jp-gradcheck-expectation-observation")


def _worst_analytical(comparisons: list) -> dict | None:
    analytical = [c for c in comparisons if c.get("left") == "analytical" and c.get("max_abs_err") is not None]
    return max(analytical, key=lambda c: c["max_abs_err"]) if analytical else None


def observations_table(record: dict) -> str:
    """Every observation, per input: value, shape, dtype, device and what it shows."""
    observations = record.get("observations") or {}
    rows = []
    names = [n for n in OBSERVATION_ORDER if n in observations]
    names += [n for n in observations if n not in names and n != "torch_gradcheck"]
    for name in names:
        observation = observations[name]
        note = localize(observation.get("note") or observation.get("description") or DESCRIPTIONS.get(name, ""))
        if name == "finite_difference":
            note = _("{scheme} step {step}. {note}").format(scheme=observation.get("scheme", ""),
                                                            step=observation.get("step"), note=note).strip()
        for input_name, gradient in (observation.get("gradients") or {}).items():
            rows.append(_row([
                _code(name), _code(input_name), _code(format_value(gradient.get("value"))),
                _code(json.dumps(gradient.get("shape"))), escape(str(gradient.get("dtype"))),
                escape(str(gradient.get("device"))), escape(note),
            ]))
    verdict = observations.get("torch_gradcheck")
    if verdict:
        rows.append(_row([_code("torch_gradcheck"), "", badge(verdict.get("status", "skipped")), "",
                          escape(str(verdict.get("dtype", ""))), escape(str(verdict.get("device", ""))),
                          escape(localize(verdict.get("reason", "")))]))
    if not rows:
        return ""
    return _table([escape(_(h)) for h in (N_("observation"), N_("input"), N_("value"), N_("shape"), N_("dtype"),
                                          N_("device"), N_("note"))], rows,
                  "jp-gradcheck-observations")


def comparisons_table(record: dict) -> str:
    """Each comparison with its errors, the tolerance it used and its verdict."""
    rows = []
    for c in record.get("comparisons") or []:
        rows.append(_row([
            _code(c.get("name", "")), _code(str(c.get("input", ""))),
            _code(str(c.get("max_abs_err"))), _code(str(c.get("max_rel_err"))),
            _code(str(c.get("rtol"))), _code(str(c.get("atol"))),
            badge("passed" if c.get("passed") else "failed"),
        ]))
    if not rows:
        return ""
    return _table([escape(_(h)) for h in (N_("comparison"), N_("input"), N_("max abs err"), N_("max rel err"),
                                          "rtol", "atol", N_("verdict"))], rows,
                  "jp-gradcheck-comparisons")


def failure_sentence(failure: dict) -> str:
    """`x[2]: analytical 5.0 vs backward_pass_1 1.0 (abs err 4.0, rel err 4.0)`, as plain text."""
    index = failure.get("index")
    where = f'{failure.get("input")}{json.dumps(index) if index else ""}'
    left, _vs, right = str(failure.get("comparison", "")).partition("_vs_")
    left, right = failure.get("left_label") or left or "left", failure.get("right_label") or right or "right"
    return _("{where}: {left} {left_value} vs {right} {right_value} (abs err {abs_err}, rel err {rel_err})").format(
        where=where, left=left, left_value=format_value(failure.get("left")), right=right,
        right_value=format_value(failure.get("right")), abs_err=failure.get("abs_err"), rel_err=failure.get("rel_err"))


def diagnosis_block(record: dict) -> str:
    """The diagnosis of every failed comparison: where, by how much, and why we think so."""
    failures = record.get("failures") or ([record["failure"]] if record.get("failure") else [])
    if not failures:
        return ""
    items = []
    for failure in failures:
        items.append(
            f'<li>{_code(str(failure.get("comparison")))}: {escape(_("worst element"))} '
            f'{_code(failure_sentence(failure))}. {escape(_("Diagnosis"))} '
            f'{badge(str(failure.get("diagnosis", "probable_bug")))} {escape(localize(str(failure.get("reason", ""))))}</li>')
    return (f'<div class="jp-gradcheck-diagnosis"><b>{escape(_("Diagnosis"))}</b><ul style="margin:2px 0">'
            f'{"".join(items)}</ul></div>')


def symbolic_block(record: dict) -> str:
    """SymPy's opinion: its derivative and whether it agrees with the expectation and autograd."""
    symbolic = record.get("symbolic")
    if not symbolic:
        return ""
    status = symbolic.get("status", "skipped")
    parts = [f'<b>SymPy</b> {badge(status)}']
    derivative = symbolic.get("derivative")
    if isinstance(derivative, dict) and derivative:
        parts.append(", ".join(f"d/d{_code(k)} = {_code(str(v))}" for k, v in derivative.items()))
    for key, label in (("analytical_agrees", N_("expectation")), ("autograd_agrees", "autograd")):
        if key in symbolic and symbolic[key] is not None:
            parts.append(escape(f'{_(label)} {_("agrees") if symbolic[key] else _("disagrees")}'))
    if symbolic.get("reason"):
        parts.append(escape(localize(str(symbolic["reason"]))))
    return f'<div class="jp-gradcheck-symbolic">{" · ".join(parts)}</div>'


def environment_line(record: dict) -> str:
    """torch, python, platform and device of the run."""
    env = record.get("environment")
    if not env:
        return ""
    bits = [f'torch {env.get("torch")}', f'python {env.get("python")}', str(env.get("platform", "")),
            f'{_("device")} {env.get("device_name", env.get("device", ""))}']
    if env.get("cuda"):
        bits.append(f'CUDA {env["cuda"]}')
    return f'<div class="jp-gradcheck-environment" style="color:{FONT_DIM};font-size:0.9em">{escape(" · ".join(bits))}</div>'


def step_sweep_block(record: dict) -> str:
    """The step-sweep plot of the record's `step_sweep` data, drawn by the core's SVG."""
    sweep = record.get("step_sweep")
    if not isinstance(sweep, dict) or not sweep.get("series"):
        return ""
    from .sweep_svg import render

    return f'<div class="jp-gradcheck-sweep-plot"><b>{escape(_("Step sweep"))}</b><br>{render(sweep)}</div>'


def record_html(record: dict, *, history: dict | None = None) -> str:
    """The whole check: heading, the expectation/observation table, details and history."""
    heading = (f'<div style="margin:2px 0 4px 0"><b>{_code(str(record.get("id", record.get("function", ""))))}</b> '
               f'{badge(verdict_of(record))} <span style="{_META}">{escape(_("function"))} '
               f'{_code(str(record.get("function")))} · dtype {escape(str(record.get("dtype")))} · '
               f'{escape(_("device"))} {escape(str(record.get("device")))}</span></div>')
    parts = [heading, expectation_observation_table(record)]
    if record.get("failed_to_run") and record.get("reason"):
        parts.append(f'<div><b>{escape(_("Failed to run"))}</b>: {escape(localize(str(record["reason"])))}</div>')
    parts += [diagnosis_block(record), symbolic_block(record), comparisons_table(record),
              observations_table(record), second_order_html(record), function_modes_html(record),
              step_sweep_block(record), environment_line(record)]
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
        rows.append((failure.get("seq") or 0, _row([
            _code(str(failure.get("seq"))), escape(str(failure.get("time", ""))), badge(label),
            _code(what) if found else escape(what), ""])))
    failed_seqs = {failure.get("seq") for failure in kept}
    latest = history.get("latest_observation") or {}
    for seq in history.get("observation_seqs") or []:
        if seq not in failed_seqs:
            time = latest.get("time", "") if latest.get("seq") == seq else ""
            rows.append((seq, _row([_code(str(seq)), escape(str(time)), badge("passed"), escape(_("run")), ""])))
    for change in history.get("tolerance_history") or []:
        flags = [f for f in ("widened", "tightened", "after_failure") if change.get(f)]
        rows.append((change.get("seq") or 0, _row([
            _code(str(change.get("seq"))), escape(str(change.get("time", ""))),
            escape(_("tolerance change ({target})").format(target=change.get("target"))),
            _code(f'{_tol(change.get("old"))} -> {_tol(change.get("new"))}') + (
                f' <span style="{_META}">{escape(", ".join(flags))}</span>' if flags else ""),
            escape(str(change.get("justification") or "")),
        ])))
    for change in history.get("expectation_changes") or []:
        event = _("expectation change (after an observation)") if change.get("after_observation") else \
            _("expectation change")
        rows.append((change.get("seq") or 0, _row([
            _code(str(change.get("seq"))), escape(str(change.get("time", ""))), escape(event),
            _code(f'{format_value(change.get("old"))} -> {format_value(change.get("new"))}'),
            escape(str(change.get("justification") or "")),
        ])))
    rows = [row for _seq, row in sorted(rows, key=lambda item: item[0])]
    counts = ", ".join((ngettext("{count} run", "{count} runs", runs).format(count=runs),
                        ngettext("{count} failure kept", "{count} failures kept", len(kept)).format(count=len(kept)),
                        _("{count} tolerance edit(s)").format(count=len(history.get("tolerance_history") or []))))
    summary = f'<div><b>{escape(_("History"))}</b> <span style="{_META}">{escape(counts)}</span></div>'
    if not rows:
        return f'<div class="jp-gradcheck-history">{summary}</div>'
    return (f'<div class="jp-gradcheck-history">{summary}'
            f'{_table([escape(_(h)) for h in ("seq", N_("time"), N_("event"), N_("what"), N_("justification"))], rows, "jp-gradcheck-history-table")}</div>')


def _tol(value) -> str:
    if isinstance(value, dict):
        return f'rtol={value.get("rtol")} atol={value.get("atol")}'
    return str(value)


# A custom Function's second order and forward mode (core/check/second_order.py, function_modes.py),
# shown like the first-order observations: each value with its shape, dtype and device, or why it was skipped.
def _observation_rows(observations: dict, value_key: str) -> list[str]:
    rows = []
    for key, observation in observations.items():
        name = observation.get("name", key)
        if observation.get("status") == "skipped":
            rows.append(_row([_code(name), badge("skipped"), escape(localize(str(observation.get("reason", ""))))]))
        elif value_key in observation:
            rows.append(_row([_code(name), described(observation[value_key]),
                              escape(localize(str(observation.get("note") or observation.get("description") or "")))]))
        elif "status" in observation:
            rows.append(_row([_code(name), badge(observation["status"]),
                              escape(localize(str(observation.get("reason", ""))))]))
    return rows


def _function_block(title: str, rows: list[str], comparisons: list[dict]) -> str:
    if not rows and not comparisons:
        return ""
    table = _table([escape(_(h)) for h in (N_("observation"), N_("value"), N_("note"))], rows,
                   "jp-gradcheck-function-observations") if rows else ""
    return f"<div><b>{escape(title)}</b>{table}{comparisons_table({'comparisons': comparisons})}</div>"


def second_order_html(record: dict) -> str:
    """The record's `second_order` block ("" when it has none)."""
    block = record.get("second_order")
    if not block:
        return ""
    return _function_block(_("Second order: the Hessian of {input}").format(input=block.get("input", "")),
                  _observation_rows(block.get("observations") or {}, "hessian"), block.get("comparisons") or [])


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
    return _function_block(_("Forward mode and batched gradients"), _observation_rows(observations, "value"), comparisons)
