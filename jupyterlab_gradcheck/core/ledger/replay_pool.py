"""The processes that replay a folder of submissions: started once, torch imported once.

Workers are forked from a fork server that imported torch and the engine once
(WORKER_PRELOAD), so N workers do not each spend seconds importing torch; where there is no fork
server, they are spawned. Never forked from the verifying process itself: it may hold torch's
threads. Each worker runs torch on one thread: the processes are the parallelism.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable

#: Called with (submissions done, submissions in all) each time one finishes.
Progress = Callable[[int, int], None]
#: What the fork server imports once for every replay worker it forks (a failed import is skipped).
WORKER_PRELOAD = (
    "torch",
    "torch.fx.experimental.symbolic_shapes",
    "jupyterlab_gradcheck.core.check.engine",
    "jupyterlab_gradcheck.core.ledger.replay",
)


def worker_context():
    """The multiprocessing context replay workers start in: a fork server that preloads
    WORKER_PRELOAD where the platform has one (Linux, macOS), else spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(WORKER_PRELOAD))
    return context


def replay_worker() -> None:
    """A pool worker's start: torch on one thread (the pool's processes are the parallelism)."""
    import torch

    torch.set_num_threads(1)
