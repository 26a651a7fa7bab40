"""Errors that the core raises, each with a stable code and a one-line message.

Bad input is a `SpecError`: the surfaces turn it into exit 2 or HTTP 400, and nothing is
executed or appended. A failed gradient comparison is never an error: it is a finding
recorded in the check record.

A message is written as an English template and its parameters
(`SpecError("{name} must be a number", name=key, field=key)`): the error's `message` is the
English text (what REST answers and the ledger keep), and `localized()` gives it in the
reader's language from the catalog (core/i18n.py).
"""

from __future__ import annotations

from .i18n import Message


class GradcheckError(Exception):
    """Base of every error raised on purpose by the core."""

    code = "error"

    def __init__(self, message: str, *, field: str | None = None, **params):
        if isinstance(message, Message) and not params:  # passed on from another message
            message, params = message.template, message.params
        self.message = Message.one_line(str(message), **params)
        super().__init__(str.__str__(self.message))
        self.field = field

    def localized(self, lang: str | None = None) -> str:
        """The one-line message in the active language (or `lang`)."""
        return self.message.localized(lang)

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


class OverBudget(SpecError):
    """A check whose predicted work cannot finish within the timeout of the surface that runs it."""

    code = "over_budget"


class UserCodeFault(Exception):
    """A fault of the user's code that the check found while it ran (a backward returning a gradient of
    another layout, say): never bad input, and never a crash. The engine records it as the failed
    check's reason (core/check/engine.py); `reason` is that sentence, a Message."""

    def __init__(self, reason, *, input_name: str | None = None):
        super().__init__(str(reason))
        self.reason = reason
        #: The input the fault concerns (the one a function modified in place, say), or None.
        self.input_name = input_name


class LedgerError(GradcheckError):
    """The ledger cannot be read or written as the contract requires."""

    code = "ledger_error"


def exception_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one line, `Type: message`, whitespace folded and cut at `limit` characters:
    how a record keeps why PyTorch refused something (a skipped mode, a crashed case, a side chart)."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:limit]
