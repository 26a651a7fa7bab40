"""The domain core of jupyterlab-gradcheck, in four rooms that import one way only.

- `expr`: the safe expression language (parser, evaluator, shapes, function table, SymPy).
- `check`: one check from record to result (spec, engine, observations, finite differences,
  comparisons, diagnosis, verdicts).
- `ledger`: the hash-chained ledger, its binding to a notebook, verify and replay, and the
  ledgered run that writes a check into it.
- `report`: exports (CSV, JSON, HTML, notebook) and the submissions they read.

`report -> ledger -> check -> expr`; `errors` and `jsonio` sit here because every room uses
them. Every surface (CLI, server extension, inline widget, Python API) calls these modules.
Nothing here imports tornado, jupyter or ipywidgets, and importing a room does not import
torch: the modules that need torch import it themselves.
"""
