"""Constants and configuration shared by the server tests."""

from __future__ import annotations

from traitlets.config import Config

#: Worker timeout in these tests, seconds. A warm scalar check takes a few milliseconds, so
#: only the test functions below come near it; it is short to keep the timeout test quick.
TIMEOUT = 4.0
#: A check of this function sleeps far longer than TIMEOUT in the worker (test-only option).
STUCK = "x*x*x"
#: A check of this function sleeps 1 s (well under TIMEOUT): long enough to fill the queue.
SLOW = "x*x*x*x"


def server_config(**extension_options) -> Config:
    """The test server's config: the extension on, authentication required, two workers."""
    options = {"workers": 2, "timeout": TIMEOUT, "queue_size": 64, "test_slow_functions": {STUCK: 600.0, SLOW: 1.0}}
    options.update(extension_options)
    return Config(
        {
            "ServerApp": {
                "jpserver_extensions": {"jupyterlab_gradcheck": True, "jupyter_server_terminals": False},
                "allow_unauthenticated_access": False,
            },
            "GradcheckExtension": options,
        }
    )


def one_worker_config() -> Config:
    """A server for the hostile-input stories: the extension on, authentication required, one
    worker, a timeout no refused request comes near, and no test-only slow functions."""
    return Config(
        {
            "ServerApp": {"jpserver_extensions": {"jupyterlab_gradcheck": True}, "allow_unauthenticated_access": False},
            "GradcheckExtension": {"workers": 1, "timeout": 60.0},
        }
    )
