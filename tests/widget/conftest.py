"""The widget tests' kernel: started by Jupyter Server for lab1.ipynb."""

from __future__ import annotations

import pytest


@pytest.fixture
def notebook(tmp_path, monkeypatch):
    """A kernel started by Jupyter Server for lab1.ipynb; returns the notebook's path."""
    path = tmp_path / "lab1.ipynb"
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))
    monkeypatch.chdir(tmp_path)
    return path
