"""jupyterlab-gradcheck: check PyTorch gradients with the expectation written first.

Importing the package stays light (no torch, no jupyter-server): `check` and
`GradcheckPanel` are imported on first use, and the entry points below import what they need
only when Jupyter asks for them.
"""

try:
    from ._version import __version__
except ImportError:  # a source checkout that was never built or installed
    __version__ = "0.0.0+unknown"

__all__ = ["GradcheckPanel", "check", "set_language", "__version__"]


def __getattr__(name):
    """`from jupyterlab_gradcheck import check, GradcheckPanel`, imported when first asked for."""
    if name == "check":
        from .api import check

        return check
    if name == "GradcheckPanel":
        from .widget.panel import GradcheckPanel

        return GradcheckPanel
    if name == "set_language":  # "es", "en", or None for the locale environment
        from .core.i18n import set_language

        return set_language
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _jupyter_labextension_paths():
    """Where JupyterLab finds the prebuilt side panel."""
    return [{"src": "labextension", "dest": "jupyterlab-gradcheck"}]


def _jupyter_server_extension_points():
    """The server extension that serves the check-running REST API."""
    from .server.extension import GradcheckExtension

    return [{"module": "jupyterlab_gradcheck", "app": GradcheckExtension}]
