"""Leases: who uses what in an output folder now, so that cleanup deletes only what nobody uses.

A lease is one small JSON object, ``OUT/_leases/<kind>-<id>.json`` (``imgrec.contract.layout``), that its
holder writes before it starts, renews while it runs (a heartbeat thread) and deletes when it is done:

- ``build``: a build's staging folder (``target``), and with it the version that build will publish;
- ``reader``: a version that a training run reads (``target``);
- ``prune``: a version that a build is deleting (``target``).

A lease is *live* while its holder runs. On the holder's own machine (the same boot and process
namespace) that is known for sure: its process exists (and is not a zombie). Elsewhere it is known by
the clock: the lease is live until ``expires_at``, which the heartbeat pushes TTL_S ahead every
RENEW_EVERY_S. A dead lease stands for a job its holder did not finish: a cleanup takes it over
(rewrites it as its own, under the lock or a generation precondition), finishes the job, then deletes
it. docs/publication.md has the whole protocol.

Nothing here imports Beam or TensorFlow: the caller hands in the output's ``storage.Storage`` (``LeaseStorage``
says what of it leases use): locally read-decide-write steps run under ``flock`` on the output folder, on
gs:// they rely on generation preconditions.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import json
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Container, Iterable, Iterator
from typing import Any, ContextManager, Protocol

from imgrec.contract import layout
from imgrec.storage import storage as storage_lib
from imgrec.storage.storage import Conflict

# How long a lease lasts unrenewed, and how often its holder renews it (seconds). Only a holder on another
# machine is judged by the clock, so clocks must agree to well within TTL_S - RENEW_EVERY_S.
TTL_S = 60.0
RENEW_EVERY_S = 15.0
# A build that is not waited for (a Dataflow job submitted with --no_wait_until_finish) has nobody to
# renew its lease: it is written once, for this long, and the job's publication step deletes it.
DETACHED_TTL_S = 3 * 24 * 3600.0

_LOG = logging.getLogger(__name__)


def new_id() -> str:
    return uuid.uuid4().hex[:12]


# -- who holds a lease, and whether it still runs --------------------------------------------------------

@functools.lru_cache(maxsize=None)
def machine() -> str | None:
    """This machine's boot and process namespace, or None where /proc does not tell (then only the clock
    judges leases). Processes that share it see each other's process ids."""
    try:
        with open('/proc/sys/kernel/random/boot_id', encoding='ascii') as stream:
            boot = stream.read().strip()
        namespace = os.readlink('/proc/self/ns/pid')
    except OSError:
        return None
    return f'{boot}/{namespace}'


def _process_stat(pid: Any) -> tuple[str, int] | None:
    """(state, start time in clock ticks since boot) of process ``pid``, or None if there is none."""
    try:
        with open(f'/proc/{int(pid)}/stat', encoding='ascii', errors='replace') as stream:
            text = stream.read()
    except (OSError, ValueError, TypeError):
        return None
    fields = text[text.rfind(')') + 2:].split()  # after the command name, which may hold spaces
    return fields[0], int(fields[19])


def process_running(pid: Any, started: Any) -> bool:
    """Whether process ``pid``, started at ``started`` (ticks since boot), still runs. A zombie does not;
    a stopped (paused) process does; another process that reuses the id is not it."""
    found = _process_stat(pid)
    return found is not None and found[0] not in ('Z', 'X', 'x') and found[1] == started


def holder() -> dict[str, Any]:
    """This process, as a lease names its holder."""
    stat = _process_stat(os.getpid())
    return {'machine': machine(), 'pid': os.getpid(), 'started': stat[1] if stat else None,
            'host': socket.gethostname()}


# -- the lease object -------------------------------------------------------------------------------------

def document(kind: str, lease_id: str, target: str | None, token: str, ttl: float,
             held_by: dict[str, Any] | None) -> dict[str, Any]:
    """A lease's JSON object. ``token`` says whose it is now: its holder's id, or a cleanup's after a take-over."""
    return {'kind': kind, 'id': lease_id, 'target': target, 'token': token,
            'expires_at': round(time.time() + ttl, 3), 'holder': held_by}


def encode(lease: dict[str, Any]) -> bytes:
    return (json.dumps(lease, sort_keys=True) + '\n').encode('utf-8')


