"""A fault-injecting HTTP proxy on 127.0.0.1 in front of the GCS emulator, for the tests.

Point ``STORAGE_EMULATOR_HOST`` at ``FaultProxy.url`` and every google-cloud-storage client (Beam's
included, in this process and in the processes it starts) goes through it. Each request is sorted
into a kind (``KINDS``) and, at ``rate``, answered with a fault (``FAULTS``) instead of the emulator's
answer:

- ``503`` and ``429``: the request never reaches the emulator;
- ``reset``: the emulator handles the request (an upload is stored), then the connection is reset
  halfway through the response body, or before it when the body is too short to halve;
- ``slow``: the answer is held back ``slow_s`` seconds, then sent whole.

Apart from faults, ``delay_s`` holds back every request that long before it is forwarded, as the
round trip to a distant service would (requests in flight wait side by side, each on a thread of its
own), and ``timeline`` records each request answered: its kind, method, path, object name, whether it
asked for a byte range, and when it arrived and was answered (``time.monotonic()``).

Faults are deterministic for a seed: whether the n-th request for one method and path (and, for an
upload, object name) fails depends only on (seed, method, path, name, n), not on the order in which
concurrent requests arrive. ``outage(seconds)`` makes every request of the chosen kinds fail with 503
until the time has passed. ``injected`` counts the faults given, by (kind, fault).

Tests use the ``faulty_gcs`` fixture (``from tests.fault_proxy import faulty_gcs, gcs_emulator``).
"""
import collections
import contextlib
import hashlib
import http.client
import http.server
import json
import re
import socket
import struct
import threading
import time
import typing
import urllib.parse

import pytest

from imgrec.storage import gcs_storage
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture faulty_gcs stands on)

READ, LIST, METADATA, WRITE, LATEST = 'read', 'list', 'metadata', 'write', 'latest'
KINDS = (READ, LIST, METADATA, WRITE, LATEST)
SERVICE_UNAVAILABLE, TOO_MANY_REQUESTS, RESET, SLOW = '503', '429', 'reset', 'slow'
FAULTS = (SERVICE_UNAVAILABLE, TOO_MANY_REQUESTS, RESET, SLOW)
LATEST_NAME = 'LATEST'
_HOP_BY_HOP = frozenset(('connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade',
                         'proxy-connection', 'content-length'))
_OBJECT_NAME_IN_BODY = re.compile(rb'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')
_ERROR_BODY = {SERVICE_UNAVAILABLE: (503, 'Service Unavailable'), TOO_MANY_REQUESTS: (429, 'Too Many Requests')}


def object_name(method, path, body):
    """The object a request is about, '' when it names none (a listing, a bucket)."""
    parsed = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(parsed.query)
    if query.get('name'):
        return query['name'][0]
    match = re.search(r'/b/[^/]+/o/([^/?]+)', parsed.path)
    if match:
        return urllib.parse.unquote(match.group(1))
    if method in ('POST', 'PUT') and body:
        found = _OBJECT_NAME_IN_BODY.search(body[:4096])
        if found:
            return json.loads(b'"' + found.group(1) + b'"')
    return ''


def request_kind(method, path, name):
    """One of KINDS: what a GCS JSON-API request does."""
    parsed = urllib.parse.urlsplit(path)
    if method != 'GET':
        is_latest = name.rsplit('/', 1)[-1].startswith(LATEST_NAME)
        return LATEST if is_latest else WRITE
    if parsed.path.startswith('/download/') or 'alt=media' in parsed.query:
        return READ
    if re.search(r'/b/[^/]+/o/?$', parsed.path):
        return LIST
    return METADATA


class Timed(typing.NamedTuple):
    """One request as the proxy answered it."""
    kind: str
    method: str
    path: str
    name: str
    ranged: bool  # asked for a byte range (a Range header)
    start: float  # time.monotonic() when its headers were read
    end: float  # when its answer began to go out (or the connection was reset)


def _fraction(*parts):
    """A number in [0, 1) that depends only on ``parts``."""
    digest = hashlib.sha256('\x00'.join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], 'big') / 2 ** 64


