"""The jupyter-server extension: REST routes whose checks run in a pool of worker processes.

This package's `__init__` stays empty so that a worker process, which imports
`server.worker`, does not load jupyter-server.
"""
