"""ArrayRecord shards (``--formats tfrecord,array_record``): written and read back, local or gs://.

An ArrayRecord shard holds the same serialised Examples as the TFRecord shard of the same name, in the
same order, for readers that index records (Grain, TFDS's ``as_data_source``). The ArrayRecord library
reads and writes local paths only, so a local shard is written in place, and any other (gs://) is written
to a local temporary file and put in place, streamed from that file, on ``close()`` under the storage's
retries (``Storage.put_file``), as a TFRecord shard on gs:// is (``Storage.open_write``).
``array_record`` is imported only when a shard is opened: a build without this format never needs it.

The writer's options, ``WRITER_OPTIONS`` (docs/array-record.md):
- ``group_size:1``: every record is a chunk of its own, so reading one record reads only its bytes. Random
  access is the point of the format; Grain's ArrayRecordDataSource warns about any other group size.
- ``uncompressed``: an Example is almost all JPEG bytes, which do not compress. The library's default,
  zstd, made shards larger and took three times as long to write, and every random read would pay for
  decompressing it.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from imgrec.storage.storage import Storage

WRITER_OPTIONS = 'group_size:1,uncompressed'
# A whole shard read in order (verify-dataset) takes this many records a call.
READ_BATCH = 256
_COPY_BUFFER = 8 * 1024 * 1024


def _module() -> Any:
    from array_record.python import array_record_module  # pylint: disable=import-outside-toplevel
    return array_record_module


class ArrayRecordFile:
    """One ArrayRecord shard being written, record by record; ``close()`` finishes (and uploads) it.

    As a context manager, an exception closes it without finishing: a remote shard is never uploaded; a
    local one keeps its part, in the staging folder that only a finished build publishes.
    """

    def __init__(self, path: str, storage: Storage):
        self.path = path
        self._storage = storage
        self._temporary: str | None = None
        local = storage.local_path(path)
        if local is not None:
            os.makedirs(os.path.dirname(os.path.abspath(local)), exist_ok=True)
        else:
            handle, local = tempfile.mkstemp(prefix='upload-', suffix='.array_record')
            os.close(handle)
            self._temporary = local
        try:
            self._writer = _module().ArrayRecordWriter(local, WRITER_OPTIONS)
        except BaseException:
            self._discard()
            raise
        self.records = 0

    def write(self, record: bytes) -> None:
        self._writer.write(record)
        self.records += 1

    def close(self) -> int:
        """Finishes the shard (a remote one is uploaded, with retries); returns its size in bytes."""
        try:
            self._writer.close()
            size = os.path.getsize(self._temporary or self.path)  # no temporary file: written in place
            if self._temporary is not None:
                self._storage.put_file(self._temporary, self.path)
            return size
        finally:
            self._discard()

    def _discard(self) -> None:
        if self._temporary is not None:
            try:
                os.remove(self._temporary)
            except FileNotFoundError:
                pass
            self._temporary = None

    def __enter__(self) -> ArrayRecordFile:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if kind is None:
            return
        try:
            if self._writer.is_open():  # close() may have failed after finishing it (an upload)
                self._writer.close()
        finally:
            self._discard()


def read_records(path: str, storage: Storage) -> Iterator[bytes]:
    """Yields the records of the ArrayRecord shard at ``path`` in order; a remote one is first copied to
    a local temporary file. Raises ValueError (or the library's error) for a file that is no ArrayRecord."""
    on_disk = storage.local_path(path)
    if on_disk is not None:
        yield from _read_local(on_disk)
        return
    with tempfile.NamedTemporaryFile(prefix='download-', suffix='.array_record') as local:
        with storage.open_read(path) as source:
            shutil.copyfileobj(source, local, _COPY_BUFFER)
        local.flush()
        yield from _read_local(local.name)


def _read_local(path: str) -> Iterator[bytes]:
    reader = _module().ArrayRecordReader(path)
    try:
        count = reader.num_records()
        for start in range(0, count, READ_BATCH):
            yield from reader.read(start, min(start + READ_BATCH, count))
    finally:
        reader.close()


def writer_options(path: str) -> str:
    """The options string the shard at local ``path`` was written with (as the library spells it out)."""
    reader = _module().ArrayRecordReader(path)
    try:
        return reader.writer_options_string()
    finally:
        reader.close()
