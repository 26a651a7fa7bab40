"""What each route does, between the HTTP layer and the core.

Handlers parse a request and call one method here; each method resolves the API paths
inside the server root, validates with the core (torch-free), writes the ledger off the
event loop, and hands anything that runs a check to the worker pool. The order that makes a
check evidence is the core's: the expectation is in the ledger before the worker starts,
and the observation (or the failed attempt, with its reason) follows it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from ..core.check.record.cost_estimate import estimate_cost
from ..core.check.record.memory_admission import resolve_and_admit
from ..core.check.record.spec import parse_spec
from ..core.check.record.stored_values import PENDING
from ..core.errors import LedgerError, SpecError
from ..core.expr.limits import Limits
from ..core.ledger.binding import binding_for, read_binding
from ..core.ledger.blob_store import referenced_shas, store_dir_for
from ..core.ledger.ledgered_run import LedgeredRun
from ..core.ledger.store import Ledger, ledger_path_for
from ..core.ledger.verify import discover, verify_ledger_file
from ..core.ledger.verify_chain import drop_internals
from . import paths
from .errors import ClientGone, NotFound, OverBudget, PathForbidden, WorkerFailed
from .inflight import InFlightJournal
from .ledger_io import LedgerIO
from .pool import WorkerPool

#: Where the handlers find the GradcheckService in the tornado settings.
SERVICE_SETTING = "gradcheck_service"


def package_version() -> str:
    """The installed package's version, which the side panel compares with its own."""
    try:
        return metadata.version("jupyterlab_gradcheck")
    except metadata.PackageNotFoundError:  # a source checkout that was never installed
        return "0.0.0+unknown"


