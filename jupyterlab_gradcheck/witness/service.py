"""The standalone witness's class list: each student's own token -> that student's user name.

`S.json` is `{"<token>": "ana", ...}`. A report made with a token is the token's student's,
whatever the report says, so no student can report heads in a classmate's name (and frame
them). The file holds secrets: it is created readable by its owner alone, and a file its
group or others can read is refused. It is read again when it changes, so tokens minted
while the witness runs take effect at once.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
from pathlib import Path

from tornado import web

from ..core.errors import GradcheckError, SpecError
from .log import GroupCommit, WitnessLog, public_key_fingerprint, read_log, readable_by_others

# -------------------- students

TOKEN_BYTES = 24


def read_students(path: Path) -> dict[str, str]:
    """The token -> user map in `path`; SpecError naming the file when it is unreadable, shared
    with group or others, or not a JSON object of non-empty strings."""
    try:
        if readable_by_others(path):
            raise SpecError(
                f"the students file {path} can be read by others (mode {oct(path.stat().st_mode & 0o777)}); "
                "it holds every student's token: chmod 600 it",
                field="students",
            )
        students = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(f"cannot read the students file {path}: {exc.strerror}", field="students") from None
    except ValueError as exc:
        raise SpecError(f"the students file {path} is not JSON: {exc}", field="students") from None
    if not isinstance(students, dict) or not all(
        isinstance(token, str) and token and isinstance(user, str) and user for token, user in students.items()
    ):
        raise SpecError(
            f'the students file {path} must map each token to a user name: {{"<token>": "ana", ...}}',
            field="students",
        )
    return students


class Students:
    """The class list, read again whenever its file changes."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        stat = self.path.stat() if self.path.exists() else None
        self._users = read_students(self.path)  # a bad file stops the witness at start
        self._stamp = (stat.st_mtime_ns, stat.st_size) if stat else None
        #: Why the last change to the file was not taken (the previous list stays), or None.
        self.problem: str | None = None

    def user_for_token(self, token: str) -> str | None:
        """The student who owns `token`, or None. A file that changed into something unreadable
        (removed, made readable by others, not JSON) leaves the list it held before in force."""
        try:
            stat = self.path.stat()
            stamp = (stat.st_mtime_ns, stat.st_size)
            if stamp != self._stamp:
                self._users, self._stamp, self.problem = read_students(self.path), stamp, None
        except (OSError, SpecError) as exc:
            self.problem = str(exc)
        return self._users.get(token) if token else None


