"""Local files through the standard library: ``storage.Storage`` for paths without a scheme.

A file is always written whole: to a temporary file beside it, then renamed over it (create-only: linked
to its name, which fails if the name is taken), so a reader never sees half of one.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
import threading
import uuid
from collections.abc import Iterator

from imgrec.contract.reasons import NOT_A_FILE
from imgrec.storage import retries
from imgrec.storage.byte_ranges import checked_range
from imgrec.storage.storage_interface import Conflict, Entry, Reader, BaseStorage, Versioned, retried


class NotARegularFile(Exception):
    """A local path that is no regular file once symlinks are followed: a FIFO (whose read blocks), a device
    (``/dev/zero`` never ends), a socket, a folder. Refused before it is opened, and permanent: not an
    OSError, so no retry. ``quarantine_reason`` is the reason the input is quarantined for."""
    quarantine_reason = NOT_A_FILE


_KINDS = ((stat.S_ISFIFO, 'a FIFO'), (stat.S_ISSOCK, 'a socket'), (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'), (stat.S_ISDIR, 'a folder'))


def _check_regular(path: str, status: os.stat_result) -> None:
    if not stat.S_ISREG(status.st_mode):
        kind = next((name for test, name in _KINDS if test(status.st_mode)), 'not a regular file')
        raise NotARegularFile(f'{path} is {kind}, not a regular file; not read')


def read_local(path: str) -> bytes:
    """A local file's bytes, read no further than its size when it was opened: a file that grows meanwhile
    is cut there (its stamp changed, so the next refresh reads it again), and a path that is no regular file
    is refused before it is opened (``NotARegularFile``). Symlinks are followed; a loop (ELOOP) or a name too
    long raise their OSError, which ``retries`` holds permanent."""
    _check_regular(path, os.stat(path))
    # O_NONBLOCK: should a FIFO replace the file after the stat, opening it does not wait for a writer.
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        status = os.fstat(descriptor)
        _check_regular(path, status)
        chunks, left = [], status.st_size
        while left > 0:
            chunk = os.read(descriptor, left)
            if not chunk:  # it shrank meanwhile: what there is
                break
            chunks.append(chunk)
            left -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b''.join(chunks)
    finally:
        os.close(descriptor)


def _generation(status: os.stat_result) -> int:
    """Which version of a file this is: a rewrite is a new file (a new inode) renamed over the name."""
    return (status.st_ino << 64) | status.st_mtime_ns


def _entry(path: str, status: os.stat_result) -> Entry:
    return Entry(path, status.st_size, _generation(status), status.st_mtime,
                 local_stamp=(status.st_mtime_ns, status.st_ctime_ns, status.st_ino))


def _named(path: str) -> Entry:
    """The entry of a file, or of a name that cannot be stat'ed (size -1: its read will say why)."""
    try:
        return _entry(path, os.stat(path))
    except OSError:
        return Entry(path, -1, 0, 0.0)


def _make_parent(path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)


_locks = threading.local()


@contextlib.contextmanager
def flock(folder: str) -> Iterator[None]:
    """An exclusive lock on the local ``folder`` (flock on the folder itself: no lock file is left behind).

    Re-entrant in one thread; other threads and processes wait for it.
    """
    held = getattr(_locks, 'folders', None)
    if held is None:
        held = _locks.folders = set()
    key = os.path.realpath(folder)
    if key in held:
        yield
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        held.add(key)
        try:
            yield
        finally:
            held.discard(key)
    finally:
        os.close(descriptor)  # releases the lock


class _InPlace:
    """A ``storage.Writer`` for a local file, written where it will stay (the staging folder that only a
    finished build publishes: a retried bundle writes it again)."""

    def __init__(self, path: str):
        _make_parent(path)
        self._stream = open(path, 'wb')  # pylint: disable=consider-using-with  # closed by close()

    def write(self, data: bytes) -> int:
        return self._stream.write(data)

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> _InPlace:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        self.close()


