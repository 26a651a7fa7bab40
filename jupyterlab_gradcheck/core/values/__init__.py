"""Values as a check record holds them: the torch-free form (`form`: numbers, nested lists, complex
pairs, empty tensors, and stored values whose bytes live in the blob store), the tensor side
(`tensors`: a record's value to a tensor and back, summarised on its device), and the blob store
beside a ledger (`blobs`: safetensors files named by their SHA-256, written with fsync).

Imports `core/expr` (its limits) and the core's root only; `form` and `blobs` import no torch, so
the server process may load them.
"""
