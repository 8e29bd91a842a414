"""Whole-file reads, writes, copies and deletions, local or gs://, with transient errors retried.

gs:// objects go through the google-cloud-storage client beneath Beam's GCS file system with the
client's own retries turned off, so one policy (ours: a deadline, counted retries) governs every
attempt; Beam's gcsio would retry for 120 s on its own, uncounted, and then raise ``RetryError``.
Other paths go through Beam's FileSystems.
"""
import os
import shutil
import tempfile

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from google.api_core import exceptions as api_exceptions

from imgrec_console.errors import BuildFailed
from imgrec_storage import gcs, retries


def read_once(path):
    """One attempt at reading the whole file: errors raise as they are, for the caller to retry or not."""
    if gcs.is_gcs(path):
        return gcs.download(path)
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        return stream.read()


def will_read(path):
    """Tells the kernel that a local file is about to be read, so its pages come in meanwhile. A hint:
    a file that cannot be opened is left to the read to report."""
    if FileSystems.get_scheme(path) is not None or not hasattr(os, 'posix_fadvise'):  # local files only
        return
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
    finally:
        os.close(descriptor)


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


def retried(doing, what, attempt, policy):
    """``attempt()`` with transient errors retried; any failure is a one-line BuildFailed naming ``what``."""
    try:
        retries.call(attempt, retries.WRITE, what, policy)
    except BuildFailed:
        raise
    except Exception as error:  # every write failure ends the build in one line naming the file
        raise BuildFailed(f'cannot {doing} {what}: {retries.describe(error)}') from error


def write_bytes(path, data, policy=None):
    """Writes ``data`` to ``path`` (creating local parent folders), retrying transient errors.

    Raises BuildFailed, one line naming the file and the cause, when the write cannot be done.
    """
    retried('write', path, lambda: _write_once(path, data), policy)


class StreamedFile:
    """A file written piece by piece without holding it: a local file is written in place; a gs://
    object is staged in a local temporary file and uploaded whole, with retries, on ``close()``.

    As a context manager, an exception closes the file without finishing it: a gs:// object is never
    uploaded; a local file keeps its part, in the staging folder that only a finished build publishes (a
    retried bundle writes it again).
    """

    def __init__(self, path, policy=None):
        self.path = path
        self._policy = policy
        if gcs.is_gcs(path):
            self._stream = tempfile.NamedTemporaryFile(prefix='upload-', suffix='.part')
        else:
            if FileSystems.get_scheme(path) is None:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._stream = FileSystems.create(path, mime_type='application/octet-stream',
                                              compression_type=CompressionTypes.UNCOMPRESSED)

    def write(self, data):
        self._stream.write(data)

    def close(self):
        try:
            if gcs.is_gcs(self.path):
                self._stream.flush()
                retried('write', self.path, lambda: gcs.upload_file(self.path, self._stream.name), self._policy)
        finally:
            self._stream.close()

    def __enter__(self):
        return self

    def __exit__(self, kind, error, trace):
        if kind is None:
            self.close()
        else:
            self._stream.close()


def copy(source, target, policy=None):
    """Copies ``source`` to ``target`` (on GCS, server-side), retrying transient errors; BuildFailed if it cannot."""
    def attempt():
        if gcs.is_gcs(source) and gcs.is_gcs(target):
            gcs.copy(source, target)
        elif FileSystems.get_scheme(source) is None and FileSystems.get_scheme(target) is None:
            os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
            shutil.copyfile(source, target)
        else:
            FileSystems.copy([source], [target])

    retried('copy', f'{source} to {target}', attempt, policy)


def delete(path, policy=None):
    """Deletes file ``path`` if it exists, retrying transient errors; BuildFailed if it cannot.

    A retried deletion may find the file already gone (the first attempt worked, its answer was lost): done.
    """
    def attempt():
        try:
            if gcs.is_gcs(path):
                gcs.delete(path)
            elif FileSystems.get_scheme(path) is None:
                os.remove(path)
            else:
                FileSystems.delete([path])
        except (api_exceptions.NotFound, FileNotFoundError):
            pass

    retried('delete', path, attempt, policy)
