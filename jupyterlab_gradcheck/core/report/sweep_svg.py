"""One SVG plot of a step sweep, reused by every surface (widget, HTML export, notebook).

Log-log axes: step on x, error on y. One line per dtype, a dashed vertical line at the step
the check used, and a marker at the theoretical floor (eps^(1/3), eps^(2/3)) for central
differences. Colours fall back to fixed values outside JupyterLab.
"""

from __future__ import annotations

import math
from html import escape

from ..i18n import _

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
