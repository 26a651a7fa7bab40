"""Server configuration for the Galata UI tests.

Galata's configure_jupyter_server serves a fresh temporary root on port 8888 with no token, so every run
starts from an empty folder (no ledger left over from a previous run). It also turns XSRF
checking off; the pytest suite covers a POST with XSRF enforced.
"""

from jupyterlab.galata import configure_jupyter_server

configure_jupyter_server(c)  # noqa: F821 (c is the config object Jupyter provides)

c.ServerApp.allow_root = True  # noqa: F821 (CI containers run as root)
