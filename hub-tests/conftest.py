"""Fixtures of the JupyterHub class test: one real hub for the session, and two logged-in students.

These tests live outside `tests/` (the plain `pytest` of `make test-python` collects only
`tests/`, as pyproject.toml's testpaths says): they need configurable-http-proxy from npm, which
`scripts/hub-tests.sh` installs into hub-tests/node_modules first.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from pathlib import Path

import pytest
from hub import (
    PASSWORDS,
    PROXY,
    HubProcess,
    Student,
    interpreter_reachable,
    kill_processes_in,
    log_in,
    make_accounts,
    remove_accounts,
    start_servers,
    stop_servers,
)

#: Each student's lab1.ipynb; its kernelspec spares the browser JupyterLab's kernel dialog.
NOTEBOOK = {
    "cells": [{"cell_type": "markdown", "metadata": {}, "source": ["# Lab 1: gradients of x*x"]}],
    "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


@pytest.fixture(scope="session")
def homes():
    """The students' OS accounts (ana, bob), made for the session when missing, each with a home
    of mode 0700 in a folder others may traverse but not list; removed at the end."""
    if os.getuid() != 0:
        pytest.fail("the hub test runs as root: the hub starts each student's server as her own OS account")
    folder = Path(tempfile.mkdtemp(prefix="gradcheck-homes-"))
    folder.chmod(0o711)
    made = make_accounts(folder, PASSWORDS)
    try:
        with interpreter_reachable():
            yield folder
    finally:
        kill_processes_in(folder)
        remove_accounts(made)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def hub(tmp_path_factory, homes):
    """A JupyterHub from examples/jupyterhub_config.py on ports 18000-18003, stopped with everything
    it started at the end of the session, even when a test failed."""
    if not PROXY.exists():
        pytest.fail(
            f"configurable-http-proxy is not installed at {PROXY.relative_to(PROXY.parents[2])}: "
            "run `bash scripts/hub-tests.sh` (it runs `npm ci` in hub-tests/)"
        )
    running = HubProcess(tmp_path_factory.mktemp("hub"), instructor_token=secrets.token_hex(24))
    running.homes = homes
    try:
        running.start()
    except RuntimeError as failed:
        running.stop()
        pytest.fail(str(failed))
    yield running
    left = running.stop()
    if left:  # the hub's own shutdown normally ends them all; say so when it did not
        print(f"\nhub test: killed {len(left)} processes left after the hub stopped: {left}")


@pytest.fixture(scope="session")
def students(hub):
    """Ana and Bob, logged in with their passwords, each with a running server holding lab1.ipynb."""
    logged_in = []
    for name, password in PASSWORDS.items():
        answer = log_in(name, password)
        assert answer.status == 201, answer
        logged_in.append(Student(name, answer.json()["token"]))
    try:
        hub.ready_seconds = start_servers(logged_in)
        print("\nhub test: servers ready after " + ", ".join(f"{n} {s:.1f} s" for n, s in hub.ready_seconds.items()))
        for student in logged_in:
            made = student.server_call(
                "PUT", "api/contents/lab1.ipynb", {"type": "notebook", "format": "json", "content": NOTEBOOK}
            )
            assert made.status == 201, made
        yield {student.name: student for student in logged_in}
    finally:
        stop_servers(logged_in)