def mint_tokens(path: str | os.PathLike, users: list[str]) -> dict[str, str]:
    """Give each user in `users` who has no token in `path` a new one; returns user -> token for
    every user named (new or existing). The file is created (mode 0600) when absent."""
    path = Path(path)
    students = read_students(path) if path.exists() else {}
    tokens = {user: token for token, user in students.items()}
    for user in users:
        if not user or user != user.strip():
            raise SpecError(f"a student's user name must be non-empty without surrounding spaces: {user!r}")
        if user not in tokens:
            tokens[user] = secrets.token_urlsafe(TOKEN_BYTES)
            students[tokens[user]] = user
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)
        json.dump(students, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(temporary, path)
    return {user: tokens[user] for user in users}


# -------------------- app
# The witness's HTTP surface: `POST heads`, `GET log`, `GET public-key`.
#
# Every request proves who sends it with `Authorization: token ...`, and a receipt's user comes
# from that token alone:
# - standalone, each student has a token of their own (the class list, `--students S.json`,
#   token -> user name; witness/service.py);
# - as a JupyterHub managed service (`JUPYTERHUB_API_TOKEN` and `JUPYTERHUB_SERVICE_PREFIX` set by
#   the hub), a student sends their own hub token and the witness asks the hub whose it is.
# A report may omit `user`; one that names anybody else is refused (403) and nothing is
# appended, so nobody can report heads in a classmate's name. The instructor's shared token
# (`GRADCHECK_WITNESS_TOKEN`) reads the whole log and reports nothing; a student reads their
# own receipts. A receipt is answered only once its line is fsynced (witness/log.py).
# The log and its signing are the core's (witness.log); this module only speaks HTTP.

MAX_BODY = 64 * 1024


class _Base(web.RequestHandler):
    """Token checks and JSON answers shared by the witness's routes."""

    def initialize(self, log: WitnessLog, token: str, hub_auth=None, students=None, commit=None):
        self.log, self.token, self.hub_auth, self.students, self.commit = log, token, hub_auth, students, commit

    def check_xsrf_cookie(self) -> None:  # token-authenticated API: no cookies are accepted
        return None

    def _presented(self) -> str:
        header = self.request.headers.get("Authorization", "")
        return header[6:].strip() if header.lower().startswith("token ") else ""

    def is_instructor(self) -> bool:
        presented = self._presented()
        return bool(self.token) and bool(presented) and hmac.compare_digest(presented, self.token)

    async def hub_user(self) -> str | None:
        """The hub user who owns the presented token, when the witness runs under a hub.

        Asked without blocking the event loop (one slow hub answer must not hold up every other
        report). Only a user's token names a user: a service's token (the hub also answers for
        those, with `kind: service`) names no student, so it is refused like an unknown one.
        """
        if self.hub_auth is None or not self._presented():
            return None
        model = await self.hub_auth.user_for_token(self._presented(), sync=False)
        if not isinstance(model, dict) or model.get("kind", "user") != "user":
            return None
        return model.get("name") or None

    async def student(self) -> str | None:
        """The student the presented token belongs to: the class list's word standalone, the
        hub's under a hub; None for an unknown token (and for the instructor's)."""
        if self.is_instructor():
            return None
        if self.students is not None:
            user = self.students.user_for_token(self._presented())
            if user is not None:
                return user
        return await self.hub_user()

    def answer(self, payload, status: int = 200) -> None:
        self.set_status(status)
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.finish(json.dumps(payload))

    def refuse(self, status: int, code: str, message: str) -> None:
        self.answer({"code": code, "message": message}, status)


class HeadsHandler(_Base):
    """`POST heads`: record a reported head; answers the signed receipt."""

    async def post(self):
        # The instructor's shared token is checked first: it is never sent on to the hub.
        if self.is_instructor():
            return self.refuse(
                403, "forbidden", "the instructor's token reads the log; heads come from students' tokens"
            )
        user = await self.student()
        if user is None:
            return self.refuse(403, "forbidden", "a student's witness token (Authorization: token ...) is required")
        if len(self.request.body) > MAX_BODY:
            return self.refuse(400, "bad_input", f"the report is over {MAX_BODY} bytes")
        try:
            report = json.loads(self.request.body.decode("utf-8"))
        except ValueError as exc:  # bad JSON or bad UTF-8
            return self.refuse(400, "bad_input", f"the body is not JSON: {exc}")
        if isinstance(report, dict):
            named = report.get("user")
            if named is not None and named != user:
                return self.refuse(403, "forbidden", f"this token is {user}'s; it cannot report heads for {named}")
            report["user"] = user  # the token's owner, never the client's word
        try:
            receipt = self.log.write(report)
        except ValueError as exc:  # a SpecError naming the field
            message = exc.message if isinstance(exc, GradcheckError) else str(exc)
            return self.refuse(400, "bad_input", message)
        await self.commit.durable()  # answered only once its line is on disk
        self.answer({"receipt": receipt, "public_key": self.log.public_key})


class LogHandler(_Base):
    """`GET log[?ledger_id=ID]`: every receipt (instructor's token), or a student's own; with
    `ledger_id`, only that ledger's (how a client finds what the witness lacks of a ledger)."""

    async def get(self):
        receipts = read_log(self.log.path)
        ledger_id = self.get_query_argument("ledger_id", None)
        if ledger_id is not None:
            receipts = [r for r in receipts if r.get("ledger_id") == ledger_id]
        if self.is_instructor():
            return self.answer({"receipts": receipts, "public_key": self.log.public_key})
        user = await self.student()
        if user is None:
            return self.refuse(403, "forbidden", "a witness token (Authorization: token ...) is required")
        self.answer({"receipts": [r for r in receipts if r.get("user") == user], "public_key": self.log.public_key})


class PublicKeyHandler(_Base):
    """`GET public-key`: the key that signs every receipt and its fingerprint (public, no token
    needed); an instructor records the fingerprint when the course starts and pins it."""

    def get(self):
        self.answer({"public_key": self.log.public_key, "fingerprint": public_key_fingerprint(self.log.public_key)})


def make_app(log_path: str, token: str, *, prefix: str = "/", hub_auth=None, students=None) -> web.Application:
    """The witness application over the log at `log_path`; `students` is the class list
    (witness.students.Students) standalone, `hub_auth` the hub's HubAuth under a hub."""
    log = WitnessLog(log_path)
    commit = GroupCommit(log.sync)
    options = {"log": log, "token": token, "hub_auth": hub_auth, "students": students, "commit": commit}
    prefix = "/" + prefix.strip("/") + "/" if prefix.strip("/") else "/"
    return web.Application(
        witness_log=log,
        witness_commit=commit,
        handlers=[
            (prefix + "heads", HeadsHandler, options),
            (prefix + "log", LogHandler, options),
            (prefix + "public-key", PublicKeyHandler, options),
        ],
    )


def hub_auth_from_environment():
    """HubAuth for the service's own hub when it runs as a JupyterHub managed service, else None."""
    if not os.environ.get("JUPYTERHUB_API_TOKEN") or not os.environ.get("JUPYTERHUB_SERVICE_PREFIX"):
        return None
    from jupyterhub.services.auth import HubAuth

    return HubAuth(api_token=os.environ["JUPYTERHUB_API_TOKEN"], cache_max_age=60)
