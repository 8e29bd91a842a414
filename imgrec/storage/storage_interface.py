"""The storage interface every implementation shares: the ``Storage`` protocol, its entries and errors,
and ``BaseStorage``; the path rules that need no I/O are ``imgrec.storage.paths``. ``imgrec.storage.storage`` picks
the implementation; the implementations import this module, never that one.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ContextManager, Protocol, TypeVar, cast, runtime_checkable

from imgrec.console.errors import BuildFailed
from imgrec.storage import retries
from imgrec.storage.paths import scheme_key

T = TypeVar('T')


class Conflict(Exception):
    """A conditional write found the file changed (or there) since it was read: someone else's now."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """A file (or, from ``list_level``, a folder) as a listing or a stat sees it. ``generation`` says which
    version of the file this is: a gs:// object's generation; locally the file's inode and modification time (a
    file is always replaced whole, by a rename). ``updated``: seconds since the epoch. A folder has size 0
    and generation 0; a local name that cannot be stat'ed (a broken link, a loop) has size -1, for its read to
    say why. ``local_stamp``: a local file's (mtime_ns, ctime_ns, inode), the stamp git's index keeps too
    (docs/reuse.md); None for an object, whose ``generation`` says it changed."""
    path: str
    size: int
    generation: int
    updated: float
    is_folder: bool = False
    local_stamp: tuple[int, int, int] | None = None


@dataclasses.dataclass(frozen=True)
class Versioned:
    """A file's bytes and the generation they were read at (for a later ``write(if_generation=)``)."""
    data: bytes
    generation: int


@runtime_checkable
class Reader(Protocol):
    """A file read front to back."""

    def read(self, size: int = -1) -> bytes: ...

    def readline(self) -> bytes: ...

    def __iter__(self) -> Iterator[bytes]: ...

    def tell(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> Any: ...

    def __exit__(self, kind: Any, error: Any, trace: Any) -> Any: ...


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
    # What the storage is, for callers whose rules depend on it (never on a path's scheme):
    # whether each call waits a network round trip, so that callers overlap calls, coalesce reads and spare
    # listings they can do without;
    remote: bool
    # whether machines elsewhere (Dataflow's workers, a TPU node's hosts) reach these paths as this one does
    # (a local path is this machine's own disk);
    reachable_by_cloud_workers: bool
    # whether a path through '..' names the file it leads to (a local folder's does; an object's name is a plain
    # string), as a TFDS view's links to its version's shards need.
    resolves_relative_links: bool

    def read(self, path: str) -> bytes:
        """The whole file. Locally no further than its size when opened, and only a regular file
        (``local_storage.NotARegularFile`` otherwise)."""

    def read_once(self, path: str) -> bytes:
        """``read`` in one attempt, its error raised as it is: for a caller that begins reads ahead and
        retries them itself (``imgrec.transforms.decode``)."""

    def read_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes [start, end); ``byte_ranges.TruncatedRead`` when the file ends before ``end``."""

    def read_versioned(self, path: str) -> Versioned | None:
        """The bytes and their generation, or None when there is no such file."""

    def open_read(self, path: str) -> Reader:
        """The file as a stream to read front to back (``read(n)``, ``readline()``, its lines by iteration,
        ``tell()``, ``close()``, a context manager)."""

    def write(self, path: str, data: bytes, if_generation: int | None = None) -> int:
        """Writes the file whole (creating local parent folders); returns its new generation.

        ``if_generation``: None writes unconditionally; 0 only if there is no such file (locally, an
        atomic link); another number only if the file is still that generation (locally, exact only
        under ``locked``). Raises ``Conflict`` when the precondition fails, unless the file already
        holds ``data`` (an earlier attempt landed and its answer was lost).
        """

    def write_all(self, files: Mapping[str, bytes]) -> None:
        """Writes every {path: data}, several at a time when ``remote``; BuildFailed of the first, in path order."""

    def put_file(self, local_path: str, path: str) -> None:
        """Copies the finished local file ``local_path`` to ``path``, streamed from the file."""

    def local_path(self, path: str) -> str | None:
        """``path`` as a file on this machine's disk, for a library that only writes those (ArrayRecord);
        None where it is not one (an object: write a temporary file, then ``put_file``)."""

    def open_write(self, path: str) -> Writer:
        """A ``Writer`` for ``path``: locally written in place; on gs:// staged and uploaded on ``close()``."""

    def stat(self, path: str) -> Entry | None:
        """The file's ``Entry``, or None when there is none."""

    def exists(self, path: str) -> bool:
        """Whether there is a file at ``path``."""

    def list(self, folder: str) -> Iterator[Entry]:
        """Every file below ``folder``, at any depth, without holding the listing (one page, or one local
        folder, at a time); sorted within each folder, not across them (callers that need one order sort)."""

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

    def for_path(self, path: str) -> Storage:
        """The storage of ``path`` (perhaps of another scheme: a manifest may name both), with this one's
        retry policy and options."""

    def with_retry(self, retry: retries.RetryPolicy) -> Storage:
        """This storage (its options) under another retry policy: e.g. a report that must not wait long."""


def retried(doing: str, what: str, attempt: Callable[[], T], retry: retries.RetryPolicy) -> T:
    """``attempt()`` with transient errors retried (as writes); a failure other than ``Conflict`` is a one-line
    BuildFailed naming ``what`` (``doing``: 'write', 'copy', 'delete')."""
    try:
        return retries.call(attempt, retries.WRITE, what, retry)
    except (BuildFailed, Conflict):
        raise
    except Exception as error:  # every write failure ends the build in one line naming the file
        raise BuildFailed(f'cannot {doing} {what}: {retries.describe(error)}') from error


class BaseStorage:
    """What every implementation holds: its retry policy and the job's options (JSON), which ``for_path`` hands on."""

    remote = False
    reachable_by_cloud_workers = False
    resolves_relative_links = False

    def __init__(self, retry: retries.RetryPolicy, options_json: str | None = None,
                 choose: Callable[[str, retries.RetryPolicy, str | None], Storage] | None = None):
        self.retry = retry
        self.options_json = options_json
        self._choose = choose  # imgrec.storage.storage's chooser, handed in: this module does not import it

    # The sequential writes of a storage whose ``_write_once`` makes one attempt (local, TensorFlow's); the
    # gs:// storage writes in threads instead.
    def _write_once(self, path: str, data: bytes, if_generation: int | None) -> int:
        raise NotImplementedError

    def copy(self, source: str, target: str) -> None:
        raise NotImplementedError

    def write(self, path: str, data: bytes, if_generation: int | None = None) -> int:
        return retried('write', path, lambda: self._write_once(path, data, if_generation), self.retry)

    def write_all(self, files: Mapping[str, bytes]) -> None:
        for path, data in sorted(files.items()):
            self.write(path, data)

    def put_file(self, local_path: str, path: str) -> None:
        self.copy(local_path, path)

    def with_retry(self, retry: retries.RetryPolicy) -> Storage:
        changed = copy.copy(self)
        changed.retry = retry
        return cast(Storage, changed)

    def for_path(self, path: str) -> Storage:
        if self._choose is None:
            raise ValueError('a storage made outside storage_for cannot pick the storage of another path')
        return self._choose(scheme_key(path), self.retry, self.options_json)
