"""One storage interface for local paths and gs:// objects; ``storage_for`` is the one place that tells them apart.

The layer uses one stack: the standard library for local paths, google-cloud-storage for gs:// (single
attempts, the client's own retries off, every request counted). Not Beam's FileSystems: training never
imports Beam, and Beam's gcsio would retry on its own, uncounted. Not ``tf.io.gfile``: Beam's workers
have no TensorFlow. Nothing here imports Beam or TensorFlow, so both sides can use it. TensorFlow's file
systems serve only the URLs nothing else does (``ram://``), which only training, which has TensorFlow,
is handed (``tf_storage``).

Each ``Storage`` owns its retry policy (``retry``): transient errors are retried under it, permanent
ones raise at once. Reads raise the permanent error as it is (a missing file: ``FileNotFoundError``
locally, ``google.api_core.exceptions.NotFound`` on gs://), or ``retries.RetriesExhausted``; writes,
copies and deletions raise ``BuildFailed``, one line naming the file, or ``Conflict`` when a generation
precondition does not hold.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any, BinaryIO, ContextManager, Protocol, TypeVar, runtime_checkable

from imgrec_console.errors import BuildFailed
from imgrec_storage import retries

GCS_SCHEME = 'gs://'
T = TypeVar('T')


class Conflict(Exception):
    """A conditional write found the file changed (or there) since it was read: someone else's now."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """A file (or, from ``list_level``, a folder) as a listing or a stat sees it. ``generation`` says which
    version of the file this is: a gs:// object's generation; locally the file's inode and modification time (a
    file is always replaced whole, by a rename). ``updated``: seconds since the epoch. A folder has size 0
    and generation 0."""
    path: str
    size: int
    generation: int
    updated: float
    is_folder: bool = False


@dataclasses.dataclass(frozen=True)
class Versioned:
    """A file's bytes and the generation they were read at (for a later ``write(if_generation=)``)."""
    data: bytes
    generation: int


@runtime_checkable
class Writer(Protocol):
    """A file written piece by piece; it appears, whole, on ``close()``, and never when the block raised."""

    def write(self, data: bytes) -> Any: ...

    def close(self) -> None: ...

    def __enter__(self) -> Writer: ...

    def __exit__(self, kind: Any, error: Any, trace: Any) -> None: ...


@runtime_checkable
class Storage(Protocol):
    """Files below one scheme, retried under ``retry``. Paths are full paths (or gs:// URLs), joined with '/'."""

    retry: retries.RetryPolicy
    # Whether each call waits a network round trip, so that callers overlap calls and coalesce reads.
    remote: bool

    def read(self, path: str) -> bytes:
        """The whole file. Locally no further than its size when opened, and only a regular file
        (``fileio.NotARegularFile`` otherwise)."""

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes [start, end); ``byte_ranges.TruncatedRead`` when the file ends before ``end``."""

    def read_versioned(self, path: str) -> Versioned | None:
        """The bytes and their generation, or None when there is no such file."""

    def open_read(self, path: str) -> BinaryIO:
        """The file as a stream to read front to back (``read(n)``, ``close()``, a context manager)."""

    def write(self, path: str, data: bytes, if_generation: int | None = None) -> int:
        """Writes the file whole (creating local parent folders); returns its new generation.

        ``if_generation``: None writes unconditionally; 0 only if there is no such file (locally, an
        atomic link); another number only if the file is still that generation (locally, exact only
        under ``locked``). Raises ``Conflict`` when the precondition fails, unless the file already
        holds ``data`` (an earlier attempt landed and its answer was lost).
        """

    def write_all(self, files: Mapping[str, bytes]) -> None:
        """Writes every {path: data}, several at a time when ``remote``; BuildFailed of the first, in path order."""

    def open_write(self, path: str) -> Writer:
        """A ``Writer`` for ``path``: locally written in place; on gs:// staged and uploaded on ``close()``."""

    def stat(self, path: str) -> Entry | None:
        """The file's ``Entry``, or None when there is none."""

    def exists(self, path: str) -> bool:
        """Whether there is a file at ``path``."""

    def list(self, folder: str) -> Iterator[Entry]:
        """Every file below ``folder``, at any depth, in path order, one page in memory at a time."""

    def list_level(self, folder: str) -> Iterator[Entry]:
        """The files and the folders (``is_folder``) directly below ``folder``, in no set order."""

    def copy(self, source: str, target: str) -> None:
        """Copies file ``source`` to ``target`` (on gs://, server-side)."""

    def delete(self, path: str) -> None:
        """Deletes file ``path``; one already gone is fine."""

    def delete_tree(self, folder: str) -> None:
        """Deletes ``folder`` and everything below it, if there is any."""

    def remove_empty_folder(self, folder: str) -> None:
        """Removes the local ``folder`` if nothing is in it (object stores have no folders to remove)."""

    def locked(self, folder: str) -> ContextManager[None]:
        """An exclusive lock on ``folder`` across processes of this machine (locally, ``flock``); on gs://
        nothing (a read-decide-write step there relies on ``write``'s generation precondition)."""

    def will_read(self, path: str) -> None:
        """A hint that ``path`` is about to be read (locally, its pages come in meanwhile)."""


def retried(doing: str, what: str, attempt: Callable[[], T], retry: retries.RetryPolicy) -> T:
    """``attempt()`` with transient errors retried (as writes); a failure other than ``Conflict`` is a one-line
    BuildFailed naming ``what`` (``doing``: 'write', 'copy', 'delete')."""
    try:
        return retries.call(attempt, retries.WRITE, what, retry)
    except (BuildFailed, Conflict):
        raise
    except Exception as error:  # every write failure ends the build in one line naming the file
        raise BuildFailed(f'cannot {doing} {what}: {retries.describe(error)}') from error


def on_gcs(path: str) -> bool:
    """Whether ``path`` names a gs:// object: for rules about where files must be (Dataflow needs gs://)."""
    return path.startswith(GCS_SCHEME)


def storage_for(path: str, retry: retries.RetryPolicy | None = None,
                options: Mapping[str, Any] | None = None) -> Storage:
    """The ``Storage`` for ``path``'s scheme: gs://, a local path, or another URL for TensorFlow's file systems.

    ``retry``: the policy (``retries.default_policy()`` when None). ``options``: for gs://, the job's
    pipeline options as a dict, so a worker authenticates as the job does (None: this process's command
    line, as Beam's file systems read it when no pipeline gave them options).
    """
    retry = retry or retries.default_policy()
    if on_gcs(path):
        return _gcs_storage(retry, json.dumps(dict(options), sort_keys=True, default=str) if options else None)
    if '://' in path:
        return _tensorflow_storage(retry)
    return _local_storage(retry)


@functools.lru_cache(maxsize=None)
def _local_storage(retry: retries.RetryPolicy) -> Storage:
    from imgrec_storage.local_storage import LocalStorage  # pylint: disable=import-outside-toplevel
    return LocalStorage(retry)


@functools.lru_cache(maxsize=None)
def _tensorflow_storage(retry: retries.RetryPolicy) -> Storage:
    from imgrec_storage.tf_storage import TensorFlowStorage  # pylint: disable=import-outside-toplevel
    return TensorFlowStorage(retry)


@functools.lru_cache(maxsize=None)
def _gcs_storage(retry: retries.RetryPolicy, options_json: str | None) -> Storage:
    # Imported for gs:// paths only: the client library costs a second to import.
    from imgrec_storage.gcs_storage import GcsStorage  # pylint: disable=import-outside-toplevel
    return GcsStorage(retry, json.loads(options_json) if options_json else None)
