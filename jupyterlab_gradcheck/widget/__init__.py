"""The inline ipywidgets panel; `GradcheckPanel` is imported on first use (it needs ipywidgets)."""


def __getattr__(name):
    if name == "GradcheckPanel":
        from .panel import GradcheckPanel

        return GradcheckPanel
    raise AttributeError(name)


__all__ = ["GradcheckPanel"]
