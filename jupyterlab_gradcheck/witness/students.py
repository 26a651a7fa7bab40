"""The standalone witness's class list: each student's own token -> that student's user name.

`S.json` is `{"<token>": "ana", ...}`. A report made with a token is the token's student's,
whatever the report says, so no student can report heads in a classmate's name (and frame
them). The file holds secrets: it is created readable by its owner alone, and a file its
group or others can read is refused. It is read again when it changes, so tokens minted
while the witness runs take effect at once.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

from ..core.errors import SpecError
from ..core.ledger.witness_log import readable_by_others

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
