"""Server configuration for the Galata UI tests.

Galata's configure_jupyter_server serves a fresh temporary root on port 8888 with no token, so every run
starts from an empty folder (no ledger left over from a previous run). It also turns XSRF
checking off; the pytest suite covers a POST with XSRF enforced.
"""

from pathlib import Path

from jupyterlab.galata import configure_jupyter_server

configure_jupyter_server(c)  # noqa: F821 (c is the config object Jupyter provides)

# Stories that run `jupyter gradcheck verify` on the server's own files, as a grader would,
# find the server root here (ui-tests/.cache is not tracked).
SERVER_ROOT_NOTE = Path(__file__).parent / ".cache" / "server-root"
SERVER_ROOT_NOTE.parent.mkdir(exist_ok=True)
SERVER_ROOT_NOTE.write_text(c.ServerApp.root_dir, encoding="utf-8")  # noqa: F821

c.ServerApp.allow_root = True  # noqa: F821 (CI containers run as root)
