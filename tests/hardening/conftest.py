"""Shared pieces of the hardening suite: the figures summary, and a real jupyter server.

The server fixtures follow pytest-jupyter: `jp_server_config` enables the extension with one
worker and a short timeout, so the corpus, fault and fuzz tests meet the same server a user
runs, with real worker processes.
"""

from __future__ import annotations

import os

import pytest

from figures import FIGURES

# pytest-jupyter's server plugin is registered in tests/conftest.py (pytest honours
# pytest_plugins only there).


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print what the hardening tests counted (cases, fuzz examples, faults, entries lost)."""
    if not FIGURES:
        return
    terminalreporter.section("hardening figures")
    for name in sorted(FIGURES):
        terminalreporter.write_line(f"{name}: {FIGURES[name]}")


def hypothesis_examples(default: int) -> int:
    """Examples per Hypothesis test: `default` in `make test`, 10^5 with HYPOTHESIS_PROFILE=fuzz."""
    return 100_000 if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else default


@pytest.fixture
def notebook_root(jp_root_dir):
    """`work/lab1.ipynb` (an empty notebook) under the server root; returns the root."""
    import nbformat

    work = jp_root_dir / "work"
    work.mkdir(exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), str(work / "lab1.ipynb"))
    return jp_root_dir