def parse(data: bytes | None) -> dict[str, Any] | None:
    """The lease object in ``data`` (bytes), or None when it is not one (then it counts as dead)."""
    if data is None:
        return None
    try:
        lease = json.loads(data)
    except ValueError:
        return None
    if not isinstance(lease, dict) or not all(key in lease for key in ('kind', 'id', 'target', 'token', 'expires_at')):
        return None
    return lease


def is_live(lease: dict[str, Any] | None, now: float | None = None) -> bool:
    """Whether the holder of ``lease`` (a parsed object, or None) still runs, as far as this process can tell."""
    if lease is None:
        return False
    held_by = lease.get('holder') or {}
    here = machine()
    if here is not None and held_by.get('machine') == here:
        return process_running(held_by.get('pid'), held_by.get('started'))
    expires_at = lease.get('expires_at')
    return isinstance(expires_at, (int, float)) and expires_at > (time.time() if now is None else now)


# -- the I/O a lease needs --------------------------------------------------------------------------------

class LeaseStorage(Protocol):
    """What leases need of the files of an output: every ``storage.Storage`` is one. A read-decide-write step
    runs under ``locked`` (locally, ``flock`` on the output folder) and writes with a generation
    precondition (on gs://, the service checks it); ``write`` raises ``storage.Conflict`` when it fails."""

    def locked(self, folder: str) -> ContextManager[None]: ...

    def read_versioned(self, path: str) -> storage_lib.Versioned | None: ...

    def write(self, path: str, data: bytes, if_generation: int | None = None) -> int: ...

    def delete(self, path: str) -> None: ...

    def list_level(self, folder: str) -> Iterator[storage_lib.Entry]: ...

    def exists(self, path: str) -> bool: ...

    def remove_empty_folder(self, folder: str) -> None: ...


def _read(storage: LeaseStorage, path: str) -> tuple[bytes | None, int]:
    """(bytes, generation) of ``path``, or (None, 0) when there is none."""
    found = storage.read_versioned(path)
    return (None, 0) if found is None else (found.data, found.generation)


# -- the leases of an output ------------------------------------------------------------------------------

Found = collections.namedtuple('Found', 'path kind id lease data generation')


def folder(output: str) -> str:
    return layout.join(output, layout.LEASES_DIR)


def read_all(storage: LeaseStorage, output: str) -> list[Found]:
    """Every lease object of ``output`` now, as ``Found`` (``lease`` None when it is not a lease object)."""
    found = []
    names = sorted(entry.path.rsplit('/', 1)[-1] for entry in storage.list_level(folder(output)) if not entry.is_folder)
    for name in names:
        parsed = layout.parse_lease_file_name(name)
        if parsed is None:
            continue
        path = layout.join(folder(output), name)
        data, generation = _read(storage, path)
        if data is not None:  # else released meanwhile
            found.append(Found(path, parsed[0], parsed[1], parse(data), data, generation))
    return found


class Live(collections.namedtuple('Live', 'staging building reading pruning')):
    """What the live leases name: staging folder names, and the versions being built, read, pruned."""

    @property
    def versions(self) -> frozenset[str]:
        return self.building | self.reading | self.pruning


def live(found: Iterable[Found], exclude: Container[str] = (), now: float | None = None) -> Live:
    """The ``Live`` of the leases ``found`` (``read_all``), leaving out the lease objects at ``exclude``."""
    now = time.time() if now is None else now
    named = collections.defaultdict(set)
    for entry in found:
        if entry.path in exclude or not is_live(entry.lease, now) or not isinstance(entry.lease.get('target'), str):
            continue
        named[entry.kind].add(entry.lease['target'])
    return Live(staging=frozenset(named[layout.BUILD_LEASE]),
                building=frozenset(layout.staging_version(name) for name in named[layout.BUILD_LEASE]),
                reading=frozenset(named[layout.READER_LEASE]), pruning=frozenset(named[layout.PRUNE_LEASE]))


