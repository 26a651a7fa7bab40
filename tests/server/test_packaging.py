"""The installed package registers its server extension with Jupyter."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import jupyterlab_gradcheck


def test_jupyter_lists_the_server_extension_as_enabled_and_ok():
    """Given the package installed in this environment,
    when `jupyter server extension list` runs,
    then it shows jupyterlab_gradcheck enabled, and validated OK at the package version."""
    jupyter = Path(sys.executable).with_name("jupyter")
    completed = subprocess.run(
        [str(jupyter), "server", "extension", "list"], capture_output=True, text=True, timeout=120
    )
    output = re.sub(r"\x1b\[[0-9;]*m", "", completed.stdout + completed.stderr)

    assert completed.returncode == 0, output
    assert re.search(r"^\s*jupyterlab_gradcheck enabled\s*$", output, re.M), output
    version = re.escape(jupyterlab_gradcheck.__version__)
    assert re.search(rf"^\s*jupyterlab_gradcheck {version} OK\s*$", output, re.M), output
