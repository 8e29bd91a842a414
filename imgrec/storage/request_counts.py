"""Counts the requests this layer makes of Cloud Storage, by kind, and the bytes they move.

What a build costs in Cloud Storage operations is what it asks of the service, so the count is taken
where each request is sent (``imgrec.storage.gcs_storage``), one per HTTP request: a retried attempt is a
request too. The kinds and their names are ``imgrec.contract.counters.REQUEST_KINDS``. Each count goes two ways:

- the Beam counter of its kind, which reaches the job's results from the workers (Beam drops it outside
  a running bundle; requests made on a pool's threads reach it through ``retries.counted_map`` and
  ``retries.counted_submit``);
- this process's own tally (``made``), which counts every request the process made, in a bundle or
  not. In a launching process whose bundles run in worker processes (Dataflow, a local multi-process
  run), that is the launcher's own requests: pre-flight checks, the refresh plan, the summary.
"""
from __future__ import annotations

import collections
import threading

from imgrec.contract import counters
from imgrec.storage import retries

_made: collections.Counter[counters.Counter] = collections.Counter()
_lock = threading.Lock()

# How google-cloud-storage uploads a file (blob.py, 3.x): up to 8 MiB in one multipart request, larger
# in a resumable session: one request to open it, then one a 100 MiB chunk.
MULTIPART_LIMIT = 8 * 1024 * 1024
RESUMABLE_CHUNK = 100 * 1024 * 1024


def count(counter: counters.Counter, n: int = 1) -> None:
    """Counts ``n`` requests (or bytes) under ``counter`` (a ``imgrec.contract.counters.Counter``)."""
    if not n:
        return
    with _lock:
        _made[counter] += n
    retries.count(counter.namespace, counter.name, n)


def made() -> collections.Counter[counters.Counter]:
    """{Counter: count} of every request (and byte) counted in this process so far."""
    with _lock:
        return collections.Counter(_made)


def upload_requests(size: int) -> int:
    """How many requests uploading ``size`` bytes takes."""
    if size <= MULTIPART_LIMIT:
        return 1
    return 1 + -(-size // RESUMABLE_CHUNK)


def uploaded(size: int) -> None:
    """Counts the requests and bytes of one upload attempt of ``size`` bytes."""
    count(counters.WRITES, upload_requests(size))
    count(counters.BYTES_UPLOADED, size)
