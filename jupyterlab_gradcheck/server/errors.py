"""Every error the REST API can answer, and its HTTP status, in one place.

Handlers raise; `error_response` turns whatever was raised into a status code and the
`{"code", "message", "field"}` body the contract names. The core's errors keep their own
codes; the errors below are the ones only a server can meet (paths, the worker pool).
"""

from __future__ import annotations

from http import HTTPStatus

from tornado.web import HTTPError

from ..core.errors import DeviceUnavailable, GradcheckError, JustificationRequired, LedgerError, SpecError
from ..core.run import http_status


class BadPath(SpecError):
    """An API path that is not a plain path under the server root (`..`, absolute, empty)."""

    code = "bad_path"


class ClientGone(GradcheckError):
    """The client closed its connection while its check waited for a worker: nothing ran."""

    code = "client_gone"


class PathForbidden(GradcheckError):
    """An API path that resolves, through a symbolic link, to a place outside the root."""

    code = "path_forbidden"


class NotFound(GradcheckError):
    """An API path that names no file."""

    code = "not_found"


class PoolBusy(GradcheckError):
    """Every worker is busy and the queue of waiting checks is full."""

    code = "busy"

    def __init__(self, message: str, *, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class WorkerCrashed(GradcheckError):
    """The worker process died while it held the request."""

    code = "worker_crashed"


class WorkerGone(WorkerCrashed):
    """The worker process had died before it took the request: nothing ran, so it may be retried."""


class WorkerTimeout(GradcheckError):
    """The worker did not answer within the timeout and was killed."""

    code = "timeout"


class WorkerFailed(GradcheckError):
    """No worker could take the request: none started, or one failed in an unexpected way."""

    code = "worker_error"


#: Most specific class first: the first match decides the status.
_STATUS = (
    (PathForbidden, HTTPStatus.FORBIDDEN),
    (NotFound, HTTPStatus.NOT_FOUND),
    (PoolBusy, HTTPStatus.SERVICE_UNAVAILABLE),
    (WorkerTimeout, HTTPStatus.GATEWAY_TIMEOUT),
    (WorkerCrashed, HTTPStatus.INTERNAL_SERVER_ERROR),
    (WorkerFailed, HTTPStatus.INTERNAL_SERVER_ERROR),
)  # then the core's errors, by the one table of how each surface reports them (core/run.py REPORTED)

#: Codes for the statuses that tornado and jupyter-server raise themselves (auth, routing).
_HTTP_CODES = {
    400: "bad_input",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
}


def from_json(error: dict) -> GradcheckError:
    """The error a worker reported as `{"code", "message", "field"}`, raised again here."""
    kind = _BY_CODE.get(error.get("code"), WorkerFailed)
    return kind(error.get("message", "the worker reported an error"), field=error.get("field"))


_BY_CODE = {kind.code: kind for kind in (SpecError, DeviceUnavailable, JustificationRequired, LedgerError)}


def status_of(error: BaseException) -> int:
    """The HTTP status an error is answered with."""
    if isinstance(error, HTTPError):
        return error.status_code
    for kind, status in _STATUS:
        if isinstance(error, kind):
            return int(status)
    return http_status(error)


def error_response(error: BaseException) -> tuple[int, dict, dict]:
    """`(status, body, extra headers)` for anything a handler raised."""
    status = status_of(error)
    headers: dict[str, str] = {}
    if isinstance(error, GradcheckError):
        body = error.to_json()
        if isinstance(error, PoolBusy):
            headers["Retry-After"] = str(error.retry_after)
    elif isinstance(error, HTTPError):
        phrase = _reason(status)
        message = error.log_message or phrase
        if error.log_message and error.args:
            message = error.log_message % error.args
        body = {
            "code": _HTTP_CODES.get(status, phrase.lower().replace(" ", "_")),
            "message": " ".join(str(message).split()),
            "field": None,
        }
    else:
        body = {
            "code": "internal_error",
            "message": f"internal error: {type(error).__name__}: {' '.join(str(error).split())}",
            "field": None,
        }
    return status, body, headers


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
