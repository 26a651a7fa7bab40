"""The inline panel: declare a check in a notebook cell, run it in the kernel, see the evidence.

Built from stock ipywidgets 8 only, so it renders wherever the ipywidgets lab extension is
installed, with no JavaScript of ours. The expectation fields come first because the
expectation is written before anything runs (principle 1); the result shows it beside the
observation. Every run goes through the core and the notebook's ledger, and a tolerance that
moves after a run needs a written justification before the next run (principle 6).
"""

from __future__ import annotations

import json
import os
from html import escape

import ipywidgets as widgets

from ..core.check.environment import available_devices
from ..core.check.record import spec as defaults
from ..core.check.record.spec import INPUT_FIELDS, OUTPUT_FIELDS, parse_spec, resolve_device
from ..core.errors import GradcheckError, JustificationRequired, SpecError
from ..core.i18n import _, active_language, checked, language, localize, translate_tree
from ..core.jsonio import loads_strict
from ..core.report.html_export import FONT_DIM, history_html, record_html
from ..kernel.kernel_run import LedgerLocationMissing, open_ledger, run_attested

_LABEL_WIDTH = "170px"
_STYLE = {"description_width": _LABEL_WIDTH}
_WIDE = widgets.Layout(width="95%")
_ERROR = "var(--jp-error-color1, #d32f2f)"
_OK = "var(--jp-success-color1, #388e3c)"


def _message(text: str, colour: str) -> str:
    return f'<div class="jp-gradcheck-message" style="color:{colour};white-space:pre-wrap">{escape(text)}</div>'


