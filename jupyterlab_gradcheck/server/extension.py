"""The jupyter-server extension: its options, its worker pool and its routes.

Enabled by `jupyter-config/server-config/jupyterlab_gradcheck.json`; every option below can
be set as `c.GradcheckExtension.<name>` in a Jupyter config file or `--GradcheckExtension.<name>`
on the command line.
"""

from __future__ import annotations

import asyncio
import os

from jupyter_core.paths import jupyter_runtime_dir
from jupyter_server.extension.application import ExtensionApp
from traitlets import Dict, Float, Integer, TraitError, Unicode, validate

from ..core.check.record.spec import parse_spec
from ..core.errors import SpecError
from ..core.expr.parser import DEFAULT_LIMITS, Limits
from ..witness import client as witness_client
from ..witness.relay import WitnessRelay
from .handlers import url_patterns
from .pool import WorkerPool
from .service import SERVICE_SETTING, GradcheckService, InFlightJournal, LedgerIO, RenameFollower


class GradcheckExtension(ExtensionApp):
    """Check-running REST endpoints under `{base_url}/gradcheck/`, backed by worker processes."""

    name = "jupyterlab_gradcheck"
    description = __doc__

    workers = Integer(
        2,
        help="Number of worker processes that run checks. Each imports torch once when the "
        "server starts; checks beyond this many wait in the queue.",
    ).tag(config=True)

    timeout = Float(
        30.0,
        help="Seconds one check (or verify) may run in a worker. A worker that overruns is "
        "killed and replaced, the request answers 504, and the ledger records the attempt as "
        "failed to run.",
    ).tag(config=True)

    queue_size = Integer(
        64,
        help="Requests that may wait for a free worker. Beyond this the server answers 503 "
        "with Retry-After at once instead of letting requests pile up.",
    ).tag(config=True)

    max_input_elements = Integer(
        DEFAULT_LIMITS.max_input_elements,
        allow_none=True,
        help="Largest number of elements over all inputs of one check, or None (the default) for "
        "a limit that follows the device: a check must fit in its device's free memory (as the "
        "worker measures it) and its predicted work within `timeout` (see `admission_rate`). "
        "A value written as a JSON list has at most 100000 elements whatever this says.",
    ).tag(config=True)

    admission_rate = Float(
        1e8,
        help="Element evaluations per second a worker is assumed to manage when a check is "
        "admitted. A check's work is predicted from its shapes and its path before it runs "
        "(evaluations times the elements of the largest tensor it builds); one predicted to "
        "need longer than `timeout` is refused with 400 before anything is written. Raise it "
        "on a faster machine.",
    ).tag(config=True)

    memory_fraction = Float(
        1.0,
        help="Fraction of a device's free memory, as each worker measures it at start (under "
        "`worker_memory_limit` when one is set), that one check may be estimated to need. A "
        "check estimated to need more is refused with 400 before anything is written. With "
        "several workers sharing one machine, 1/workers keeps them from over-committing it; 0 "
        "turns the estimate off, and a check that runs out of memory is then recorded as failed "
        "to run.",
    ).tag(config=True)

    heavy_seconds = Float(
        1.0,
        help="Predicted seconds above which a check counts as heavy. Heavy checks never take "
        "the last free worker (with two or more workers), so light checks keep flowing while "
        "heavy ones run.",
    ).tag(config=True)

    max_rtol = Float(
        DEFAULT_LIMITS.max_rtol,
        help="Relative tolerances from this value up are refused with 400, when a check is "
        "declared and when a tolerance is changed: rtol >= 1 accepts any gradient of the right "
        "sign, so the check would check nothing. An instructor may raise it for a course that "
        "needs it.",
    ).tag(config=True)

    default_device = Unicode(
        "cpu",
        help="Device for a check whose record names none: cpu, cuda, cuda:N, mps or auto "
        "(the first GPU torch reports, else cpu).",
    ).tag(config=True)

    worker_memory_limit = Integer(
        0,
        help="Bytes of address space each worker may take beyond what it holds once torch is "
        "loaded (RLIMIT_AS, set in the worker after start-up); 0 sets no limit. A check that "
        "needs more fails with a clear error, is recorded as failed to run, and the worker "
        "and the server stay up.",
    ).tag(config=True)

    startup_timeout = Float(
        120.0,
        help="Seconds a new worker may take to import torch and say hello before it is treated as failed.",
    ).tag(config=True)

    witness_url = Unicode(
        "",
        help="URL of the witness service that receives every ledger head (for example a "
        "JupyterHub service's URL). The server reports the heads it writes, and, on every check "
        "a kernel it started attests on its iopub channel, every entry of that kernel's ledger "
        "not reported yet, whatever the kernel's own environment says. Empty: "
        "GRADCHECK_WITNESS_URL from the server's environment, if set. Kernels also report what "
        "they write when GRADCHECK_WITNESS_URL is in their environment (under JupyterHub, "
        "Spawner.environment).",
    ).tag(config=True)

    witness_token = Unicode(
        "",
        help="Token sent to the witness (Authorization: token ...): standalone, the student's own "
        "token, which the witness maps to the student. Empty: GRADCHECK_WITNESS_TOKEN from the "
        "server's environment, else the user's JUPYTERHUB_API_TOKEN under a hub.",
    ).tag(config=True)

    test_slow_functions = Dict(
        value_trait=Float(),
        default_value={},
        help="For tests only: maps a function expression to seconds a worker sleeps before "
        "running a check of exactly that function, to exercise the timeout and a kill "
        "mid-check. Leave empty in real use.",
    ).tag(config=True)

    @validate("workers")
    def _at_least_one_worker(self, proposal):
        if proposal["value"] < 1:
            raise TraitError("GradcheckExtension.workers must be at least 1")
        return proposal["value"]

    @validate("timeout", "startup_timeout", "admission_rate", "heavy_seconds", "max_rtol")
    def _positive_seconds(self, proposal):
        if proposal["value"] <= 0:
            raise TraitError(f"GradcheckExtension.{proposal['trait'].name} must be positive")
        return proposal["value"]

    @validate("queue_size", "max_input_elements", "memory_fraction")
    def _not_negative(self, proposal):
        if proposal["value"] is not None and proposal["value"] < 0:
            raise TraitError(f"GradcheckExtension.{proposal['trait'].name} must not be negative")
        return proposal["value"]

    @validate("default_device")
    def _known_device(self, proposal):
        try:
            parse_spec({"function": "x", "x": 0.0, "analytical_gradient": 1.0, "device": proposal["value"]})
        except SpecError as exc:
            raise TraitError(f"GradcheckExtension.default_device: {exc.message}") from None
        return proposal["value"]

    def initialize_settings(self):
        """Start the worker pool (torch loads in the workers while the server starts)."""
        limits = Limits(max_input_elements=self.max_input_elements, max_rtol=self.max_rtol)
        self.pool = WorkerPool(
            size=self.workers,
            timeout=self.timeout,
            queue_size=self.queue_size,
            startup_timeout=self.startup_timeout,
            options={
                "limits": {"max_input_elements": self.max_input_elements, "max_rtol": self.max_rtol},
                "slow_functions": dict(self.test_slow_functions),
                "memory_limit": self.worker_memory_limit,
            },
        )
        self.pool.start()
        witness_url, witness_token = self._witness()
        if witness_url:
            witness_client.configure(witness_url, witness_token or None, source="server")
        self.ledger_io = LedgerIO()
        root = self.serverapp.root_dir if self.serverapp is not None else os.getcwd()
        runtime = self.serverapp.runtime_dir if self.serverapp is not None else jupyter_runtime_dir()
        self.journal = InFlightJournal(runtime, root)
        for note in self.journal.recover():
            self.log.warning(
                "gradcheck: check %s was interrupted when a server stopped; noted in its ledger at seq %d",
                note["check_id"],
                note["seq"],
            )
        self.settings[SERVICE_SETTING] = GradcheckService(
            root=root,
            pool=self.pool,
            ledgers=self.ledger_io,
            limits=limits,
            default_device=self.default_device,
            admission_rate=self.admission_rate,
            heavy_seconds=self.heavy_seconds,
            memory_fraction=self.memory_fraction,
            journal=self.journal,
        )
        self._listen(root)
        self.log.info(
            "gradcheck: %d worker process(es) starting, timeout %g s, queue %d",
            self.workers,
            self.timeout,
            self.queue_size,
        )

    def _listen(self, root: str) -> None:
        """Follow renames (a notebook keeps its ledger) and, with a witness, the kernels' checks."""
        self.renames = self.relay = None
        app = self.serverapp
        if app is None or getattr(app, "event_logger", None) is None:
            return
        self.renames = RenameFollower(root, app.session_manager, app.kernel_manager, self.log)
        self.renames.listen(app.event_logger)
        url, token = self._witness()
        if url:
            self.relay = WitnessRelay(url, token, root, app.session_manager, app.kernel_manager, self.log)
            self.relay.listen(app.event_logger)

    def _witness(self) -> tuple[str, str]:
        """The witness's URL and the token to report with: the options, else the server's
        environment (under a hub, the user's own API token)."""
        url = self.witness_url or os.environ.get(witness_client.URL_VARIABLE, "").strip()
        token = (
            self.witness_token
            or os.environ.get(witness_client.TOKEN_VARIABLE)
            or os.environ.get("JUPYTERHUB_API_TOKEN", "")
        )
        return url, token

    def initialize_handlers(self):
        """Add the route table under `{base_url}/gradcheck/`."""
        self.handlers.extend(url_patterns())

    async def stop_extension(self):
        """Stop the workers and let ledger writes under way finish."""
        for listener in (self.renames, self.relay):
            if listener is not None:
                listener.stop(self.serverapp.event_logger)
        await asyncio.get_running_loop().run_in_executor(None, self.pool.stop)
        self.settings[SERVICE_SETTING].close()
        if self._witness()[0]:
            witness_client.configure(None, None)
        self.ledger_io.close()
        self.journal.close()
