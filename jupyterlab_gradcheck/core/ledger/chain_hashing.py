"""Checking the stored hash of every line of a ledger, on a second core while the first decodes.

Hashing is most of the cost of verifying a ledger of full records. `hashed_ahead` hashes a few
batches ahead in a thread (hashlib releases the GIL on large buffers); `hash_in_child` forks a
process that hashes a whole large file, free of the interpreter lock altogether.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from .line_format import stored_hash_ok

Lines = Iterable[tuple[int, bytes, bool]]
#: Lines hashed per batch, and how many batches the hashing thread may run ahead.
BATCH, AHEAD = 256, 4


def hash_batch(batch: list) -> list[bool]:
    return [complete and stored_hash_ok(raw) for _number, raw, complete in batch]


def hashed_ahead(lines: Lines) -> Iterator[tuple[list, list[bool]]]:
    """Batches of lines with their `hash_ok` flags, hashed a few batches ahead in a thread.

    Hashing is most of the cost of verifying a ledger of full records; hashlib releases the
    GIL on large buffers, so a second core hashes while this one decodes.
    """
    queue: collections.deque = collections.deque()
    with ThreadPoolExecutor(max_workers=1) as pool:
        batch: list = []
        for item in lines:
            batch.append(item)
            if len(batch) == BATCH:
                queue.append((batch, pool.submit(hash_batch, batch)))
                batch = []
                if len(queue) > AHEAD:
                    done, future = queue.popleft()
                    yield done, future.result()
        if batch:
            queue.append((batch, pool.submit(hash_batch, batch)))
        while queue:
            done, future = queue.popleft()
            yield done, future.result()


def hash_in_child(lines_of_file: Callable[[], Lines]) -> Callable[[], tuple[int, list[int]] | None]:
    """Fork a child that checks the stored hash of every complete line of a ledger file.

    On a large ledger a hashing thread still competes with the decoding loop for the
    interpreter lock (everything around each hashlib call holds it); a second process does
    not. Returns a function that waits for the child and gives `(last complete line, line
    numbers whose hash is wrong)`, or None when no child could run (the caller then verifies
    with hashing in a thread).
    """
    import json
    import os

    if not hasattr(os, "fork"):
        return lambda: None
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return lambda: None
    if pid == 0:  # the child: hash, report, and leave without running any cleanup
        status = 1
        try:
            os.close(read_end)
            upto, bad = 0, []
            for number, raw, complete in lines_of_file():
                if not complete:
                    break
                upto = number
                if not stored_hash_ok(raw):
                    bad.append(number)
            with os.fdopen(write_end, "w") as out:
                json.dump([upto, bad], out)
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)

    def collect() -> tuple[int, list[int]] | None:
        with os.fdopen(read_end) as answer:
            text = answer.read()
        _, status = os.waitpid(pid, 0)
        if status != 0 or not text:
            return None
        upto, bad = json.loads(text)
        return upto, bad

    return collect
