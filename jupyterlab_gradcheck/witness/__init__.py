"""The witness service: a small tornado app that keeps a signed log of every ledger head it is
told of. It runs standalone (`jupyter gradcheck witness`) or as a JupyterHub managed service."""