class Lease:
    """One lease this process holds: written by ``acquire``, renewed by ``renew`` (a heartbeat thread does
    it every RENEW_EVERY_S between ``start`` and ``release``), deleted by ``release``.

    As a context manager: acquire and start the heartbeat; release at the end. ``on_lost(lease)`` is
    called once if the lease stops being this holder's (a cleanup took it over after it lapsed).
    """

    def __init__(self, storage: LeaseStorage, output: str, kind: str, target: str | None, lease_id: str | None = None, *,
                 ttl: float = TTL_S, detached: bool = False, on_lost: Callable[[Lease], None] | None = None):
        self.storage, self.output, self.kind, self.target = storage, output, kind, target
        self.id = lease_id or new_id()
        self.token = self.id
        self.path = layout.join(output, layout.lease_file_name(kind, self.id))
        self.lost = False
        self._ttl = ttl
        self._detached = detached  # no holder process: judged by the clock alone
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _bytes(self) -> bytes:
        return encode(document(self.kind, self.id, self.target, self.token, self._ttl,
                               None if self._detached else holder()))

    def acquire(self) -> Lease:
        with self.storage.locked(self.output):
            self.storage.write(self.path, self._bytes(), if_generation=0)
        return self

    def holds(self) -> bool:
        """Whether the lease object is still this holder's (read now)."""
        data, _ = _read(self.storage, self.path)
        found = parse(data)
        return found is not None and found['token'] == self.token

    def renew(self) -> bool:
        """Pushes the expiry ahead; False (and ``lost``) once the lease is no longer this holder's. A lost
        lease is never written again: whoever took it over may be deleting what it named."""
        if self.lost:
            return False
        with self.storage.locked(self.output):
            data, generation = _read(self.storage, self.path)
            found = parse(data)
            if found is None or found['token'] != self.token:
                self.lost = True
            else:
                try:
                    self.storage.write(self.path, self._bytes(), if_generation=generation)
                except Conflict:
                    self.lost = True
        if self.lost and self._on_lost:
            self._on_lost(self)
        return not self.lost

    def _beat(self) -> None:
        while not self._stop.wait(RENEW_EVERY_S):
            try:
                if not self.renew():
                    return
            except Exception as error:  # an outage: the next beat tries again, well within the TTL
                _LOG.info('renewing lease %s failed (%s); retrying', self.path, error)

    def start(self) -> Lease:
        """Starts the heartbeat thread (a daemon: it never keeps the process alive)."""
        if self._thread is None and not self._detached:
            self._thread = threading.Thread(target=self._beat, name=f'lease-{self.kind}-{self.id}', daemon=True)
            self._thread.start()
        return self

    def release(self) -> None:
        """Stops the heartbeat and deletes the lease object if it is still this holder's."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self.storage.locked(self.output):
            if self.holds():
                self.storage.delete(self.path)
            self.storage.remove_empty_folder(folder(self.output))  # a finished build leaves the output as it was

    def release_quietly(self) -> None:
        """``release``, but a failure (an outage) is only logged: it must not hide the outcome of the work
        the lease covered, and a lease left behind merely lapses (then a cleanup deletes it)."""
        try:
            self.release()
        except Exception as error:  # pylint: disable=broad-except
            _LOG.info('releasing lease %s failed (%s); it will lapse', self.path, error)

    @contextlib.contextmanager
    def held(self) -> Iterator[Lease]:
        """The heartbeat runs while the block does; the lease is released at its end, whatever happens."""
        self.start()
        try:
            yield self
        finally:
            self.release_quietly()

    def __enter__(self) -> Lease:
        self.acquire()
        self.start()
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        self.release_quietly()


def hold_reader(storage: LeaseStorage, output: str, version: str,
                on_lost: Callable[[Lease], None] | None = None) -> Lease | None:
    """A reader's lease on ``version`` of ``output``, renewed from now on (``release()`` it when done); None
    when the version is no longer published once the lease is there (a pruning got to it first).

    The lease is written before ``dataset.json`` is looked at, so a pruning either sees the lease or has
    already unpublished the version (locally both happen under the output folder's lock).
    """
    lease = Lease(storage, output, layout.READER_LEASE, version, on_lost=on_lost)
    with storage.locked(output):
        lease.acquire()
        if not storage.exists(layout.join(output, version, layout.DATASET_JSON)):
            lease.release()
            return None
    return lease.start()


# -- the readers' one API ---------------------------------------------------------------------------------

class Pruned(Exception):
    """The version was unpublished by a pruning as the reader started: resolve it (LATEST) again."""


def _lost_warning(lease: Lease) -> None:
    _LOG.warning('the reader lease %s lapsed: a build with --keep_versions may now delete version %s',
                 lease.path, lease.target)


def reader_lease(output: str, version: str, storage: LeaseStorage | None = None, *,
                 on_lost: Callable[[Lease], None] | None = _lost_warning,
                 warn: Callable[[str], None] | None = None) -> Lease | None:
    """Takes a reader's lease on ``version`` of ``output`` and renews it from a heartbeat thread until it is
    released (``release_quietly``), or its process ends (then it is dead at once on this machine, after TTL_S
    elsewhere). Raises ``Pruned`` when a pruning unpublished the version first. An output this process may
    not write to (read-only, no permission) holds no lease: ``warn`` gets one line, and None is returned,
    since a reader that can read should still read. A folder without LATEST is no build's output (a version
    folder copied elsewhere): nothing prunes there, and no lease is written into it (None)."""
    try:
        storage = storage_lib.storage_for(output) if storage is None else storage  # a scheme it has none for: no lease
        if not storage.exists(layout.join(output, layout.LATEST)):
            return None
        lease = hold_reader(storage, output, version, on_lost=on_lost)
    except Exception as error:  # pylint: disable=broad-except  # any file system's refusal: reading goes on
        cause = str(error).splitlines()[0] if str(error) else type(error).__name__
        (warn or _LOG.warning)(f'cannot hold a reader lease in {folder(output)} ({cause}): a build with '
                               f'--keep_versions may delete version {version} while it is read')
        return None
    if lease is None:
        raise Pruned(f'version {version!r} of {output} was pruned as it was opened')
    return lease


@contextlib.contextmanager
def reading(output: str, version: str, storage: LeaseStorage | None = None, *,
            on_lost: Callable[[Lease], None] | None = _lost_warning,
            warn: Callable[[str], None] | None = None) -> Iterator[Lease | None]:
    """A reader's lease on ``version`` of ``output`` while the block runs (``reader_lease``): what any reader
    of a version wraps its reading in, a user's own tf.data pipeline too (docs/publication.md)."""
    lease = reader_lease(output, version, storage, on_lost=on_lost, warn=warn)
    try:
        yield lease
    finally:
        if lease is not None:
            lease.release_quietly()


