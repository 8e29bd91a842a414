"""Which storage errors are worth a retry, retrying them within a deadline, and counting the retries.

A transient error (a timeout, a reset connection, HTTP 408, 429 or 5xx, google.api_core's
``RetryError``) is retried with exponential backoff until the operation's deadline has passed. What
happens then is the caller's choice: a read that still fails fails the build (``decode``), as does a
write (``storage``). A permanent error (404, 403, a full or read-only disk, a symlink loop, a name too
long) is not retried.

Every retry increments the Beam counter ``retries/<kind>`` (kind: read, write, list), so
``summary_line`` can report them once the build has finished (read by ``imgrec.contract.counters.read``).
Beam keeps metrics per thread: work on a pool's threads goes through ``counted_map`` or ``counted_submit``,
which add their retries (and ``imgrec.storage.request_counts``' requests, through ``count``) to the
calling thread's counters.
"""
from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import errno
import http.client
import json
import logging
import random
import re
import sys
import threading
import time
import typing

import requests
from google.api_core import exceptions as api_exceptions, retry as api_retry
from google.auth import exceptions as auth_exceptions
from google.cloud.storage import exceptions as storage_exceptions

from imgrec.contract import counters

NAMESPACE = counters.RETRIES
READ, WRITE, LIST = 'read', 'write', 'list'
# How long one read, write or listing page may keep retrying transient errors, in seconds. Longer than
# the 120 s Google's clients give up after: a regional GCS hiccup of a few minutes does not fail a build.
DEFAULT_DEADLINE_S = 300.0
# The first pause between attempts, doubled after each (jittered +-50%), at most MAX_DELAY_S.
INITIAL_DELAY_S = 1.0
MAX_DELAY_S = 30.0
# A single HTTP attempt's (connect, read) timeout: a stalled connection becomes a retried timeout.
ATTEMPT_TIMEOUT_S = 60.0
# OSError numbers that no retry can fix.
_PERMANENT_ERRNOS = frozenset((errno.ENOENT, errno.EACCES, errno.EPERM, errno.EISDIR, errno.ENOTDIR, errno.ENOSPC,
                               errno.EROFS, errno.EDQUOT, errno.ENAMETOOLONG, errno.EEXIST, errno.EFBIG,
                               errno.EINVAL, errno.ENOTEMPTY, errno.ELOOP, errno.ENXIO, errno.ENODEV))
_TRANSIENT_TYPES = (TimeoutError, ConnectionError, http.client.HTTPException, requests.ConnectionError,
                    requests.Timeout, requests.exceptions.ChunkedEncodingError,
                    requests.exceptions.ContentDecodingError, storage_exceptions.DataCorruption,
                    api_exceptions.RetryError)
_LOG = logging.getLogger(__name__)
T = typing.TypeVar('T')


class RetryPolicy(typing.NamedTuple):
    """How long to keep retrying one operation, and how to space the attempts (doubling, jittered +-50%)."""
    deadline_s: float
    initial_delay_s: float
    max_delay_s: float


def default_policy(deadline_s: float | None = None) -> RetryPolicy:
    """The module's defaults (read when called), with ``deadline_s`` when given: e.g. a --retry_deadline."""
    return RetryPolicy(DEFAULT_DEADLINE_S if deadline_s is None else deadline_s, INITIAL_DELAY_S, MAX_DELAY_S)


class RetriesExhausted(Exception):
    """A transient error outlasted the deadline; ``cause`` is the last error."""

    def __init__(self, cause: BaseException, attempts: int, seconds: float):
        super().__init__(f'{describe(cause)} (still failing after {attempts} attempts in {seconds:.0f} s)')
        self.cause = cause


def _is_transient_status(status: int) -> bool:
    return status in (408, 429) or 500 <= status < 600


def is_transient(error: BaseException) -> bool:
    """Whether ``error`` is worth retrying: I/O trouble, HTTP 408, 429 or 5xx; not a missing or forbidden file."""
    if isinstance(error, api_exceptions.GoogleAPICallError):
        return isinstance(error.code, int) and _is_transient_status(error.code)
    if isinstance(error, storage_exceptions.InvalidResponse):  # a resumable upload's or download's status
        return _is_transient_status(getattr(error.response, 'status_code', 0) or 0)
    if isinstance(error, auth_exceptions.TransportError):
        return True
    if isinstance(error, _TRANSIENT_TYPES):
        return True
    if isinstance(error, requests.RequestException):  # an OSError too, but a bad URL or request, not the network
        return False
    if isinstance(error, OSError):
        return error.errno not in _PERMANENT_ERRNOS and not isinstance(
            error, (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError))
    return False


# google.api_core's message of an HTTP error: 'GET https://...: <the server's message>: (<the client's detail>)'.
_API_MESSAGE = re.compile(r'^(?:[A-Z]+ \S+: )?(?P<message>.*?)(?:: \(.*\))?$')


