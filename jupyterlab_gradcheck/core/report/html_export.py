"""HTML export: one self-contained page an instructor can open, print or archive.

Per submission it shows the chain and binding status first (can the rest be trusted?), the
flags a grader should look at, then each check through the same renderer the widget uses
(`record_html`): the Expectation column beside the Observation column with shape, dtype and
device, the verdicts, the step-sweep plot, and the check's history with every tolerance
change, its justification and flags. Every failure kept is listed again, highlighted, with
its diagnosis. The page has no scripts and loads nothing from the network.
"""

from __future__ import annotations

import json
import math
from html import escape

from ..check.record.spec import DESCRIPTIONS
from ..i18n import N_, _, active_language, localize, ngettext
from ..i18n import language as in_language
from ..ledger.store import now_utc
from ..values.form import complex_text, is_complex_value, is_stored_value
from .exports import SHA_SHOWN, latest_record

# -------------------- html parts
# The pieces every HTML view of a record is made of: verdict badges, values with their shape,
# dtype and device, and the tables of observations and comparisons.
#
# Colours are JupyterLab theme variables with fixed fallbacks, so a table reads in the dark theme
# and in a standalone HTML file alike; styles are inline because notebook outputs and widget values
# keep inline styles but may drop `<style>` blocks.

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
    "crashed": "var(--jp-error-color1, #d32f2f)",
    "returned": "var(--jp-success-color1, #388e3c)",
    "probable_bug": "var(--jp-error-color1, #d32f2f)",
    "precision_limited": "var(--jp-warn-color1, #f57c00)",
    "kink": "var(--jp-warn-color1, #f57c00)",
    "nondeterministic": "var(--jp-warn-color1, #f57c00)",
}
#: The words a verdict badge shows; a diagnosis code (probable_bug, kink...) is shown as written.
VERDICT_WORDS = {
    "passed": N_("passed"),
    "agrees": N_("agrees"),
    "failed": N_("failed"),
    "disagrees": N_("disagrees"),
    "error": N_("error"),
    "failed to run": N_("failed to run"),
    "not run": N_("not run"),
    "skipped": N_("skipped"),
    "crashed": N_("crashed"),
    "returned": N_("returned"),
}
#: List values longer than this are shown with their first elements and a count.
MAX_SHOWN_ELEMENTS = 12
#: Hex digits of a stored value's sha256 shown; the whole hash is in the element's title.
#: Observations shown in the detail table, in the order the engine makes them.
OBSERVATION_ORDER = (
    "backward_pass_1",
    "backward_pass_2_accumulated",
    "after_clear_none",
    "autograd_grad",
    "finite_difference",
)

_TABLE = f"border-collapse:collapse;margin:4px 0 10px 0;color:{FONT};background:{BACKGROUND}"
_CELL = f"border:1px solid {BORDER};padding:3px 8px;text-align:left;vertical-align:top"
_HEAD = f"{_CELL};background:{HEADER_BACKGROUND};font-weight:600"
_CODE = f"font-family:{CODE_FONT}"
META = f"color:{FONT_DIM};font-size:0.9em;margin-left:6px"
BOX = (
    f"color:{FONT};background:{BACKGROUND};font-family:var(--jp-ui-font-family, sans-serif);"
    "font-size:var(--jp-ui-font-size1, 13px);line-height:1.4;overflow-x:auto"
)


def badge(status: str) -> str:
    """A coloured verdict label: passed, failed, skipped, agrees, disagrees..."""
    colour = BADGE_COLOURS.get(status, BADGE_COLOURS["skipped"])
    return (
        f'<span class="jp-gradcheck-badge" data-status="{escape(status)}" style="background:{colour};'
        f"color:{INVERSE};border-radius:3px;padding:0 6px;font-size:0.85em;font-weight:600;"
        f'white-space:nowrap">{escape(_(VERDICT_WORDS.get(status, status)).upper())}</span>'
    )