def _number_or_text(text: str):
    """A JSON value or a number (`.5`) when the text is one; otherwise the text itself, so the
    core names what is wrong with it. NaN and infinities stay text: the core refuses them."""
    text = text.strip()
    if not text:
        return None
    if text.lower().lstrip("+-") in ("nan", "inf", "infinity"):
        return text
    try:
        return loads_strict(text)
    except SpecError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _written(value) -> str:
    """A record value as the user would type it back into a field."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


#: Significant digits of an error or a tolerance the panel shows (the ledger keeps them whole).
ERROR_DIGITS = 3
_ROUNDED = ("max_abs_err", "max_rel_err", "abs_err", "rel_err", "rtol", "atol")


def shown(record: dict, history: dict | None) -> tuple[dict, dict | None]:
    """The record and its history as a person reads them, for display only: each English
    sentence the record keeps (a diagnosis, a note) in the panel's language, and errors and
    tolerances to ERROR_DIGITS significant digits (3.67e-09, not 3.666852862501036e-09).
    The record in the ledger and the one `run()` returns stay as they are."""
    lang = active_language()
    return _rounded(translate_tree(record, lang)), None if history is None else translate_tree(history, lang)


def _rounded(value):
    if isinstance(value, dict):
        return {
            key: float(f"{item:.{ERROR_DIGITS}g}") if key in _ROUNDED and isinstance(item, float) else _rounded(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_rounded(item) for item in value]
    return value


class GradcheckPanel(widgets.VBox):
    """Declare, run and review one gradient check inline, recorded in the notebook's ledger.

    `record` fills the fields (the seed record is accepted as written); `notebook=` or
    `ledger=` name the ledger when the kernel was not started for a notebook. `language=`
    ("en" or "es") is the language of the panel and its messages (default: the locale).
    """

    def __init__(
        self, record: dict | None = None, *, notebook=None, ledger=None, language: str | None = None, **kwargs
    ):
        #: The panel's language, or None to follow `set_language` and the locale.
        self.language = None if language is None else checked(language)
        with self._in_language():
            self._build(record, notebook, ledger, **kwargs)

    def _in_language(self):
        return language(self.language)

    def _build(self, record, notebook, ledger, **kwargs) -> None:
        self.function = widgets.Text(
            value="x*x",
            description=_("function"),
            style=_STYLE,
            layout=_WIDE,
            placeholder=_("expression over the inputs, e.g. x*x or sum(sin(x))"),
        )
        self.inputs = widgets.Textarea(
            value='{"x": 3}',
            description=_("inputs (JSON)"),
            style=_STYLE,
            layout=_WIDE,
            rows=2,
            placeholder='{"x": 3, "w": [1, 2]}',
        )
        self.analytical_gradient = widgets.Text(
            value="",
            description=_("analytical gradient"),
            style=_STYLE,
            layout=_WIDE,
            placeholder=_('your derivative, written first: 6, [2, 4], "2*x" or {"x": ..., "w": ...}'),
        )
        self.origin = widgets.Text(
            description=_("origin"), style=_STYLE, layout=_WIDE, placeholder=_("which output, which hand derivation")
        )
        self.destination = widgets.Text(
            description=_("destination"),
            style=_STYLE,
            layout=_WIDE,
            placeholder=_("which input's gradient it lands in"),
        )
        self.dtype = widgets.Dropdown(
            options=list(defaults.EXPRESSION_DTYPES), value="float64", description=_("dtype"), style=_STYLE
        )
        self.devices = available_devices()
        self.device = widgets.Dropdown(
            options=[
                (f"{d['id']} ({d['name']})" if d["name"] else d["id"], d["id"]) for d in self.devices if d["available"]
            ],
            value="cpu",
            description=_("device"),
            style=_STYLE,
        )
        absent = [d for d in self.devices if not d["available"]]
        self.unavailable_devices = widgets.HTML(
            "".join(
                f'<div style="color:{FONT_DIM}">{escape(_("{device}: unavailable ({reason})").format(device=d["id"], reason=localize(d["reason"])))}</div>'
                for d in absent
            )
        )
        self.scheme = widgets.Dropdown(
            options=list(defaults.SCHEMES), value="central", description=_("FD scheme"), style=_STYLE
        )
        self.step = widgets.Text(
            description=_("FD step"), style=_STYLE, placeholder=_("empty: dtype default; a number; or adaptive")
        )
        self.rtol = widgets.Text(description="rtol", style=_STYLE, placeholder=_("empty: dtype default"))
        self.atol = widgets.Text(description="atol", style=_STYLE, placeholder=_("empty: dtype default"))
        self.justification = widgets.Textarea(
            description=_("justification"),
            style=_STYLE,
            layout=widgets.Layout(width="95%", display="none"),
            rows=2,
            placeholder=_("why the tolerance changes after a run (kept in the ledger)"),
        )
        self.run_button = widgets.Button(
            description=_("Run check"),
            button_style="primary",
            icon="play",
            tooltip=_("record the expectation, run the check here, record the observation"),
            # as wide as its label: "Ejecutar la comprobación" is longer than the default width
            layout=widgets.Layout(width="auto", min_width="148px"),
        )
        self.message = widgets.HTML()
        self.ledger_note = widgets.HTML()
        self.result = widgets.HTML()
        #: The completed record of the last run, or None.
        self.record: dict | None = None
        #: The attestation of the last run's observation entry, published to the front end.
        self.attestation: dict | None = None
        self.ledger = None
        self._ran_tolerance: dict | None = None
        self._open_ledger(notebook, ledger)
        if record is not None:
            self.fill(record)
        self.run_button.on_click(self.run)
        self.rtol.observe(self._tolerance_edited, names="value")
        self.atol.observe(self._tolerance_edited, names="value")
        settings = widgets.VBox(
            [
                widgets.HBox([self.dtype, self.device]),
                self.unavailable_devices,
                widgets.HBox([self.scheme, self.step]),
                widgets.HBox([self.rtol, self.atol]),
            ]
        )
        expectation = widgets.VBox(
            [self.function, self.inputs, self.analytical_gradient, self.origin, self.destination]
        )
        super().__init__(
            children=[
                widgets.HTML(_("<b>Expectation</b> (written first)")),
                expectation,
                widgets.HTML(f"<b>{escape(_('Settings'))}</b>"),
                settings,
                self.justification,
                widgets.HBox([self.run_button, self.ledger_note]),
                self.message,
                self.result,
            ],
            **kwargs,
        )
        self.add_class("jp-gradcheck-inline")

    # ------------------------------------------------------------------ location
    def _open_ledger(self, notebook, ledger) -> None:
        try:
            self.ledger = open_ledger(notebook=notebook, ledger=ledger)
        except LedgerLocationMissing as exc:
            self.ledger = None
            self.ledger_note.value = _message(localize(exc.args[0]), _ERROR)
            return
        shown = os.path.relpath(self.ledger.path)  # beside the notebook: the kernel's folder
        if shown.startswith(".."):
            shown = str(self.ledger.path)
        self.ledger_note.value = (
            f'<span style="color:{FONT_DIM}">{escape(_("ledger:"))} <code>{escape(shown)}</code></span>'
        )

    # ------------------------------------------------------------------ fields
    def fill(self, record: dict) -> None:
        """Set the fields from a check record (seed or full form).

        A record the core refuses is still filled in as far as the fields allow, and the
        core's one-line reason is shown, so it can be corrected in place.
        """
        with self._in_language():
            self._fill(record)

    def _fill(self, record: dict) -> None:
        problems = []
        try:
            parse_spec(record)
        except SpecError as exc:
            problems.append(exc.localized())
        if "function" in record:
            self.function.value = _written(record["function"])
        inputs = record.get("inputs")
        if inputs is None:
            inputs = {k: v for k, v in record.items() if k not in INPUT_FIELDS and k not in OUTPUT_FIELDS}
        self.inputs.value = json.dumps(inputs)
        self.analytical_gradient.value = _written(record.get("analytical_gradient"))
        fd = record.get("finite_difference") or {}
        for dropdown, value in (
            (self.dtype, record.get("dtype", "float64")),
            (self.scheme, fd.get("scheme", "central")),
        ):
            if value in dropdown.options:
                dropdown.value = value
        try:
            self.device.value = resolve_device(record.get("device", "cpu"), self.devices)
        except SpecError as exc:
            problems.append(_("{message}; the panel shows cpu").format(message=exc.localized()))
            self.device.value = "cpu"
        self.step.value = _written(fd.get("step"))
        tolerance = record.get("tolerance") or {}
        self.rtol.value, self.atol.value = _written(tolerance.get("rtol")), _written(tolerance.get("atol"))
        self.origin.value = record.get("origin") or ""
        self.destination.value = record.get("destination") or ""
        self.message.value = _message("; ".join(dict.fromkeys(problems)), _ERROR) if problems else ""

    def spec_from_fields(self) -> dict:
        """The check record the fields describe; SpecError when the inputs are not JSON."""
        try:
            inputs = loads_strict(self.inputs.value)
        except SpecError as exc:
            raise SpecError("inputs is not valid JSON: {text}", text=exc.message, field="inputs") from None
        record = {
            "function": self.function.value.strip(),
            "inputs": inputs,
            "analytical_gradient": _number_or_text(self.analytical_gradient.value),
            "dtype": self.dtype.value,
            "device": self.device.value,
            "finite_difference": {"scheme": self.scheme.value},
            "origin": self.origin.value,
            "destination": self.destination.value,
        }
        step = _number_or_text(self.step.value)
        if step is not None:
            record["finite_difference"]["step"] = step
        tolerance = {key: _number_or_text(field.value) for key, field in (("rtol", self.rtol), ("atol", self.atol))}
        tolerance = {key: value for key, value in tolerance.items() if value is not None}
        if tolerance:
            record["tolerance"] = tolerance
        return record

    def _tolerance_edited(self, _change=None) -> None:
        """After a run, a tolerance that differs from the one used asks for a justification."""
        if self._ran_tolerance is None:
            return
        edited = {"rtol": _number_or_text(self.rtol.value), "atol": _number_or_text(self.atol.value)}
        moved = any(edited[k] is not None and edited[k] != self._ran_tolerance[k] for k in edited)
        self.justification.layout.display = "flex" if moved else "none"

    # ------------------------------------------------------------------ running
    def run(self, _button=None) -> dict | None:
        """Record the expectation, run the check in this kernel, record the observation.

        Returns the completed record, or None when nothing completed: the message then says
        why, and the ledger holds nothing new unless the check started and failed to run.
        """
        self.message.value = ""
        if self.ledger is None:
            self.message.value = self.ledger_note.value
            return None
        self.run_button.disabled = True  # greyed out in the page while the kernel runs the check
        try:
            with self._in_language():
                return self._run()
        finally:
            self.run_button.disabled = False

    def _run(self) -> dict | None:
        try:
            entries_before = self.ledger.head()["entries"]
            spec = self.spec_from_fields()
            record, self.attestation = run_attested(spec, self.ledger, justification=self.justification.value)
        except JustificationRequired as exc:
            self.justification.layout.display = "flex"
            self.message.value = _message(exc.localized(), _ERROR)
            return None
        except Exception as exc:  # bad input (nothing written) or the user's function raising
            text = exc.localized() if isinstance(exc, GradcheckError) else f"{type(exc).__name__}: {exc}"
            if self.ledger.head()["entries"] != entries_before:
                text = _("the check failed to run; the attempt is kept in the ledger: {text}").format(text=text)
                self._show_history(spec)
            self.message.value = _message(text, _ERROR)
            return None
        self._show(record)
        return record

    def _show_history(self, spec: dict) -> None:
        """After a failed run, the check's ledger history in place of the result."""
        check_id = parse_spec(spec).id
        history = self.ledger.checks().get(check_id)
        self.record = None
        self.result.value = history_html(shown(history, None)[0]) if history else ""

    def _show(self, record: dict) -> None:
        self.record = record
        history = self.ledger.checks().get(record["id"])
        shown_record, shown_history = shown(record, history)
        self.result.value = record_html(shown_record, history=shown_history)
        verdict = _("passed") if record.get("passed") else _("failed: the failure is kept in the ledger")
        self.message.value = _message(f"{record['id']}: {verdict}", _OK if record.get("passed") else _ERROR)
        used = record["tolerance"]
        self._ran_tolerance = {"rtol": used["rtol"], "atol": used["atol"]}
        self.rtol.value, self.atol.value = _written(used["rtol"]), _written(used["atol"])
        self.justification.value = ""
        self.justification.layout.display = "none"