class LocalStorage(BaseStorage):
    """``storage.Storage`` for local paths."""

    remote = False
    resolves_relative_links = True

    def read(self, path: str) -> bytes:
        return retries.call(lambda: read_local(path), retries.READ, path, self.retry)

    def read_once(self, path: str) -> bytes:
        return read_local(path)

    def read_range(self, path: str, start: int, end: int) -> bytes:
        def attempt() -> bytes:
            with open(path, 'rb') as stream:
                stream.seek(start)
                return checked_range(path, start, end, stream.read(end - start))

        return retries.call(attempt, retries.READ, path, self.retry)

    def read_versioned(self, path: str) -> Versioned | None:
        def attempt() -> Versioned | None:
            try:
                with open(path, 'rb') as stream:
                    return Versioned(stream.read(), _generation(os.fstat(stream.fileno())))
            except (FileNotFoundError, NotADirectoryError):
                return None

        return retries.call(attempt, retries.READ, path, self.retry)

    def open_read(self, path: str) -> Reader:
        return open(path, 'rb')  # pylint: disable=consider-using-with  # the caller closes it

    def _write_once(self, path: str, data: bytes, if_generation: int | None) -> int:
        _make_parent(path)
        temporary = os.path.join(os.path.dirname(os.path.abspath(path)), f'.tmp-{uuid.uuid4().hex[:12]}')
        with open(temporary, 'wb') as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        try:
            if if_generation == 0:
                try:
                    os.link(temporary, path)  # atomic: fails if the name is taken
                except FileExistsError:
                    found = self.read_versioned(path)
                    if found is None or found.data != data:
                        raise Conflict(path) from None
                    return found.generation
            else:
                if if_generation is not None:
                    now = self.stat(path)
                    if now is None or now.generation != if_generation:
                        raise Conflict(path)
                os.replace(temporary, path)
            return _generation(os.stat(path))
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(temporary)

    def local_path(self, path: str) -> str | None:
        return path

    def open_write(self, path: str) -> _InPlace:
        return _InPlace(path)

    def stat(self, path: str) -> Entry | None:
        def attempt() -> Entry | None:
            try:
                status = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                return None
            return None if stat.S_ISDIR(status.st_mode) else _entry(path, status)

        return retries.call(attempt, retries.READ, path, self.retry)

    def exists(self, path: str) -> bool:
        return os.path.isfile(path)

    def list(self, folder: str) -> Iterator[Entry]:
        for directory, folders, names in os.walk(folder):
            folders.sort()
            for name in sorted(names):
                yield _named(os.path.join(directory, name))

    def list_level(self, folder: str) -> Iterator[Entry]:
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            return
        for name in sorted(names):
            path = os.path.join(folder, name)
            if os.path.isdir(path):  # symlinks followed
                yield Entry(path, 0, 0, os.path.getmtime(path), is_folder=True)
            else:
                yield _named(path)

    def copy(self, source: str, target: str) -> None:
        def attempt() -> None:
            _make_parent(target)
            shutil.copyfile(source, target)

        retried('copy', f'{source} to {target}', attempt, self.retry)

    def delete(self, path: str) -> None:
        def attempt() -> None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

        retried('delete', path, attempt, self.retry)

    def delete_tree(self, folder: str) -> None:
        def attempt() -> None:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(folder)

        retried('delete', folder, attempt, self.retry)

    def remove_empty_folder(self, folder: str) -> None:
        with contextlib.suppress(OSError):  # not empty, or not there
            os.rmdir(folder)

    def locked(self, folder: str) -> contextlib.AbstractContextManager[None]:
        return flock(folder)

    def will_read(self, path: str) -> None:
        if not hasattr(os, 'posix_fadvise'):
            return
        try:  # O_NONBLOCK: opening a FIFO must not wait for a writer (the read refuses it, see read_local)
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(descriptor)