def format_value(value) -> str:
    """A record value as text: numbers exactly as stored, long lists shortened with a count."""
    if isinstance(value, str):
        return value
    if is_stored_value(value):
        return f"{stored_summary(value)} · sha256 {str(_stored(value).get('sha256'))[:SHA_SHOWN]}…"
    if is_complex_value(value):  # {"real", "imag"}: a+bi, as the side panel writes it
        real, imag = _flatten(value["real"]), _flatten(value["imag"])
        if len(real) > MAX_SHOWN_ELEMENTS:
            shown = complex_text(real[:MAX_SHOWN_ELEMENTS], imag[:MAX_SHOWN_ELEMENTS])[1:-1]
            return _("[{shown}, ...] ({count} elements, flattened)").format(shown=shown, count=len(real))
        return complex_text(value["real"], value["imag"])
    if isinstance(value, list):
        flat = _flatten(value)
        if len(flat) > MAX_SHOWN_ELEMENTS:
            shown = ", ".join(_number(v) for v in flat[:MAX_SHOWN_ELEMENTS])
            return _("[{shown}, ...] ({count} elements, flattened)").format(shown=shown, count=len(flat))
        return json.dumps(value, separators=(", ", ": "))
    return _number(value)


def stored_summary(value: dict) -> str:
    """A stored value (a tensor kept by its hash beside the ledger) as text: dtype, shape and its
    summary, never its elements beyond the first few the summary keeps."""
    summary = value.get("summary") or {}
    text = _(
        "{dtype} {shape}, stored: min {min} · max {max} · mean {mean} · norm {norm} · non-finite {nonfinite}"
    ).format(
        dtype=_stored(value).get("dtype"),
        shape=json.dumps(_stored(value).get("shape")),
        **{key: _number(summary.get(key)) for key in ("min", "max", "mean", "norm", "nonfinite")},
    )
    head = summary.get("head")
    if isinstance(head, list) and head:
        text += " · " + _("first {count}: {values}").format(count=len(head), values=", ".join(_number(v) for v in head))
    return text


def stored_html(value: dict) -> str:
    """A stored value as HTML: its summary, and its sha256 shortened with the whole hash in the title."""
    sha = escape(str(_stored(value).get("sha256")))
    return (
        f'<span class="jp-gradcheck-stored" data-sha256="{sha}">{html_code(stored_summary(value))}'
        f'<span class="jp-gradcheck-meta" style="{META}" title="sha256 {sha}">sha256 {sha[:SHA_SHOWN]}…</span></span>'
    )


def value_html(value) -> str:
    """A record value as HTML: a stored value with its summary and hash, any other as code."""
    return stored_html(value) if is_stored_value(value) else html_code(format_value(value))


def _stored(value: dict) -> dict:
    """The `stored` part of a stored value ({sha256, shape, dtype, bytes}); empty when malformed."""
    stored = value.get("stored")
    return stored if isinstance(stored, dict) else {}


def _number(value) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return repr(value) if isinstance(value, (int, float)) else str(value)


def _flatten(value) -> list:
    if isinstance(value, list):
        return [inner for item in value for inner in _flatten(item)]
    return [value]


def html_code(text: str) -> str:
    return f'<code style="{_CODE}">{escape(text)}</code>'


def html_row(cells, head: bool = False, attrs: str = "") -> str:
    tag, style = ("th", _HEAD) if head else ("td", _CELL)
    return f"<tr{attrs}>" + "".join(f'<{tag} style="{style}">{c}</{tag}>' for c in cells) + "</tr>"


def html_table(header, rows, css_class: str) -> str:
    body = "".join(rows)
    return (
        f'<table class="{css_class}" style="{_TABLE}"><thead>{html_row(header, head=True)}</thead>'
        f"<tbody>{body}</tbody></table>"
    )


def described(gradient: dict) -> str:
    """An observed value with its shape, dtype and device beside it."""
    meta = escape(
        _("shape {shape} · dtype {dtype} · device {device}").format(
            shape=json.dumps(gradient.get("shape")), dtype=gradient.get("dtype"), device=gradient.get("device")
        )
    )
    return f'{value_html(gradient.get("value"))}<span class="jp-gradcheck-meta" style="{META}">{meta}</span>'


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
            note = (
                _("{scheme} step {step}. {note}")
                .format(scheme=observation.get("scheme", ""), step=observation.get("step"), note=note)
                .strip()
            )
        for input_name, gradient in (observation.get("gradients") or {}).items():
            rows.append(
                html_row(
                    [
                        html_code(name),
                        html_code(input_name),
                        value_html(gradient.get("value")),
                        html_code(json.dumps(gradient.get("shape"))),
                        escape(str(gradient.get("dtype"))),
                        escape(str(gradient.get("device"))),
                        escape(note),
                    ]
                )
            )
    verdict = observations.get("torch_gradcheck")
    if verdict:
        rows.append(
            html_row(
                [
                    html_code("torch_gradcheck"),
                    "",
                    badge(verdict.get("status", "skipped")),
                    "",
                    escape(str(verdict.get("dtype", ""))),
                    escape(str(verdict.get("device", ""))),
                    escape(localize(verdict.get("reason", ""))),
                ]
            )
        )
    if not rows:
        return ""
    return html_table(
        [
            escape(_(h))
            for h in (N_("observation"), N_("input"), N_("value"), N_("shape"), N_("dtype"), N_("device"), N_("note"))
        ],
        rows,
        "jp-gradcheck-observations",
    )


