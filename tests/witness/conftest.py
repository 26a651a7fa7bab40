"""A live witness on loopback for every story here, started and killed by the test."""

from __future__ import annotations

import pytest

from support.witness import Witness


@pytest.fixture
def witness(tmp_path):
    running = Witness(tmp_path / "witness" / "w.jsonl")
    running.log.parent.mkdir()
    yield running.start()
    if running.process.poll() is None:
        running.kill()
