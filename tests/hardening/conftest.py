"""The hardening suite's summary: the figures its tests measured, printed after the run.

pytest-jupyter's server plugin is registered in tests/conftest.py (pytest honours
`pytest_plugins` only there); the server tests here configure it with their own
`jp_server_config`.
"""

from __future__ import annotations

from figures import FIGURES


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print what the hardening tests counted (cases, fuzz examples, faults, entries lost)."""
    if not FIGURES:
        return
    terminalreporter.section("hardening figures")
    for name in sorted(FIGURES):
        terminalreporter.write_line(f"{name}: {FIGURES[name]}")