class FaultProxy:
    """Forwards HTTP requests to ``upstream`` (e.g. 'http://127.0.0.1:9023'), injecting faults.

    ``rate``: the chance that a request of one of ``kinds`` gets a fault, drawn evenly from ``faults``.
    Use as a context manager, or ``start()`` and ``stop()``. Settings may change while it runs.
    """

    def __init__(self, upstream, *, rate=0.0, kinds=KINDS, faults=FAULTS, seed=0, slow_s=0.5, delay_s=0.0):
        self.upstream = urllib.parse.urlsplit(upstream).netloc
        self.configure(rate=rate, kinds=kinds, faults=faults, seed=seed, slow_s=slow_s, delay_s=delay_s)
        self.injected = collections.Counter()  # (kind, fault) -> faults given
        self.requests = collections.Counter()  # kind -> requests seen
        self._seen = collections.Counter()  # (method, path, name) -> requests seen
        self.log = []  # (method, path with query, object name) of every request, in arrival order
        self.timeline = []  # a Timed for every request answered, in the order answered
        self.faulted = []  # (kind, fault, object name) of every fault given
        self._outage = (0.0, frozenset())  # (until, kinds)
        self._lock = threading.Lock()
        self._server = None
        self._thread = None

    def configure(self, *, rate=None, kinds=None, faults=None, seed=None, slow_s=None, delay_s=None):
        """Changes the given settings; the others stay."""
        for kind in kinds or ():
            if kind not in KINDS:
                raise ValueError(f'unknown request kind {kind!r}; one of {KINDS}')
        for fault in faults or ():
            if fault not in FAULTS:
                raise ValueError(f'unknown fault {fault!r}; one of {FAULTS}')
        if rate is not None:
            self.rate = rate
        if kinds is not None:
            self.kinds = frozenset(kinds)
        if faults is not None:
            self.faults = tuple(faults)
        if seed is not None:
            self.seed = seed
        if slow_s is not None:
            self.slow_s = slow_s
        if delay_s is not None:
            self.delay_s = delay_s

    def outage(self, seconds, kinds=KINDS):
        """Every request of ``kinds`` fails with 503 for the next ``seconds``."""
        self._outage = (time.monotonic() + seconds, frozenset(kinds))

    @property
    def url(self):
        host, port = self._server.server_address[:2]
        return f'http://{host}:{port}'

    def start(self):
        proxy = self

        class Handler(_Handler):
            fault_proxy = proxy

        self._server = _Server(('127.0.0.1', 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name='fault-proxy', daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc_info):
        self.stop()

    def choose_fault(self, method, path, name):
        """(kind, fault or None) for this request; counts it."""
        kind = request_kind(method, path, name)
        key = (method, urllib.parse.urlsplit(path).path, name)
        with self._lock:
            self.requests[kind] += 1
            self._seen[key] += 1
            nth = self._seen[key]
            until, outage_kinds = self._outage
            if kind in outage_kinds and time.monotonic() < until:
                fault = SERVICE_UNAVAILABLE
            elif kind in self.kinds and self.faults and _fraction(self.seed, *key, nth) < self.rate:
                fault = self.faults[int(_fraction(self.seed, 'fault', *key, nth) * len(self.faults))]
            else:
                fault = None
            if fault:
                self.injected[kind, fault] += 1
                self.faulted.append((kind, fault, name))
        return kind, fault


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        """A client that goes away mid-request is expected here: say nothing."""


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'
    fault_proxy = None  # set by FaultProxy.start
    _timed = None  # the request being answered, until it is in the timeline

    def log_message(self, format, *args):  # pylint: disable=redefined-builtin
        """Quiet: the tests read ``FaultProxy.injected`` instead."""

    def _read_body(self):
        if 'chunked' in self.headers.get('Transfer-Encoding', '').lower():
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b';')[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b'\r\n', b'\n', b''):
                        pass
                    return b''.join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get('Content-Length') or 0))

    def _forward(self, body):
        """(status, reason, headers, body) of the emulator's answer."""
        headers = {name: value for name, value in self.headers.items() if name.lower() not in _HOP_BY_HOP}
        upstream = http.client.HTTPConnection(self.fault_proxy.upstream, timeout=60)
        try:
            upstream.request(self.command, self.path, body=body, headers=headers)
            response = upstream.getresponse()
            return response.status, response.reason, response.getheaders(), response.read()
        finally:
            upstream.close()

    def _send(self, status, reason, headers, body, cut_at=None):
        self._record()  # before the answer: a client that has it finds its request in the timeline
        self.send_response_only(status, reason)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body if cut_at is None else body[:cut_at])
        self.wfile.flush()

    def _reset(self):
        """Closes the connection with a TCP reset, not an orderly close."""
        with contextlib.suppress(OSError):
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))
            self.connection.close()
        self.close_connection = True

    def _record(self):
        """Adds this request to the timeline, once."""
        if self._timed is None:
            return
        timed, self._timed = self._timed._replace(end=time.monotonic()), None
        with self.fault_proxy._lock:  # pylint: disable=protected-access
            self.fault_proxy.timeline.append(timed)

    def _handle(self):
        start = time.monotonic()
        body = self._read_body()
        name = object_name(self.command, self.path, body)
        with self.fault_proxy._lock:  # pylint: disable=protected-access
            self.fault_proxy.log.append((self.command, self.path, name))
        kind, fault = self.fault_proxy.choose_fault(self.command, self.path, name)
        self._timed = Timed(kind, self.command, self.path, name, 'range' in {h.lower() for h in self.headers},
                            start, start)
        try:
            self._answer(body, kind, fault)
        finally:
            self._record()  # a reset before any answer

    def _answer(self, body, kind, fault):
        if self.fault_proxy.delay_s:
            time.sleep(self.fault_proxy.delay_s)
        if fault in _ERROR_BODY:
            status, reason = _ERROR_BODY[fault]
            error = json.dumps({'error': {'code': status, 'message': f'injected {status} on a {kind} request'}})
            self._send(status, reason, [('Content-Type', 'application/json')], error.encode())
            return
        if fault == SLOW:
            time.sleep(self.fault_proxy.slow_s)
        status, reason, headers, answer = self._forward(body)
        if fault == RESET:
            if len(answer) >= 2:
                self._send(status, reason, headers, answer, cut_at=len(answer) // 2)
            self._reset()
            return
        self._send(status, reason, headers, answer)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle


@pytest.fixture
def faulty_gcs(gcs_emulator, monkeypatch):
    """A FaultProxy (no faults yet) in front of the session's emulator, with STORAGE_EMULATOR_HOST on it.

    Processes started meanwhile (Beam's workers) inherit the variable; the emulator's own client in
    ``gcs_emulator`` keeps talking to the emulator directly, for setting up and checking.
    """
    with FaultProxy(gcs_emulator.url) as proxy:
        monkeypatch.setenv(gcs_storage.EMULATOR_HOST, proxy.url)
        yield proxy
