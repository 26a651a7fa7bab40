"""HTML export: one self-contained page an instructor can open, print or archive.

Per submission it shows the chain and binding status first (can the rest be trusted?), the
flags a grader should look at, then each check through the same renderer the widget uses
(`record_html`): the Expectation column beside the Observation column with shape, dtype and
device, the verdicts, the step-sweep plot, and the check's history with every tolerance
change, its justification and flags. Every failure kept is listed again, highlighted, with
its diagnosis. The page has no scripts and loads nothing from the network.
"""

from __future__ import annotations

from html import escape

from ..i18n import N_, _, active_language, localize
from ..i18n import language as in_language
from ..ledger.tail import now_utc
from .csv_export import latest_record
from .record_html import badge, diagnosis_block, failure_sentence, record_html, step_sweep_block

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
