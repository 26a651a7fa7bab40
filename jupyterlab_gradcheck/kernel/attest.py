"""Display a check's attestation from the kernel, so the saved notebook binds its ledger.

The attestation (core.ledger.attestation) goes out as a display of its own MIME type with a
one-line text fallback. Whoever saves the notebook keeps it in the cell's outputs; JupyterLab's
extension renders it as a small line and copies the ledger's new head into the open notebook's
`metadata.gradcheck`, also for runs started from the inline panel, whose displays belong to no
cell. Outside a kernel (a script, a test) there is nothing to display to.
"""

from __future__ import annotations

from ..core.i18n import _
from ..core.ledger.attestation import MIME_TYPE


def text_of(attestation: dict) -> str:
    """The one-line fallback a front end without the extension shows, in the active language."""
    return _("gradcheck: {check_id} recorded at seq {seq} (hash {hash}) in {ledger}").format(
        check_id=attestation.get("check_id"),
        seq=attestation["seq"],
        hash=attestation["hash"][:12],
        ledger=attestation.get("ledger"),
    )


def publish(attestation: dict | None) -> bool:
    """Display the attestation when running in an IPython kernel; whether it was displayed."""
    if attestation is None:
        return False
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    publisher = getattr(shell, "display_pub", None)
    if publisher is None or type(shell).__name__ == "TerminalInteractiveShell":  # a console has no outputs to save
        return False
    publisher.publish(data={MIME_TYPE: attestation, "text/plain": text_of(attestation)}, metadata={})
    return True