def held_while(reader: Any, lease: Lease | None) -> Any:
    """Ties ``lease`` to ``reader`` (a tf.data.Dataset, a Grain dataset: an object read lazily, after the call
    that made it returned): released once ``reader`` is garbage collected, or when the process ends.
    Returns ``reader``; ``reader.reader_lease`` is the lease, for a caller that wants to release it early."""
    if lease is not None:
        weakref.finalize(reader, lease.release_quietly)
    try:
        reader.reader_lease = lease
    except AttributeError:  # an object without a __dict__: the finalizer alone
        pass
    return reader


def resolve_leased(resolve: Callable[[], Any], where: Callable[[Any], tuple[str, str]], *, attempts: int = 3,
                   warn: Callable[[str], None] | None = None) -> tuple[Any, Lease | None]:
    """(what ``resolve()`` found, its reader lease): ``where(found)`` is its (output, version). A version
    pruned as it was opened is resolved again (LATEST moved on meanwhile), up to ``attempts`` times."""
    for attempt in range(attempts):
        found = resolve()
        output, version = where(found)
        try:
            return found, reader_lease(output, version, warn=warn)
        except Pruned:
            if attempt == attempts - 1:
                raise
    raise AssertionError('unreachable')


def take_over(storage: LeaseStorage, output: str, entry: Found, token: str | None = None) -> Lease | None:
    """Makes the dead lease ``entry`` (a ``Found``) this process's, so it can finish the job the lease
    names (``token``: what it is written with, a cleanup's by default); None when the lease is live, gone, or
    already someone else's."""
    lease = entry.lease or {}
    target = lease.get('target') if isinstance(lease.get('target'), str) else None
    taken = Lease(storage, output, entry.kind, target, entry.id)
    taken.token = token or f'cleanup-{new_id()}'
    with storage.locked(output):
        data, generation = _read(storage, entry.path)
        if data is None or data != entry.data or is_live(parse(data)):
            return None
        try:
            storage.write(entry.path, taken._bytes(), if_generation=generation)
        except Conflict:
            return None
    return taken
