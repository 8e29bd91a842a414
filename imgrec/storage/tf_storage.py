"""URLs of TensorFlow's own file systems (``ram://``, and whatever file systems TensorFlow has loaded):
``storage.Storage`` for the schemes neither the standard library nor the GCS client serves.

Only training reaches it: it reads a version from wherever TensorFlow reads its shards. The build's
workers have no TensorFlow and never get here (their paths are local or gs://). TensorFlow offers no
generation precondition: a conditional write checks the file's modification time, then writes, which
is not atomic, and ``ram://`` keeps no time at all (only create-only writes are checked there); the
leases a training run holds there are as good as that.
"""
from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

from imgrec.storage import retries
from imgrec.storage.byte_ranges import checked_range
from imgrec.storage.storage_interface import Conflict, Entry, Reader, BaseStorage, Versioned, retried


def _tf() -> Any:
    import tensorflow as tf  # pylint: disable=import-outside-toplevel  # only here: the build has none
    return tf


def _parent(path: str) -> str:
    return path.rstrip('/').rpartition('/')[0]


class _Written:
    """A ``storage.Writer`` over a GFile: a block that raises deletes what it wrote."""

    def __init__(self, owner: TensorFlowStorage, path: str):
        self._owner, self.path = owner, path
        self._stream = owner._gfile().GFile(path, 'wb')  # pylint: disable=protected-access

    def write(self, data: bytes) -> None:
        self._stream.write(data)

    def close(self) -> None:
        self._stream.close()

    def __enter__(self) -> _Written:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        self.close()
        if kind is not None:
            self._owner.delete(self.path)


class TensorFlowStorage(BaseStorage):
    """``storage.Storage`` through ``tf.io.gfile``."""

    remote = False  # as far as this layer knows: TensorFlow's reads are its own business

    def _gfile(self) -> Any:
        return _tf().io.gfile

    def _missing(self) -> type[Exception]:
        return _tf().errors.NotFoundError

    def read(self, path: str) -> bytes:
        return retries.call(lambda: self.read_once(path), retries.READ, path, self.retry)

    def read_once(self, path: str) -> bytes:
        try:
            with self._gfile().GFile(path, 'rb') as stream:
                return stream.read()
        except self._missing() as error:
            raise FileNotFoundError(f'{path} not found') from error

    def read_range(self, path: str, start: int, end: int) -> bytes:
        def attempt() -> bytes:
            with self._gfile().GFile(path, 'rb') as stream:
                stream.seek(start)
                return checked_range(path, start, end, stream.read(end - start))

        return retries.call(attempt, retries.READ, path, self.retry)

    def read_versioned(self, path: str) -> Versioned | None:
        found = self.stat(path)
        if found is None:
            return None
        try:
            return Versioned(self.read(path), found.generation)
        except FileNotFoundError:  # deleted meanwhile
            return None

    def open_read(self, path: str) -> Reader:
        return self._gfile().GFile(path, 'rb')

    def _write_once(self, path: str, data: bytes, if_generation: int | None) -> int:
        if if_generation is not None:
            found = self.read_versioned(path)
            if found is not None and found.data == data:
                return found.generation  # an earlier attempt landed
            if (found.generation if found else 0) != if_generation:
                raise Conflict(path)
        gfile = self._gfile()
        gfile.makedirs(_parent(path))
        temporary = f'{path}.tmp-{uuid.uuid4().hex[:12]}'
        with gfile.GFile(temporary, 'wb') as stream:  # renamed over the file: some file systems (ram://)
            stream.write(data)                        # append to a file opened for writing
        gfile.rename(temporary, path, overwrite=True)
        written = self.stat(path)
        return written.generation if written else 0

    def local_path(self, path: str) -> str | None:
        return None

    def open_write(self, path: str) -> _Written:
        self._gfile().makedirs(_parent(path))
        return _Written(self, path)

    def stat(self, path: str) -> Entry | None:
        gfile = self._gfile()
        try:
            found = gfile.stat(path)
        except self._missing():
            return None
        if found.is_directory:
            return None
        # A file's generation is never 0 (which means none): ram:// keeps no modification time.
        return Entry(path, found.length, max(found.mtime_nsec, 1), found.mtime_nsec / 1e9)

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def list(self, folder: str) -> Iterator[Entry]:
        gfile, found = self._gfile(), []
        if not gfile.isdir(folder):
            return iter(())
        for directory, _, names in gfile.walk(folder):
            for name in names:
                entry = self.stat(f"{directory.rstrip('/')}/{name}")
                if entry is not None:
                    found.append(entry)
        return iter(sorted(found, key=lambda entry: entry.path))

    def list_level(self, folder: str) -> Iterator[Entry]:
        gfile = self._gfile()
        try:
            names = gfile.listdir(folder)
        except self._missing():
            return
        for name in sorted(names):
            path = f"{folder.rstrip('/')}/{name.rstrip('/')}"
            if gfile.isdir(path):
                yield Entry(path, 0, 0, 0.0, is_folder=True)
            else:
                entry = self.stat(path)
                if entry is not None:
                    yield entry

    def copy(self, source: str, target: str) -> None:
        def attempt() -> None:
            self._gfile().makedirs(_parent(target))
            self._gfile().copy(source, target, overwrite=True)

        retried('copy', f'{source} to {target}', attempt, self.retry)

    def delete(self, path: str) -> None:
        def attempt() -> None:
            with contextlib.suppress(self._missing()):
                self._gfile().remove(path)

        retried('delete', path, attempt, self.retry)

    def delete_tree(self, folder: str) -> None:
        def attempt() -> None:
            with contextlib.suppress(self._missing()):
                self._gfile().rmtree(folder)

        retried('delete', folder, attempt, self.retry)

    def remove_empty_folder(self, folder: str) -> None:
        pass  # TensorFlow's file systems keep no empty folder worth removing

    def locked(self, folder: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def will_read(self, path: str) -> None:
        pass
