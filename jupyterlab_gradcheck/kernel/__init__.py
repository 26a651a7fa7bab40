"""Code that runs in the user's kernel without needing ipywidgets: the in-kernel run with its
tolerance gate, and finding the notebook's ledger. Used by `api` and by `widget`.
"""
