"""gs:// objects through google-cloud-storage: ``storage.Storage`` for gs:// URLs.

Each request is one attempt with the client's own retries off, so the storage object's policy governs
every attempt and counts its retries; every request is counted by kind as it is sent
(``imgrec.storage.request_counts``). Listings go one page at a time (a listing page the client retried
counts once). The client is made once per process for each set of options and emulator: with the job's
options, as Beam makes its own (``gcsio.create_storage_client``: Application Default Credentials, and
``--impersonate_service_account``); without, by google-cloud-storage itself, from Application Default
Credentials, so a process that never imports Beam (training) can read gs:// too. Against an emulator
named by ``STORAGE_EMULATOR_HOST`` it is anonymous: it never searches for credentials.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from google.api_core import exceptions as api_exceptions
from google.cloud import storage as gcs_client

from imgrec.contract import counters
from imgrec.storage import request_counts, retries
from imgrec.storage.byte_ranges import checked_range
from imgrec.storage.paths import GCS_SCHEME
from imgrec.storage.storage_interface import Conflict, Entry, BaseStorage, Versioned, retried

EMULATOR_HOST = 'STORAGE_EMULATOR_HOST'
PAGE_SIZE = 1000
# Objects written, copied or deleted at once by ``write_all`` and ``delete_tree``: each is a round trip.
THREADS = 8
# How much of an object ``open_read`` asks for at a time.
READ_CHUNK = 8 * 1024 * 1024
_TIMEOUT = retries.ATTEMPT_TIMEOUT_S


def split_url(url: str) -> tuple[str, str]:
    """'gs://bucket/some/name' -> ('bucket', 'some/name'); the name may be empty."""
    if not url.startswith(GCS_SCHEME):
        raise ValueError(f'{url} is not a gs:// URL')
    bucket, _, name = url[len(GCS_SCHEME):].partition('/')
    if not bucket:
        raise ValueError(f'{url} names no bucket')
    return bucket, name


def as_folder(url: str) -> str:
    """``url`` with one trailing '/', so a listing of ``gs://b/cats`` does not also match ``gs://b/catsup``."""
    return url.rstrip('/') + '/'


@functools.lru_cache(maxsize=None)
def _client(emulator_host: str | None, options_json: str | None) -> gcs_client.Client:
    if emulator_host:
        return gcs_client.Client.create_anonymous_client()
    if options_json is None:
        return gcs_client.Client()
    # Beam only when the job's options are handed in, which only Beam code does.
    from apache_beam.io.gcp import gcsio  # pylint: disable=import-outside-toplevel
    from apache_beam.options.pipeline_options import PipelineOptions  # pylint: disable=import-outside-toplevel
    return gcsio.create_storage_client(PipelineOptions.from_dictionary(json.loads(options_json)))


