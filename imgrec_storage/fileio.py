"""Whole-file reads, writes, copies and deletions, local or gs://, with transient errors retried.

gs:// objects go through the google-cloud-storage client beneath Beam's GCS file system with the
client's own retries turned off, so one policy (ours: a deadline, counted retries) governs every
attempt; Beam's gcsio would retry for 120 s on its own, uncounted, and then raise ``RetryError``.
Other paths go through Beam's FileSystems.
"""
import concurrent.futures
import os
import shutil
import stat
import tempfile

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from google.api_core import exceptions as api_exceptions

from contract.reasons import NOT_A_FILE
from imgrec_console.errors import BuildFailed
from imgrec_storage import gcs, retries


class NotARegularFile(Exception):
    """A local path that is no regular file once symlinks are followed: a FIFO (whose read blocks), a device
    (``/dev/zero`` never ends), a socket, a folder. Refused before it is opened, and permanent: not an
    OSError, so no retry. ``quarantine_reason`` is the reason the input is quarantined for."""
    quarantine_reason = NOT_A_FILE


_KINDS = ((stat.S_ISFIFO, 'a FIFO'), (stat.S_ISSOCK, 'a socket'), (stat.S_ISCHR, 'a character device'),
          (stat.S_ISBLK, 'a block device'), (stat.S_ISDIR, 'a folder'))


def _check_regular(path, status):
    if not stat.S_ISREG(status.st_mode):
        kind = next((name for test, name in _KINDS if test(status.st_mode)), 'not a regular file')
        raise NotARegularFile(f'{path} is {kind}, not a regular file; not read')


def read_local(path):
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


def read_once(path):
    """One attempt at reading the whole file: errors raise as they are, for the caller to retry or not.

    A local file is read as ``read_local`` says: bounded by its size, and only if it is a regular file.
    """
    if gcs.is_gcs(path):
        return gcs.download(path)
    if FileSystems.get_scheme(path) is None:
        return read_local(path)
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        return stream.read()


def will_read(path):
    """Tells the kernel that a local file is about to be read, so its pages come in meanwhile. A hint:
    a file that cannot be opened is left to the read to report."""
    if FileSystems.get_scheme(path) is not None or not hasattr(os, 'posix_fadvise'):  # local files only
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


# Files written at once by ``write_all`` to a remote file system: each write there is a round trip.
WRITERS = 8


def write_all(files, policy=None):
    """Writes every {path: data} of ``files``, as ``write_bytes`` does, several at a time when they are
    remote (a gs:// write waits a round trip; locally they are written one after the other).

    Raises the BuildFailed of the first file, in path order, that could not be written.
    """
    items = sorted(files.items())
    if all(FileSystems.get_scheme(path) is None for path, _ in items):
        for path, data in items:
            write_bytes(path, data, policy)
        return
    with concurrent.futures.ThreadPoolExecutor(min(WRITERS, len(items))) as pool:
        retries.counted_map(pool, lambda item: write_bytes(item[0], item[1], policy), items)


# How much of a gs:// object ``ObjectReader`` asks for at a time.
READ_CHUNK = 8 * 1024 * 1024


class ObjectReader:
    """A gs:// object read front to back as a stream (``read(n)``), for readers that go through a whole shard:
    its size from one metadata request, then ranged reads of ``chunk`` bytes, the next already on its way
    while the current one is used. Beam's reader costs a bucket look-up, a metadata request and a ranged
    read more for each object, one after the other. Transient errors are retried under ``policy``; an
    object that is not there raises FileNotFoundError.
    """

    def __init__(self, url, policy=None, chunk=READ_CHUNK):
        found = gcs.stat(None, url, policy)
        if found is None:
            raise FileNotFoundError(f'{url} not found')
        self._url, self._policy, self._chunk = url, policy, chunk
        self._size, self._next = found[0], 0
        self._buffer, self._offset = b'', 0
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='object-read')
        self._pending = self._fetch_next()

    def _fetch_next(self):
        if self._next >= self._size:
            return None
        start, end = self._next, min(self._size, self._next + self._chunk)
        self._next = end
        return retries.counted_submit(self._pool, lambda: retries.call(
            lambda: gcs.download_range(self._url, start, end), retries.READ, self._url, self._policy))

    def read(self, size=-1):
        """Up to ``size`` bytes (all that is left for a negative ``size``); b'' at the end."""
        parts = []
        while size != 0:
            if self._offset >= len(self._buffer):
                if self._pending is None:
                    break
                self._buffer, self._offset = self._pending(), 0
                self._pending = self._fetch_next()
            part = self._buffer[self._offset:] if size < 0 else self._buffer[self._offset:self._offset + size]
            self._offset += len(part)
            parts.append(part)
            if size > 0:
                size -= len(part)
        return b''.join(parts)

    def close(self):
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


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
