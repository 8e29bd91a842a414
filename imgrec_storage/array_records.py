"""ArrayRecord shards (``--formats tfrecord,array_record``): written and read back, local or gs://.

An ArrayRecord shard holds the same serialised Examples as the TFRecord shard of the same name, in the
same order, for readers that index records (Grain, TFDS's ``as_data_source``). The ArrayRecord library
reads and writes local paths only, so a local shard is written in place, and any other (gs://) is written
to a local temporary file and uploaded, streamed from that file, on ``close()`` through the retries every
write takes (``fileio.retried``), as a TFRecord shard on gs:// is (``fileio.StreamedFile``).
``array_record`` is imported only when a shard is opened: a build without this format never needs it.

The writer's options, ``WRITER_OPTIONS`` (docs/array-record.md):
- ``group_size:1``: every record is a chunk of its own, so reading one record reads only its bytes. Random
  access is the point of the format; Grain's ArrayRecordDataSource warns about any other group size.
- ``uncompressed``: an Example is almost all JPEG bytes, which do not compress. The library's default,
  zstd, made shards larger and took three times as long to write, and every random read would pay for
  decompressing it.
"""
import os
import shutil
import tempfile

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from imgrec_storage import fileio, gcs

WRITER_OPTIONS = 'group_size:1,uncompressed'
# A whole shard read in order (verify-dataset) takes this many records a call.
READ_BATCH = 256
_COPY_BUFFER = 8 * 1024 * 1024


def _module():
    from array_record.python import array_record_module  # pylint: disable=import-outside-toplevel
    return array_record_module


def _is_local(path):
    return FileSystems.get_scheme(path) is None


def _upload(local_path, path):
    """One attempt at copying the finished local file to ``path``, streamed from the file."""
    if gcs.is_gcs(path):
        gcs.upload_file(path, local_path)
        return
    with open(local_path, 'rb') as source, FileSystems.create(
            path, mime_type='application/octet-stream', compression_type=CompressionTypes.UNCOMPRESSED) as target:
        shutil.copyfileobj(source, target, _COPY_BUFFER)


class ArrayRecordFile:
    """One ArrayRecord shard being written, record by record; ``close()`` finishes (and uploads) it.

    As a context manager, an exception closes it without finishing: a remote shard is never uploaded; a
    local one keeps its part, in the staging folder that only a finished build publishes.
    """

    def __init__(self, path, policy=None):
        self.path = path
        self._policy = policy
        self._temporary = None
        if _is_local(path):
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            local = path
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

    def write(self, record):
        self._writer.write(record)
        self.records += 1

    def close(self):
        """Finishes the shard (a remote one is uploaded, with retries); returns its size in bytes."""
        try:
            self._writer.close()
            local = self._temporary or self.path
            size = os.path.getsize(local)
            if self._temporary is not None:
                fileio.retried('write', self.path, lambda: _upload(local, self.path), self._policy)
            return size
        finally:
            self._discard()

    def _discard(self):
        if self._temporary is not None:
            try:
                os.remove(self._temporary)
            except FileNotFoundError:
                pass
            self._temporary = None

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        if kind is None:
            return
        try:
            if self._writer.is_open():  # close() may have failed after finishing it (an upload)
                self._writer.close()
        finally:
            self._discard()


def read_records(path):
    """Yields the records of the ArrayRecord shard at ``path`` in order; a remote one is first copied to
    a local temporary file. Raises ValueError (or the library's error) for a file that is no ArrayRecord."""
    if _is_local(path):
        yield from _read_local(path)
        return
    with tempfile.NamedTemporaryFile(prefix='download-', suffix='.array_record') as local:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as source:
            shutil.copyfileobj(source, local, _COPY_BUFFER)
        local.flush()
        yield from _read_local(local.name)


def _read_local(path):
    reader = _module().ArrayRecordReader(path)
    try:
        count = reader.num_records()
        for start in range(0, count, READ_BATCH):
            yield from reader.read(start, min(start + READ_BATCH, count))
    finally:
        reader.close()


def writer_options(path):
    """The options string the shard at local ``path`` was written with (as the library spells it out)."""
    reader = _module().ArrayRecordReader(path)
    try:
        return reader.writer_options_string()
    finally:
        reader.close()