@dataclass
class GradcheckService:
    """The server's state (root, pool, ledger I/O, options) and the operations on it."""

    root: str
    pool: WorkerPool
    ledgers: LedgerIO
    limits: Limits
    default_device: str = "cpu"
    #: Element evaluations per second assumed when a check is admitted (see `admit`).
    admission_rate: float = 1e8
    #: Fraction of a device's free memory (as a worker measured it) a check may be estimated to need;
    #: 0 admits any size (core/check/record/memory_admission.py).
    memory_fraction: float = 1.0
    #: Predicted seconds above which a check is heavy and never takes the last free worker.
    heavy_seconds: float = 1.0
    #: Where started checks are kept until their outcome is written (a crash leaves them open).
    journal: InFlightJournal | None = None

    # --- GET status ----------------------------------------------------------------
    async def status(self) -> dict:
        """The version handshake: package, torch, devices and the pool."""
        try:
            hello = await self.pool.hello()
            worker = {"torch": hello["torch"], "python": hello["python"], "devices": hello["devices"], "error": None}
        except WorkerFailed as exc:
            worker = {"torch": None, "python": None, "devices": [], "error": exc.message}
        return {
            "version": package_version(),
            **worker,
            "default_device": self.default_device,
            "limits": {
                "max_input_elements": self.limits.max_input_elements,
                "max_element_evaluations": int(self.admission_rate * self.pool.timeout),
            },
            "pool": self.pool.state(),
        }

    # --- POST checks ---------------------------------------------------------------
    async def run_check(self, notebook, check, client_gone: asyncio.Event | None = None) -> dict:
        """Expectation, run in a worker, observation; the completed record and the ledger head.

        The check waits for its turn at a worker before anything is written, so a client that
        goes away meanwhile (`client_gone` set) leaves the ledger as it was and runs nothing.
        """
        notebook_path, ledger = self._ledger_of(notebook, field="notebook")
        if not isinstance(check, dict):
            raise SpecError("check must be a JSON object holding the check record", field="check")
        parsed = parse_spec({"device": self.default_device, **check}, limits=self.limits)
        # a long list the record brought is a pending blob now (listed_values.py): held until this request's
        # appends, however long it waits for a worker and whatever another request with the same values does
        held = referenced_shas({"inputs": parsed.inputs, "analytical_gradient": parsed.analytical_gradient})
        PENDING.pin(held)
        try:
            return await self._run_parsed(notebook_path, ledger, parsed, set(held), client_gone)
        finally:
            PENDING.discard(held)

    async def _run_parsed(self, notebook_path, ledger, parsed, held: set, client_gone) -> dict:
        resolve_and_admit(parsed, (await self.pool.hello())["devices"], self.memory_fraction)
        seconds = self.admit(parsed)
        # The place in the queue is taken before anything is written: a full queue answers
        # 503 with the ledger untouched.
        with self.pool.reserve(self._api_path(notebook_path), heavy=seconds > self.heavy_seconds) as place:
            await _turn(place, client_gone)
            attempt = await self.ledgers.call(ledger.path, LedgeredRun.declare, ledger, parsed)
            seq = attempt.expectation["seq"]
            self._journal("started", ledger.path, seq, attempt.expectation["check_id"])
            try:
                store = str(store_dir_for(ledger.path))  # the worker reads the record's stored values there
                completed = await place.run({"op": "check", "record": attempt.spec_dict, "store": store})
            except BaseException as exc:  # the attempt is kept whatever stopped it, as on every surface
                await asyncio.shield(self.ledgers.call(ledger.path, attempt.failed, exc))
                self._journal("finished", ledger.path, seq)
                raise
        try:
            binding = await self.ledgers.call(ledger.path, _observe, attempt, notebook_path, completed)
        finally:
            # the worker's blobs, written beside the ledger or refused with it; the request's own are released above
            PENDING.discard([sha for sha in referenced_shas(completed) if sha not in held])
        self._journal("finished", ledger.path, seq)
        return {"record": completed, "ledger": {"path": self._api_path(ledger.path), **binding}}

    def _journal(self, event: str, *args) -> None:
        if self.journal is not None:
            getattr(self.journal, event)(*args)

    def admit(self, parsed) -> float:
        """The check's predicted seconds; OverBudget when they exceed the timeout."""
        cost = estimate_cost(parsed)
        seconds = cost.seconds(self.admission_rate)
        if seconds > self.pool.timeout:
            general = [name for name, path in cost.paths.items() if path == "general"]
            raise OverBudget(
                "this check would need about {seconds} s ({evaluations} evaluations of up to {elements} "
                "elements), beyond the {timeout} s timeout; inputs differenced one element at a time: "
                "{general}; use fewer elements",
                seconds=f"{seconds:.0f}",
                evaluations=cost.evaluations,
                elements=parsed.work_elements,
                timeout=f"{self.pool.timeout:g}",
                general=", ".join(general) or "none",
                field="check",
            )
        return seconds

    # --- GET ledger ----------------------------------------------------------------
    async def ledger_view(self, notebook) -> dict:
        """The entries, each check's history, the chain report and the binding to keep."""
        notebook_path, ledger = self._ledger_of(notebook, field="path")
        view = await self.ledgers.call(ledger.path, _read_view, ledger, notebook_path)
        return {"ledger": self._api_path(ledger.path), "notebook": self._api_path(notebook_path), **view}

    # --- POST tolerance / expectation -------------------------------------------------
    async def change_tolerance(
        self, notebook, check_id, *, rtol=None, atol=None, target="tolerance", justification=None
    ) -> dict:
        """A justified tolerance change, appended to the ledger."""
        _, ledger = self._ledger_of(notebook, field="notebook")
        _require_text(check_id, "check_id")
        entry = await self.ledgers.call(
            ledger.path,
            ledger.change_tolerance,
            check_id,
            rtol=rtol,
            atol=atol,
            target=target,
            justification=justification,
            max_rtol=self.limits.max_rtol,
        )
        return {"entry": entry}

    async def change_expectation(self, notebook, check_id, analytical_gradient, *, justification=None) -> dict:
        """A justified change of a check's analytical gradient, appended to the ledger."""
        _, ledger = self._ledger_of(notebook, field="notebook")
        _require_text(check_id, "check_id")
        entry = await self.ledgers.call(
            ledger.path, _change_expectation, ledger, check_id, analytical_gradient, justification, self.limits
        )
        return {"entry": entry}

    # --- GET export / POST verify -------------------------------------------------------
    async def export(self, api_path, export_format) -> tuple[str, str, str]:
        """(text, media type, file name) of a CSV, JSON or HTML export of a notebook or folder."""
        if export_format not in _EXPORTS:
            raise SpecError(
                "format {format!r} is not one of {choices}",
                format=export_format,
                choices=", ".join(_EXPORTS),
                field="format",
            )
        target = paths.resolve(self.root, api_path, field="path")
        refused = await self.ledgers.run(self._confine_tree, target, "path")
        module, function, media_type = _EXPORTS[export_format]
        text = await self.ledgers.run(_render, module, function, target, refused)
        return text, media_type, f"{_stem(target)}.gradcheck.{export_format}"

    async def verify(self, api_path, replay=False, deep=False) -> dict:
        """The CLI's verify report for a notebook, a ledger or a folder, made in a worker
        (replay re-runs checks; every verify parses files that may be hostile)."""
        for name, value in (("replay", replay), ("deep", deep)):
            if not isinstance(value, bool):
                raise SpecError("{name} must be true or false", name=name, field=name)
        target = paths.resolve(self.root, api_path, field="path")
        refused = await self.ledgers.run(self._confine_tree, target, "path")
        report = await self.pool.run(
            {"op": "verify", "path": str(target), "replay": replay, "deep": deep, "refused": refused}
        )
        return paths.without_root(report, self.root)

    # --- paths -------------------------------------------------------------------
    def _ledger_of(self, notebook, *, field: str) -> tuple[Path, Ledger]:
        """The notebook (inside the root) and its ledger (refused if a link leads it outside).

        The server never rewrites a notebook's metadata: the panel keeps the binding through
        the open notebook's model, so the ledger is opened without binding.
        """
        notebook_path = paths.resolve(self.root, notebook, field=field, suffix=".ipynb")
        if not notebook_path.is_file():
            raise NotFound("{name} {path!r} is not a notebook file", name=field, path=notebook, field=field)
        ledger = Ledger.for_notebook(notebook_path, bind=False)
        paths.ensure_inside(self.root, ledger.path, field=field, shown=self._api_path(ledger.path))
        return notebook_path, ledger

    def _confine_tree(self, target: Path, field: str) -> dict[str, str]:
        """The files under `target` that a verify or export must not read, with the reason: one
        that leads outside the root through a link, or whose ledger (beside it, or named by its
        binding) does. A file target that does is refused whole (403); in a folder, each such
        file is reported on its own, so one student's link never blocks a class's export."""
        refused = {}
        for kind, item in discover(target):
            try:
                paths.ensure_inside(self.root, item, field=field)
                if kind == "notebook":
                    paths.ensure_inside(self.root, ledger_path_for(item), field=field)
                    try:
                        named = (read_binding(item) or {}).get("ledger")
                    except LedgerError:  # unreadable: verify reports it, and follows no binding
                        named = None
                    if named:
                        paths.ensure_inside(self.root, item.parent / str(named), field=field)
            except PathForbidden as exc:
                if not target.is_dir():
                    raise
                refused[str(item)] = f"not read: {exc.message}"
        return refused

    def _api_path(self, path) -> str:
        return paths.to_api_path(self.root, path)