def describe(error: BaseException) -> str:
    """One line about ``error``: 'ServiceUnavailable (HTTP 503): the server's message', 'TimeoutError: ...'."""
    if isinstance(error, RetriesExhausted):
        return str(error)
    if isinstance(error, api_exceptions.RetryError) and error.cause is not None:  # a client's own retries gave up
        return f'{describe(error.cause)} (retried until the deadline)'
    text = (str(error).strip().splitlines() or [''])[0]
    if isinstance(error, api_exceptions.GoogleAPICallError):
        found = _API_MESSAGE.match(error.message.splitlines()[0] if error.message else '')
        message = found['message'] if found else ''
        with contextlib.suppress(ValueError, TypeError, KeyError):  # a JSON error document: its message
            message = json.loads(message)['error']['message']
        return f'{type(error).__name__} (HTTP {error.code})' + (f': {message}' if message else '')
    return f'{type(error).__name__}: {text}' if text else type(error).__name__


def _delays(policy: RetryPolicy) -> typing.Iterator[float]:
    delay = policy.initial_delay_s
    while True:
        yield delay * random.uniform(0.5, 1.5)
        delay = min(delay * 2, policy.max_delay_s)


def _beam_count(namespace: str, name: str, n: int) -> None:
    """Adds ``n`` to a Beam counter, in a process that runs Beam. One that never imported it (training) has
    no bundle to count in: ``request_counts`` keeps its own tally there."""
    if 'apache_beam' not in sys.modules:
        return
    from apache_beam.metrics import Metrics  # pylint: disable=import-outside-toplevel
    Metrics.counter(namespace, name).inc(n)


_pool_thread = threading.local()  # .tally: the Counter of the counted_map this thread works for


def count(namespace: str, name: str, n: int = 1) -> None:
    """Adds ``n`` to the Beam counter namespace/name from any thread: on a ``counted_map`` or
    ``counted_submit`` pool thread to that call's tally, which is added on its calling thread (Beam
    keeps metrics per thread, and a pool's threads have none)."""
    tally = getattr(_pool_thread, 'tally', None)
    if tally is None:
        _beam_count(namespace, name, n)
    else:
        with tally.lock:
            tally[namespace, name] += n


def _count_retry(kind: str) -> None:
    count(NAMESPACE, kind)


class _Tally(collections.Counter):
    """Counts by (namespace, name), with the lock its writers take."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()


def _new_tally() -> _Tally:
    return _Tally()


def _on_tally(tally, function, *args):
    _pool_thread.tally = tally
    try:
        return function(*args)
    finally:
        _pool_thread.tally = None


def _add(tally):
    for (namespace, name), n in tally.items():
        _beam_count(namespace, name, n)


def counted_map(pool: concurrent.futures.Executor, function: typing.Callable[[typing.Any], T],
                items: typing.Iterable[typing.Any]) -> list[T]:
    """``list(pool.map(function, items))``, the retries and requests made on the pool's threads counted here."""
    tally = _new_tally()
    results = list(pool.map(lambda item: _on_tally(tally, function, item), items))
    _add(tally)
    return results


def counted_submit(pool: concurrent.futures.Executor, function: typing.Callable[..., T],
                   *args: typing.Any) -> typing.Callable[[], T]:
    """``pool.submit(function, *args).result``: called on this thread, it returns the result (or raises)
    and counts here the retries and requests made on the pool's thread."""
    tally = _new_tally()
    future = pool.submit(_on_tally, tally, function, *args)

    def result() -> T:
        try:
            return future.result()
        finally:
            _add(tally)
            tally.clear()

    return result


def call(attempt: typing.Callable[[], T], kind: str, what: str, policy: RetryPolicy | None = None) -> T:
    """``attempt()``, retried while it raises transient errors, until ``policy.deadline_s`` has passed.

    Raises a permanent error as it is, and RetriesExhausted when the deadline passes. ``what`` names
    the object for the log; each retry counts in ``retries/<kind>``.
    """
    policy = policy or default_policy()
    start = time.monotonic()
    attempts = 0
    for delay in _delays(policy):
        attempts += 1
        try:
            return attempt()
        except Exception as error:  # classified just below
            if not is_transient(error):
                raise
            remaining = policy.deadline_s - (time.monotonic() - start)
            if remaining <= 0:
                raise RetriesExhausted(error, attempts, time.monotonic() - start) from error
            _count_retry(kind)
            _LOG.info('%s of %s failed (%s); retrying', kind, what, describe(error))
            time.sleep(min(delay, remaining))
    raise AssertionError('unreachable')  # _delays never ends


def api_retry_for(kind: str, policy: RetryPolicy | None = None) -> api_retry.Retry:
    """The same policy as a google.api_core Retry, for client calls that take one (listing pages)."""
    policy = policy or default_policy()
    return api_retry.Retry(predicate=is_transient, initial=policy.initial_delay_s, maximum=policy.max_delay_s,
                           multiplier=2.0, timeout=policy.deadline_s, on_error=lambda error: _count_retry(kind))


_KIND_NAMES = ((READ, 'reads'), (WRITE, 'writes'), (LIST, 'listings'))


def summary_line(result: typing.Any) -> str | None:
    """'retried 7 operations (5 reads, 2 writes)' from a finished PipelineResult; None when nothing was retried."""
    counts = collections.Counter({counter.name: value
                                  for counter, value in counters.read(result, NAMESPACE).items()})
    total = sum(counts.values())
    if not total:
        return None
    parts = ', '.join(f'{counts[kind]} {name}' for kind, name in _KIND_NAMES if counts[kind])
    return f'retried {total} operations ({parts})'