class ObjectReader:
    """An object read front to back as a stream (``read(n)``): its size from one metadata request, then
    ranged reads of ``chunk`` bytes, the next already on its way while the current one is used. Beam's
    reader costs a bucket look-up, a metadata request and a ranged read more for each object, one after
    the other."""

    def __init__(self, storage: GcsStorage, url: str, chunk: int = READ_CHUNK):
        found = storage.stat(url)
        if found is None:
            raise FileNotFoundError(f'{url} not found')
        self._storage, self._url, self._chunk = storage, url, chunk
        self._size, self._next = found.size, 0
        self._buffer, self._offset = b'', 0
        self._position = 0  # bytes handed out so far
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='object-read')
        self._pending = self._fetch_next()

    def _fetch_next(self) -> Callable[[], bytes] | None:
        if self._next >= self._size:
            return None
        start, end = self._next, min(self._size, self._next + self._chunk)
        self._next = end
        return retries.counted_submit(self._pool, self._storage.read_range, self._url, start, end)

    def _fill(self) -> bool:
        """Makes the buffer hold unread bytes; False at the end."""
        if self._offset < len(self._buffer):
            return True
        if self._pending is None:
            return False
        self._buffer, self._offset = self._pending(), 0
        self._pending = self._fetch_next()
        return True

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all that is left for a negative ``size``); b'' at the end."""
        parts = []
        while size != 0 and self._fill():
            part = self._buffer[self._offset:] if size < 0 else self._buffer[self._offset:self._offset + size]
            self._offset += len(part)
            self._position += len(part)
            parts.append(part)
            if size > 0:
                size -= len(part)
        return b''.join(parts)

    def readline(self) -> bytes:
        """The next line, its b'\\n' included; b'' at the end."""
        parts = []
        while self._fill():
            end = self._buffer.find(b'\n', self._offset)
            stop = len(self._buffer) if end < 0 else end + 1
            parts.append(self._buffer[self._offset:stop])
            self._position += stop - self._offset
            self._offset = stop
            if end >= 0:
                break
        return b''.join(parts)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b'')

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> ObjectReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _StagedUpload:
    """A ``storage.Writer`` for an object: staged in a local temporary file, uploaded whole, with retries,
    on ``close()``; never uploaded when the block raised."""

    def __init__(self, storage: GcsStorage, url: str):
        self._storage, self.path = storage, url
        # pylint: disable-next=consider-using-with  # closed by close()
        self._stream = tempfile.NamedTemporaryFile(prefix='upload-', suffix='.part')

    def write(self, data: bytes) -> int:
        return self._stream.write(data)

    def close(self) -> None:
        try:
            self._stream.flush()
            self._storage.put_file(self._stream.name, self.path)
        finally:
            self._stream.close()

    def __enter__(self) -> _StagedUpload:
        return self

    def __exit__(self, kind: object, error: object, trace: object) -> None:
        if kind is None:
            self.close()
        else:
            self._stream.close()


class GcsStorage(BaseStorage):
    """``storage.Storage`` for gs:// URLs. ``options_json``: the job's pipeline options (None: this
    process's Application Default Credentials)."""

    remote = True
    reachable_by_cloud_workers = True

    @property
    def client(self) -> gcs_client.Client:
        """This process's client for these options (one per process, made on first use)."""
        return _client(os.environ.get(EMULATOR_HOST), self.options_json)

    def _blob(self, url: str) -> gcs_client.Blob:
        bucket, name = split_url(url)
        return self.client.bucket(bucket).blob(name)

    def _read(self, what: str, attempt: Callable[[], Any]) -> Any:
        return retries.call(attempt, retries.READ, what, self.retry)

    # -- reads

    def read(self, path: str) -> bytes:
        return self._read(path, lambda: self.read_once(path))

    def read_once(self, path: str) -> bytes:
        request_counts.count(counters.OBJECT_READS)
        data = self._blob(path).download_as_bytes(retry=None, timeout=_TIMEOUT)  # checksummed by the client
        request_counts.count(counters.BYTES_DOWNLOADED, len(data))
        return data

    def read_range(self, path: str, start: int, end: int) -> bytes:
        def attempt() -> bytes:
            request_counts.count(counters.RANGED_READS)
            data = self._blob(path).download_as_bytes(start=start, end=end - 1, checksum=None, retry=None,
                                                      timeout=_TIMEOUT)
            request_counts.count(counters.BYTES_DOWNLOADED, len(data))
            return checked_range(path, start, end, data)

        return self._read(path, attempt)

    def _get_blob(self, url: str) -> gcs_client.Blob | None:
        bucket, name = split_url(url)
        request_counts.count(counters.METADATA_READS)
        return self.client.bucket(bucket).get_blob(name, retry=None, timeout=_TIMEOUT)

    def read_versioned(self, path: str) -> Versioned | None:
        def attempt() -> Versioned | None:
            blob = self._get_blob(path)
            if blob is None:
                return None
            generation = blob.generation  # before the download, which may reset it from the response's headers
            request_counts.count(counters.OBJECT_READS)
            data = blob.download_as_bytes(retry=None, timeout=_TIMEOUT, if_generation_match=generation)
            request_counts.count(counters.BYTES_DOWNLOADED, len(data))
            return Versioned(data, generation)

        return self._read(path, attempt)

    def open_read(self, path: str) -> ObjectReader:
        return ObjectReader(self, path)

    def stat(self, path: str) -> Entry | None:
        blob = self._read(path, lambda: self._get_blob(path))
        return None if blob is None else _entry(f'{GCS_SCHEME}{blob.bucket.name}/{blob.name}', blob)

    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    # -- writes

    def _upload(self, path: str, data: bytes, if_generation: int | None) -> int:
        request_counts.uploaded(len(data))
        blob = self._blob(path)
        try:
            blob.upload_from_string(data, content_type='text/plain', if_generation_match=if_generation,
                                    retry=None, timeout=_TIMEOUT)
        except api_exceptions.PreconditionFailed:
            found = self.read_versioned(path)
            if found is None or found.data != data:
                raise Conflict(path) from None
            return found.generation  # an earlier attempt of ours landed, and its answer was lost
        return blob.generation

    def write(self, path: str, data: bytes, if_generation: int | None = None) -> int:
        return retried('write', path, lambda: self._upload(path, data, if_generation), self.retry)

    def write_all(self, files: Mapping[str, bytes]) -> None:
        items = sorted(files.items())
        if not items:
            return
        with concurrent.futures.ThreadPoolExecutor(min(THREADS, len(items))) as pool:
            retries.counted_map(pool, lambda item: self.write(*item), items)

    def put_file(self, local_path: str, path: str) -> None:
        def attempt() -> None:  # the object appears whole or not at all
            request_counts.uploaded(os.path.getsize(local_path))
            self._blob(path).upload_from_filename(local_path, content_type='application/octet-stream', retry=None,
                                                  timeout=_TIMEOUT)

        retried('write', path, attempt, self.retry)

    def local_path(self, path: str) -> str | None:
        return None

    def open_write(self, path: str) -> _StagedUpload:
        return _StagedUpload(self, path)

    def copy(self, source: str, target: str) -> None:
        def attempt() -> None:
            source_blob, target_blob = self._blob(source), self._blob(target)
            token = None
            while True:  # a large object takes several rewrite calls
                request_counts.count(counters.COPIES)
                token, _, _ = target_blob.rewrite(source_blob, token=token, retry=None, timeout=_TIMEOUT)
                if token is None:
                    return

        retried('copy', f'{source} to {target}', attempt, self.retry)

    def delete(self, path: str) -> None:
        def attempt() -> None:
            request_counts.count(counters.DELETES)
            try:
                self._blob(path).delete(retry=None, timeout=_TIMEOUT)
            except api_exceptions.NotFound:  # gone, perhaps by an attempt whose answer was lost
                pass

        retried('delete', path, attempt, self.retry)

    def delete_tree(self, folder: str) -> None:
        paths = [entry.path for entry in self.list(folder)]
        if paths:
            with concurrent.futures.ThreadPoolExecutor(min(THREADS, len(paths))) as pool:
                retries.counted_map(pool, self.delete, paths)

    # -- listings

    def pages(self, folder: str, delimiter: str | None = None) -> Iterator[Any]:
        """The pages of the listing below ``folder``, each request retried under ``retry`` and counted."""
        bucket, prefix = split_url(as_folder(folder))
        blobs = self.client.list_blobs(bucket, prefix=prefix, delimiter=delimiter, page_size=PAGE_SIZE,
                                       retry=retries.api_retry_for(retries.LIST, self.retry), timeout=_TIMEOUT)
        for page in blobs.pages:
            request_counts.count(counters.LISTS)
            yield page

    def list(self, folder: str) -> Iterator[Entry]:
        bucket, _ = split_url(as_folder(folder))
        for page in self.pages(folder):
            for blob in page:
                if not blob.name.endswith('/'):  # a folder placeholder holds no data
                    yield _entry(f'{GCS_SCHEME}{bucket}/{blob.name}', blob)

    def list_level(self, folder: str) -> Iterator[Entry]:
        bucket, _ = split_url(as_folder(folder))
        for page in self.pages(folder, delimiter='/'):
            for blob in page:
                if not blob.name.endswith('/'):
                    yield _entry(f'{GCS_SCHEME}{bucket}/{blob.name}', blob)
            for sub in page.prefixes:
                yield Entry(f'{GCS_SCHEME}{bucket}/{sub.rstrip("/")}', 0, 0, 0.0, is_folder=True)

    # -- the rest

    def remove_empty_folder(self, folder: str) -> None:
        pass  # object stores have no folders

    def locked(self, folder: str) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def will_read(self, path: str) -> None:
        pass


def _entry(url: str, blob: gcs_client.Blob) -> Entry:
    return Entry(url, blob.size or 0, blob.generation or 0, blob.updated.timestamp() if blob.updated else 0.0)


def describe_error(url: str, error: Exception) -> str:
    """One line naming what went wrong with ``url``, for a GCS API error."""
    bucket, _ = split_url(as_folder(url))
    if isinstance(error, api_exceptions.NotFound):
        return f'bucket gs://{bucket} not found (for {url})'
    if isinstance(error, api_exceptions.Forbidden):
        return (f'permission denied on {url}: the account running the job needs Storage Object Admin '
                f'(or Storage Object Viewer to read) on gs://{bucket}')
    return f'cannot access {url}: {retries.describe(error)}'