# --- the ledger work, run in the ledger threads ----------------------------------------


async def _turn(place, client_gone: asyncio.Event | None) -> None:
    """Wait for the place's worker; ClientGone (the wait abandoned) if the client leaves first."""
    if client_gone is None:
        return await place.acquire()
    waiting = asyncio.ensure_future(place.acquire())
    gone = asyncio.ensure_future(client_gone.wait())
    await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
    gone.cancel()
    if waiting.done():
        return waiting.result()
    waiting.cancel()
    try:
        await waiting
    except asyncio.CancelledError:
        pass
    raise ClientGone("the client closed the connection before a worker was free; nothing ran")


def _observe(attempt: LedgeredRun, notebook_path: Path, record: dict) -> dict:
    attempt.observed(record)
    return binding_for(attempt.ledger, notebook_path)


def _read_view(ledger: Ledger, notebook_path: Path) -> dict:
    exists = ledger.path.is_file()
    chain = verify_ledger_file(ledger.path) if exists else None
    if chain is not None:
        drop_internals(chain)
    return {
        "entries": ledger.entries(),
        "checks": ledger.checks(),
        "chain": chain,
        "binding": {"recorded": read_binding(notebook_path), "current": binding_for(ledger, notebook_path)},
    }


def _change_expectation(ledger: Ledger, check_id: str, analytical_gradient, justification, limits) -> dict:
    """Refuse an expectation the check's inputs cannot take (nothing written), then record it."""
    history = ledger.checks(records=False).get(check_id)
    if history and isinstance(history.get("expectation"), dict):
        parse_spec({**history["expectation"], "analytical_gradient": analytical_gradient}, limits=limits)
    return ledger.change_expectation(check_id, analytical_gradient, justification=justification)


#: format -> (core module, renderer over `collect`ed submissions, media type)
_EXPORTS = {
    "csv": ("csv_export", "to_csv", "text/csv; charset=utf-8"),
    "json": ("json_export", "to_json", "application/json; charset=utf-8"),
    "html": ("html_export", "to_html", "text/html; charset=utf-8"),
}


def _render(module: str, function: str, target: Path, refused: dict[str, str]) -> str:
    import importlib

    from ..core.report.submissions import collect

    render = getattr(importlib.import_module(f"..core.report.{module}", __package__), function)
    return render(collect([target], refused=refused))


def _require_text(value, field: str) -> None:
    if not isinstance(value, str) or not value:
        raise SpecError("{name} must be a non-empty string", name=field, field=field)


def _stem(path: Path) -> str:
    name = path.name
    return name[: -len(".ipynb")] if name.endswith(".ipynb") else (name or "export")
