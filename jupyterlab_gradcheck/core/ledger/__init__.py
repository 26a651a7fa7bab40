"""The audit ledger: the line format and hash chain, appends under a lock, reading, torn
tails, per-check history, the notebook binding, verify and replay, and the ledgered run
(`ledgered_run`) that writes a check's expectation and observation around the engine.

It may import `core.check` and `core.expr` (the check record's shape), never `core.report`.
"""
