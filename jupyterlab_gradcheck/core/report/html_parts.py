"""The pieces every HTML view of a record is made of: verdict badges, values with their shape,
dtype and device, and the tables of observations and comparisons.

Colours are JupyterLab theme variables with fixed fallbacks, so a table reads in the dark theme
and in a standalone HTML file alike; styles are inline because notebook outputs and widget values
keep inline styles but may drop `<style>` blocks.
"""

from __future__ import annotations

import json
from html import escape

from ..check.record.complex_values import complex_text, is_complex_value
from ..check.record.observation_names import DESCRIPTIONS
from ..check.record.stored_values import is_stored_value
from ..i18n import N_, _, localize
from .stored_display import SHA_SHOWN

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