def comparisons_table(record: dict) -> str:
    """Each comparison with its errors, the tolerance it used and its verdict; the output it belongs to
    when the function returns several, and which output gradients were undefined for an undefined_grad row."""
    comparisons = record.get("comparisons") or []
    several = any("output" in c for c in comparisons)
    rows = []
    for c in comparisons:
        where = str(c.get("input", ""))
        if "undefined" in c:
            where += (
                _(" (undefined: output {which})").format(which=c["undefined"])
                if c["undefined"] != "all"
                else _(" (undefined: every output)")
            )
        rows.append(
            html_row(
                [
                    *([html_code(str(c.get("output", "")))] if several else []),
                    html_code(c.get("name", "")),
                    html_code(where),
                    html_code(str(c.get("max_abs_err"))),
                    html_code(str(c.get("max_rel_err"))),
                    html_code(str(c.get("rtol"))),
                    html_code(str(c.get("atol"))),
                    badge("passed" if c.get("passed") else "failed"),
                ],
                attrs=f' data-output="{c["output"]}"' if "output" in c else "",
            )
        )
    if not rows:
        return ""
    header = ([N_("output")] if several else []) + [
        N_("comparison"),
        N_("input"),
        N_("max abs err"),
        N_("max rel err"),
        "rtol",
        "atol",
        N_("verdict"),
    ]
    return html_table([escape(_(h)) for h in header], rows, "jp-gradcheck-comparisons")


# -------------------- function blocks
# The blocks of a record beyond the first-order table: each output of a function returning several,
# a custom Function's second order, and its forward mode, batched and undefined gradients.
#
# Each is shown like the first-order observations: every value with its shape, dtype and device, or
# why it was skipped, and each comparison with its verdict.

_code = html_code
_row = html_row
_table = html_table


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
    batched = ("forward_ad", "batched_grad", "batched_forward_grad")
    observations = {key: {"name": key, **modes[key]} for key in batched if key in modes}
    for key, value_key in (("forward_ad", "tangent"), ("batched_grad", "gradients")):
        if key in observations and value_key in observations[key]:
            observations[key]["value"] = observations[key].pop(value_key)
    comparisons = [row for key in batched for row in modes.get(key, {}).get("comparisons", [])]
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


# -------------------- sweep svg
# One SVG plot of a step sweep, reused by every surface (widget, HTML export, notebook).
#
# Log-log axes: step on x, error on y. One line per dtype, a dashed vertical line at the step
# the check used, and a marker at the theoretical floor (eps^(1/3), eps^(2/3)) for central
# differences. Colours fall back to fixed values outside JupyterLab.

_COLOURS = {"float64": "var(--jp-brand-color1, #1976d2)", "float32": "var(--jp-warn-color1, #f57c00)"}
_WIDTH, _HEIGHT, _LEFT, _BOTTOM, _TOP, _RIGHT = 520, 320, 64, 44, 28, 110
_Y_MIN, _Y_MAX = -18.0, 2.0


def _log(value: float) -> float:
    return max(_Y_MIN, min(_Y_MAX, math.log10(value))) if value > 0 else _Y_MIN


