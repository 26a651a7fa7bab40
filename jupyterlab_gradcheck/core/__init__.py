"""The domain core of jupyterlab-gradcheck.

Every surface (CLI, server extension, inline widget, Python API) calls these modules.
Nothing here imports tornado, jupyter or ipywidgets, and importing the package does not
import torch: the modules that need torch import it themselves.
"""
