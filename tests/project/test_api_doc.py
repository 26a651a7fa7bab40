"""docs/api.md runs as written: its Python blocks, executed in order in one namespace."""

from __future__ import annotations

import linecache
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_every_example_of_the_api_page_runs_and_its_asserts_hold(tmp_path, monkeypatch):
    """Given docs/api.md,
    when each ```python block is executed in order in one namespace, in a fresh folder,
    then none raises: every assert the page makes about a result holds."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(blocks) >= 6  # the set-up and at least one example for each of the page's points
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "api_doc"}
    for number, block in enumerate(blocks, 1):
        name = f"<{DOC.name} block {number}>"
        # registered as IPython registers a cell, so that inspect finds the source of what it defines
        linecache.cache[name] = (len(block), None, block.splitlines(True), name)
        exec(compile(block, name, "exec"), namespace)  # the page's own examples