def render(sweep: dict) -> str:
    """The SVG text for the data returned by `sweep.step_sweep`."""
    all_steps = [s for series in sweep["series"] for s in series["steps"]]
    x_min, x_max = math.log10(min(all_steps)), math.log10(max(all_steps))
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM

    def px(step: float) -> float:
        return _LEFT + (math.log10(step) - x_min) / (x_max - x_min) * plot_w

    def py(error: float) -> float:
        return _TOP + (_Y_MAX - _log(error)) / (_Y_MAX - _Y_MIN) * plot_h

    title = _("{scheme} difference error against step for {input} at {x}").format(
        scheme=sweep["scheme"], input=sweep["input"], x=f"{sweep['x']:.6g}"
    )
    if sweep.get("output") is not None:  # a function with several outputs: whose element was differenced
        title += " " + _("(output {output})").format(output=sweep["output"])
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="jp-gradcheck-sweep" width="{_WIDTH}" '
        f'height="{_HEIGHT}" viewBox="0 0 {_WIDTH} {_HEIGHT}" font-family="sans-serif" font-size="11" '
        f'role="img" aria-label="{escape(_("finite-difference error against step"))}">',
        f"<title>{escape(title)}</title>",
        f'<rect x="{_LEFT}" y="{_TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
        'stroke="var(--jp-border-color1, #999)"/>',
    ]
    for decade in range(int(math.floor(x_min)), int(math.ceil(x_max)) + 1, 2):
        x = px(10.0**decade)
        parts.append(
            f'<text x="{x:.1f}" y="{_HEIGHT - _BOTTOM + 14}" text-anchor="middle" '
            f'fill="var(--jp-ui-font-color1, #333)">1e{decade}</text>'
        )
    for decade in range(int(_Y_MIN), int(_Y_MAX) + 1, 4):
        y = py(10.0**decade)
        parts.append(
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" '
            f'fill="var(--jp-ui-font-color1, #333)">1e{decade}</text>'
        )
    parts.append(
        f'<text x="{_LEFT + plot_w / 2}" y="{_HEIGHT - 8}" text-anchor="middle" '
        f'fill="var(--jp-ui-font-color1, #333)">{escape(_("step h"))}</text>'
    )
    parts.append(
        f'<text x="14" y="{_TOP + plot_h / 2}" text-anchor="middle" transform="rotate(-90 14 '
        f'{_TOP + plot_h / 2})" fill="var(--jp-ui-font-color1, #333)">'
        f"{escape(_('{kind} error').format(kind=sweep['error_kind']))}</text>"
    )
    for row, series in enumerate(sweep["series"]):
        colour = _COLOURS.get(series["dtype"], "var(--jp-ui-font-color2, #666)")
        points = " ".join(f"{px(s):.1f},{py(e):.1f}" for s, e in zip(series["steps"], series["errors"]))
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}" '
            f'data-dtype="{series["dtype"]}"/>'
        )
        chosen = px(series["chosen_step"])
        parts.append(
            f'<line x1="{chosen:.1f}" x2="{chosen:.1f}" y1="{_TOP}" y2="{_TOP + plot_h}" '
            f'stroke="{colour}" stroke-dasharray="4 3" data-chosen-step="{series["chosen_step"]:.3g}"/>'
        )
        fx, fy = px(series["floor_step"]), py(series["floor_error"])
        parts.append(
            f'<circle cx="{fx:.1f}" cy="{fy:.1f}" r="4" fill="none" stroke="{colour}" '
            f'data-floor="{series["floor_error"]:.3g}"/>'
        )
        ly = _TOP + 14 + row * 44
        lx = _WIDTH - _RIGHT + 10
        parts.append(f'<line x1="{lx}" x2="{lx + 18}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{lx + 22}" y="{ly + 4}" fill="var(--jp-ui-font-color1, #333)">{series["dtype"]}</text>')
        parts.append(
            f'<text x="{lx}" y="{ly + 18}" fill="var(--jp-ui-font-color2, #666)">- - {escape(_("chosen step"))}</text>'
        )
        parts.append(
            f'<text x="{lx}" y="{ly + 30}" fill="var(--jp-ui-font-color2, #666)">'
            f"o {escape(_('theoretical floor'))}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


# -------------------- record html
# One check as HTML: expectation beside observation, verdicts, diagnosis, history.
#
# The inline widget, the Python API's `_repr_html_` and the HTML export show a check the same
# way, so they all call this module. Expectation and observation stay in separate columns
# (principle 1) and every observed value carries its shape, dtype and device (principle 3).
# The pieces (badges, values, tables) are core/report/html_export.py; the blocks beyond the first
# order (each of several outputs, second order, function modes) core/report/html_export.py.

_BOX = BOX
_META = META
_code = html_code
_row = html_row
_table = html_table

#: What other modules take from here (MAX_SHOWN_ELEMENTS and format_value live in core/report/html_export.py).
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
    pass

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


# -------------------- html export

_PAGE_STYLE = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#212121;background:#fff}
h1{font-size:1.5em;margin:0 0 4px 0} h2{font-size:1.25em;margin:28px 0 6px 0;border-bottom:2px solid #bdbdbd}
h3{font-size:1.05em;margin:18px 0 4px 0}
.meta{color:#616161;font-size:0.9em}
.status{border:1px solid #bdbdbd;border-left:6px solid #388e3c;padding:6px 10px;margin:6px 0}
.status.bad{border-left-color:#d32f2f;background:#fff5f5}
.status ul{margin:2px 0}
.flag{display:inline-block;background:#fff3e0;border:1px solid #f57c00;border-radius:3px;padding:1px 6px;margin:2px}
.failure-kept{border:1px solid #d32f2f;border-left:6px solid #d32f2f;background:#fff5f5;padding:4px 10px;margin:6px 0;font-size:13px}
.check{margin:10px 0 22px 0}
"""


def _no_binding(submission: dict) -> str:
    """Why a submission has no binding to compare, in words that match what is there."""
    if submission["notebook"]:
        return _("the notebook binds nothing yet (no metadata, no attested output)")
    return _("no notebook beside this ledger")


def _status_block(submission: dict) -> str:
    report = submission["verify"]
    chain_ok = submission["chain_ok"]
    binding_ok = submission["binding_ok"]
    items = []
    chain = _("chain {badge} {entries} entries, head {head}").format(
        badge=badge("passed" if chain_ok else "failed"),
        entries=report["entries"],
        head=f"<code>{escape(report['head'][:16])}</code>",
    )
    binding = (
        escape(_("binding"))
        + " "
        + (
            badge("passed")
            if binding_ok
            else badge("failed")
            if binding_ok is False
            else f'<span class="meta">{escape(_no_binding(submission))}</span>'
        )
    )
    witness = report.get("witness")
    if witness is not None:
        binding += f" · {escape(_('witness'))} " + (
            badge("passed")
            if witness["witnessed"]
            else badge("failed")
            if witness["witnessed"] is False
            else f'<span class="meta">{escape(_("saw nothing of it"))}</span>'
        )
        for flag in witness.get("flags") or []:  # late, unwitnessed, other ledgers, private runs
            items.append(f"<li>{escape(localize(flag['reason']))}</li>")
    for error in report["errors"]:
        where = _("line {line}: ").format(line=error["line"]) if error.get("line") else ""
        items.append(f"<li>{escape(where + localize(error['reason']))}</li>")
    for warning in report["warnings"]:
        items.append(f'<li class="meta">{escape(localize(warning))}</li>')
    replay, replayed = report.get("replay"), ""
    if replay is not None:
        replayed = " · " + _("replay {badge} {reproduced} of {observations} observations reproduced").format(
            badge=badge("passed" if replay["ok"] else "failed"),
            reproduced=replay["reproduced"],
            observations=replay["observations"],
        )
        for item in replay["differs"]:
            items += [
                f"<li>{escape(_('replay: line {line} ({check_id}): {difference}').format(line=item['line'], check_id=item['check_id'], difference=localize(d)))}</li>"
                for d in item["differences"]
            ]
        items += [
            f'<li class="meta">{escape(_("replay note: line {line}: {note}").format(line=n["line"], note=localize(n["note"])))}</li>'
            for n in replay["notes"]
        ]
        items += [
            f'<li class="meta">{escape(_("replay skipped: line {line}: {reason}").format(line=n["line"], reason=localize(n["reason"])))}</li>'
            for n in replay["skipped"]
        ]
    bad = " bad" if not report["ok"] else ""
    listing = f"<ul>{''.join(items)}</ul>" if items else ""
    return (
        f'<div class="status{bad}" data-chain-ok="{str(chain_ok).lower()}">{chain} · {binding}{replayed}{listing}</div>'
    )


def _flags_block(submission: dict) -> str:
    labels = {
        "widened_after_failure": N_("tolerance widened after a failure"),
        "expectation_revised_after_observation": N_("expectation revised after the check ran"),
    }
    flags = submission["verify"].get("flags") or []
    if not flags:
        return ""
    spans = [
        f'<span class="flag" data-flag="{escape(f["flag"])}">{escape(f["check_id"])}: '
        f"{escape(_(labels.get(f['flag'], f['flag'])))} (seq {', '.join(map(str, f['seqs']))})</span>"
        for f in flags
    ]
    return f"<div><b>{escape(_('Flags'))}</b> {''.join(spans)}</div>"


def _failures_kept(history: dict) -> str:
    blocks = []
    for failure in history.get("failures_kept") or []:
        entry = failure.get("entry") or {}
        record = (entry.get("data") or {}).get("record") or {}
        title = f"seq {failure['seq']} · {escape(str(failure.get('time') or ''))}"
        if failure.get("failed_to_run"):
            body = escape(_("failed to run: {reason}").format(reason=localize(str(failure.get("reason") or ""))))
        else:
            sentences = "".join(
                f"<li><code>{escape(failure_sentence(f))}</code></li>" for f in failure.get("failures") or []
            )
            # the sweep of the failed run shows whether the step, not the derivation, is at fault
            body = (f"<ul>{sentences}</ul>" if sentences else "") + diagnosis_block(record) + step_sweep_block(record)
        blocks.append(
            f'<div class="failure-kept" data-seq="{failure["seq"]}"><b>{escape(_("Failure kept"))}</b> '
            f'<span class="meta">{title}</span>{body}</div>'
        )
    return "".join(blocks)


def _check_block(history: dict) -> str:
    record = latest_record(history)
    latest = history.get("latest_observation")
    if record is None:
        shown = dict(history.get("expectation") or {"id": history["check_id"]})
        if latest is not None:  # the latest run did not complete
            data = latest.get("data") or {}
            shown.update(failed_to_run=True, reason=data.get("reason"))
    else:
        shown = record
    order = ""
    if latest is not None:
        order = '<div class="meta">{}</div>'.format(
            escape(
                _("expectation written at seq {expectation_seq}, observation at seq {seq} ({time})").format(
                    expectation_seq=latest["data"].get("expectation_seq"),
                    seq=latest["seq"],
                    time=latest.get("time", ""),
                )
            )
        )
    return (
        f'<div class="check" data-check-id="{escape(history["check_id"])}">'
        f"<h3>{escape(history['check_id'])}</h3>{order}{record_html(shown, history=history)}"
        f"{_failures_kept(history)}</div>"
    )


def _submission_block(submission: dict) -> str:
    who = " / ".join(x for x in (submission["student"], submission["assignment"]) if x)
    name = submission["notebook"] or submission["ledger"]
    title = f"{escape(who)} · {escape(name)}" if who else escape(name)
    checks = (
        "".join(_check_block(h) for h in submission["checks"].values())
        or f'<p class="meta">{escape(_("no checks recorded"))}</p>'
    )
    return (
        f'<section class="submission"><h2>{title}</h2>'
        f'<div class="meta">{escape(_("ledger {path}").format(path=submission["ledger"]))}</div>'
        f"{_status_block(submission)}{_flags_block(submission)}{checks}</section>"
    )


def _shared_block(submissions: list[dict]) -> str:
    """The section that lists each pair of submissions sharing a ledger (core.ledger.copies)."""
    pairs = sorted(
        {
            tuple(sorted((s["student"] or s["path"], o["student"] or o["path"]))) + (", ".join(o["how"]),)
            for s in submissions
            for o in s.get("shared_with") or []
        }
    )
    if not pairs:
        return ""
    items = "".join(f"<li>{escape(a)} · {escape(b)}: {escape(how)}</li>" for a, b, how in pairs)
    return f'<section class="shared"><h2>{escape(_("Shared ledgers"))}</h2><ul>{items}</ul></section>'


def to_html(submissions: list[dict], *, title: str | None = None, language: str | None = None) -> str:
    """The whole report as one HTML document, in `language` (default: the active language)."""
    with in_language(language):
        return _document(submissions, _("Gradient check report") if title is None else title)


def _document(submissions: list[dict], title: str) -> str:
    total = sum(len(s["checks"]) for s in submissions)
    trusted = sum(1 for s in submissions if s["chain_ok"] and s["binding_ok"] is not False)
    body = "".join(_submission_block(s) for s in submissions) or f"<p>{escape(_('No notebooks or ledgers found.'))}</p>"
    summary = _(
        "generated {time} · {submissions} submission(s), {checks} check(s), {trusted} with an intact ledger"
    ).format(time=now_utc(), submissions=len(submissions), checks=total, trusted=trusted)
    return (
        f'<!DOCTYPE html>\n<html lang="{active_language()}"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_PAGE_STYLE}</style></head><body>"
        f'<h1>{escape(title)}</h1><div class="meta">{escape(summary)}</div>'
        f"{_shared_block(submissions)}{body}</body></html>\n"
    )
