"""Whole-file reads and writes, local or gs://, with transient errors retried (``transforms.retries``).

gs:// objects go through the google-cloud-storage client beneath Beam's GCS file system with the
client's own retries turned off, so one policy (ours: a deadline, counted retries) governs every
attempt; Beam's gcsio would retry for 120 s on its own, uncounted, and then raise ``RetryError``.
Other paths go through Beam's FileSystems.
"""
import contextlib
import os
import uuid

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms import gcs, retries
from transforms.errors import BuildFailed


def read_once(path):
    """One attempt at reading the whole file: errors raise as they are, for the caller to retry or not."""
    if gcs.is_gcs(path):
        return gcs.download(path)
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        return stream.read()


def read_bytes(path, policy=None):
    """The whole file, transient errors retried; raises the permanent error or RetriesExhausted."""
    return retries.call(lambda: read_once(path), retries.READ, path, policy)


def _write_once(path, data):
    if gcs.is_gcs(path):
        gcs.upload(path, data)
        return
    if FileSystems.get_scheme(path) is None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        stream.write(data)


def _write(path, data, policy, attempt):
    try:
        retries.call(attempt, retries.WRITE, path, policy)
    except Exception as error:  # every write failure ends the build in one line naming the file
        raise BuildFailed(f'cannot write {path}: {retries.describe(error)}') from error


def write_bytes(path, data, policy=None):
    """Writes ``data`` to ``path`` (creating local parent folders), retrying transient errors.

    Raises BuildFailed, one line naming the file and the cause, when the write cannot be done.
    """
    _write(path, data, policy, lambda: _write_once(path, data))


def replace(path, data, policy=None):
    """Replaces ``path`` with ``data`` so that readers see the old content or the new, never a part.

    A GCS object upload is atomic already. Elsewhere the data goes to a temporary name unique to this
    writer, then is renamed over ``path`` (atomic on a local disk), so concurrent writers never mix.
    Raises BuildFailed like ``write_bytes``.
    """
    if gcs.is_gcs(path):
        write_bytes(path, data, policy)
        return
    temporary = f'{path}.tmp-{uuid.uuid4().hex}'

    def attempt():
        _write_once(temporary, data)
        if FileSystems.get_scheme(path) is None:
            os.replace(temporary, path)
        else:
            FileSystems.rename([temporary], [path])

    try:
        _write(path, data, policy, attempt)
    finally:
        if FileSystems.get_scheme(path) is None:
            with contextlib.suppress(FileNotFoundError):  # renamed away, or never written
                os.remove(temporary)
