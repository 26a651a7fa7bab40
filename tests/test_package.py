"""The package's top level: light to import, with the short imports a user expects."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> str:
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()


def test_importing_the_package_imports_neither_torch_nor_a_surface():
    """Given a fresh interpreter, when the package and each core room are imported,
    then torch, ipywidgets, tornado and jupyter_server are still not loaded."""
    loaded = _run(
        "import sys, jupyterlab_gradcheck, jupyterlab_gradcheck.core.expr, jupyterlab_gradcheck.core.check, "
        "jupyterlab_gradcheck.core.ledger, jupyterlab_gradcheck.core.report\n"
        "print(sorted(m for m in ('torch', 'ipywidgets', 'tornado', 'jupyter_server') if m in sys.modules))"
    )
    assert loaded == "[]"


def test_check_and_the_panel_come_from_the_top_level_on_first_use():
    """Given a fresh interpreter, when `check` and `GradcheckPanel` are imported from the top
    level, then they are the API's function and the widget's class, and the seed check runs."""
    out = _run(
        "from jupyterlab_gradcheck import check, GradcheckPanel\n"
        "from jupyterlab_gradcheck.api import check as api_check\n"
        "from jupyterlab_gradcheck.widget.panel import GradcheckPanel as Panel\n"
        "print(check is api_check, GradcheckPanel is Panel)\n"
        "print(check('x*x', '2*x', x=3.0, ledger=False).record['observed_gradient'])"
    )
    assert out.splitlines() == ["True True", "6.0"]


def test_an_unknown_top_level_name_is_an_attribute_error():
    """Given the package, when a name it does not define is asked for, then AttributeError
    names it (a typo is not silently None)."""
    import jupyterlab_gradcheck

    with pytest.raises(AttributeError, match="no attribute 'chek'"):
        jupyterlab_gradcheck.chek  # noqa: B018
