"""Errors that the core raises, each with a stable code and a one-line message.

Bad input is a `SpecError`: the surfaces turn it into exit 2 or HTTP 400, and nothing is
executed or appended. A failed gradient comparison is never an error: it is a finding
recorded in the check record.
"""

from __future__ import annotations


class GradcheckError(Exception):
    """Base of every error raised on purpose by the core."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None):
        one_line = " ".join(str(message).split())
        super().__init__(one_line)
        self.message = one_line
        self.field = field

    def to_json(self) -> dict:
        """The `{"code", "message", "field"}` form that REST answers and the CLI print."""
        return {"code": self.code, "message": self.message, "field": self.field}


class SpecError(GradcheckError, ValueError):
    """Bad input: a record, an expression or a value that cannot be accepted as written."""

    code = "bad_input"


class DeviceUnavailable(SpecError):
    """The record asks for a device that torch does not report on this machine."""

    code = "device_unavailable"


class JustificationRequired(SpecError):
    """A tolerance or expectation change arrived without a written justification."""

    code = "justification_required"


class LedgerError(GradcheckError):
    """The ledger cannot be read or written as the contract requires."""

    code = "ledger_error"
