"""Renames made through this server keep each notebook's one ledger.

jupyter-server announces every rename its contents manager makes (the first save's rename
dialog, File -> Rename, the file browser, a folder renamed) as a `contents_service` event. On
each one this moves the renamed notebook's ledger with it, names the moved ledger in the
notebook's saved binding, and tells every kernel whose session is that notebook (or lies in
that folder) where its notebook is now (core.ledger.notebook_moves), so the kernel's next
check lands in the moved ledger and none goes to the old name.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..core.errors import GradcheckError
from ..core.ledger.notebook_moves import (
    move_ledger,
    moved_path,
    rebind_ledger_name,
    remove_forwarding,
    write_forwarding,
)
from ..core.ledger.store import ledger_path_for
from . import paths

CONTENTS_EVENTS = "https://events.jupyter.org/jupyter_server/contents_service/v1"
KERNEL_EVENTS = "https://events.jupyter.org/jupyter_server/kernel_actions/v1"


class RenameFollower:
    """Listens to the server's contents and kernel events; see the module's docstring."""

    def __init__(self, root: str, session_manager, kernel_manager, log: logging.Logger):
        self.root, self.sessions, self.kernels, self.log = root, session_manager, kernel_manager, log

    def listen(self, event_logger) -> None:
        event_logger.add_listener(schema_id=CONTENTS_EVENTS, listener=self.on_contents_event)
        event_logger.add_listener(schema_id=KERNEL_EVENTS, listener=self.on_kernel_event)

    def stop(self, event_logger) -> None:
        event_logger.remove_listener(schema_id=CONTENTS_EVENTS, listener=self.on_contents_event)
        event_logger.remove_listener(schema_id=KERNEL_EVENTS, listener=self.on_kernel_event)

    async def on_contents_event(self, logger, schema_id: str, data: dict) -> None:
        if data.get("action") == "rename" and data.get("source_path") and data.get("path"):
            await self.follow(str(data["source_path"]).strip("/"), str(data["path"]).strip("/"))

    async def on_kernel_event(self, logger, schema_id: str, data: dict) -> None:
        """A kernel shut down: its forwarding record goes with its connection file."""
        if data.get("action") == "shutdown" and data.get("kernel_id"):
            folder = getattr(self.kernels, "connection_dir", "")
            if folder:
                remove_forwarding(Path(folder) / f"kernel-{data['kernel_id']}.json")

    async def follow(self, old: str, new: str) -> None:
        """Move the ledger of the notebook (or the notebooks of the folder) renamed from `old`
        to `new` (API paths), then point the kernels of its sessions at the new path."""
        if old.endswith(".ipynb") and new.endswith(".ipynb"):
            self.move(old, new)
        for session in await self.sessions.list_sessions():
            path = str(session.get("path") or "")
            target = moved_path(path, old, new) or (path if moved_path(path, new, new) else None)
            kernel = (session.get("kernel") or {}).get("id")
            if target is None or not target.endswith(".ipynb") or not kernel:
                continue
            connection_file = self._connection_file(kernel)
            if connection_file:
                write_forwarding(connection_file, self._os_path(target))
                self.log.info("gradcheck: kernel %s now checks into the ledger of %s", kernel, target)

    def move(self, old: str, new: str) -> None:
        """The ledger beside `old` moves beside `new`, and the saved binding names it there."""
        try:
            old_notebook, new_notebook = self._os_path(old), self._os_path(new)
            moved = move_ledger(old_notebook, new_notebook)
        except (OSError, GradcheckError) as exc:
            self.log.warning("gradcheck: the ledger of %s did not move with it to %s: %s", old, new, exc)
            return
        if moved is not None:
            rebind_ledger_name(new_notebook, ledger_path_for(old_notebook).name, moved.name)
            self.log.info("gradcheck: the ledger of %s moved with it to %s", old, new)

    def _os_path(self, api_path: str) -> Path:
        return paths.resolve(self.root, api_path, field="path", must_exist=False)

    def _connection_file(self, kernel_id: str) -> str | None:
        try:
            return self.kernels.get_kernel(kernel_id).connection_file or None
        except KeyError:
            self.log.warning("gradcheck: no kernel %s to tell of a rename", kernel_id)
            return None
