"""Google Cloud Storage calls that Beam's FileSystems does not offer.

Listing one level at a time (a ``/`` delimiter) and paging lazily keep a listing of millions of objects
out of memory; Beam's ``FileSystems.match`` returns a whole listing as one list. The client is made by
the function Beam's GCS file system makes its own with (``gcsio.create_storage_client``, public), from
the job's options, so it authenticates as Beam does: Application Default Credentials (and
``--impersonate_service_account``) on Google Cloud. Against an emulator named by
``STORAGE_EMULATOR_HOST`` it asks that function for an anonymous client, so it never searches for
credentials. (Beam's own GCS clients, beneath FileSystems, still do: ``pipelines.local.emulator``
makes them skip the search for a local build.)

Object reads, writes, copies and deletions (``download``, ``upload``, ``copy``, ``delete``) are single
attempts with the client's own retries off: ``imgrec_storage.fileio`` retries them under one policy
(``imgrec_storage.retries``). Listings retry each page under that policy. Every request is counted
by kind as it is sent (``imgrec_storage.request_counts``); a listing page the client retried counts once.
"""
import functools
import os

from apache_beam.io.gcp import gcsio
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.options.value_provider import RuntimeValueProvider
from google.api_core import exceptions

from contract import counters
from imgrec_storage import request_counts, retries
from imgrec_storage.byte_ranges import checked_range

EMULATOR_HOST = 'STORAGE_EMULATOR_HOST'
PAGE_SIZE = 1000
PREFIX, OBJECT = 'prefix', 'object'


def is_gcs(path):
    return path.startswith('gs://')


def client(options=None):
    """A google-cloud-storage client made as Beam makes its own, from ``options`` (a dict or PipelineOptions);
    anonymous against an emulator."""
    if isinstance(options, dict):
        options = PipelineOptions.from_dictionary(options)
    return gcsio.create_storage_client(options or PipelineOptions([]),
                                       use_credentials=not os.environ.get(EMULATOR_HOST))


@functools.lru_cache(maxsize=None)
def _object_client(emulator_host):
    """The client for single-object calls in this process, one per emulator (or none).

    Built from the options Beam's GCS file system would use here: in a worker, the job's options, which
    Beam's worker harness hands to ``RuntimeValueProvider``; elsewhere, this process's command line, as
    Beam's file system reads it when no pipeline gave it options.
    """
    runtime = RuntimeValueProvider.runtime_options
    options = PipelineOptions.from_dictionary(runtime) if runtime else PipelineOptions()
    return gcsio.create_storage_client(options, use_credentials=not emulator_host)


def _blob(url):
    bucket, name = split_url(url)
    return _object_client(os.environ.get(EMULATOR_HOST)).bucket(bucket).blob(name)


def download(url):
    """The bytes of object ``url``, in one attempt (checksummed by the client)."""
    request_counts.count(counters.OBJECT_READS)
    data = _blob(url).download_as_bytes(retry=None, timeout=retries.ATTEMPT_TIMEOUT_S)
    request_counts.count(counters.BYTES_DOWNLOADED, len(data))
    return data


def upload(url, data):
    """Writes ``data`` as object ``url``, in one attempt; the object appears whole or not at all."""
    request_counts.uploaded(len(data))
    _blob(url).upload_from_string(data, content_type='application/octet-stream', retry=None,
                                  timeout=retries.ATTEMPT_TIMEOUT_S)


def download_with_generation(url):
    """(bytes, generation) of object ``url``, or (None, 0) when there is none: one attempt."""
    bucket, name = split_url(url)
    request_counts.count(counters.METADATA_READS)
    blob = _object_client(os.environ.get(EMULATOR_HOST)).bucket(bucket).get_blob(
        name, retry=None, timeout=retries.ATTEMPT_TIMEOUT_S)
    if blob is None:
        return None, 0
    generation = blob.generation  # before the download, which may reset it from the response's headers
    request_counts.count(counters.OBJECT_READS)
    data = blob.download_as_bytes(retry=None, timeout=retries.ATTEMPT_TIMEOUT_S, if_generation_match=generation)
    request_counts.count(counters.BYTES_DOWNLOADED, len(data))
    return data, generation


def upload_if_generation(url, data, generation):
    """Writes object ``url`` only if its generation is still ``generation`` (0: only if there is none).

    Raises google.api_core.exceptions.PreconditionFailed otherwise: one attempt. Returns the new generation.
    """
    request_counts.uploaded(len(data))
    blob = _blob(url)
    blob.upload_from_string(data, content_type='text/plain', if_generation_match=generation, retry=None,
                            timeout=retries.ATTEMPT_TIMEOUT_S)
    return blob.generation


def upload_file(url, local_path):
    """Uploads the local file as object ``url``, in one attempt; the object appears whole or not at all."""
    request_counts.uploaded(os.path.getsize(local_path))
    _blob(url).upload_from_filename(local_path, content_type='application/octet-stream', retry=None,
                                    timeout=retries.ATTEMPT_TIMEOUT_S)


def download_range(url, start, end):
    """Bytes ``start`` to ``end`` (exclusive) of object ``url``: one ranged GET, in one attempt."""
    request_counts.count(counters.RANGED_READS)
    data = _blob(url).download_as_bytes(start=start, end=end - 1, checksum=None, retry=None,
                                        timeout=retries.ATTEMPT_TIMEOUT_S)
    request_counts.count(counters.BYTES_DOWNLOADED, len(data))
    return checked_range(url, start, end, data)


def copy(source_url, target_url):
    """Copies an object within GCS (no data through this machine), in one attempt of one or more rewrite calls."""
    source, target = _blob(source_url), _blob(target_url)
    token = None
    while True:
        request_counts.count(counters.COPIES)
        token, _, _ = target.rewrite(source, token=token, retry=None, timeout=retries.ATTEMPT_TIMEOUT_S)
        if token is None:
            return


def delete(url):
    """Deletes object ``url`` in one attempt; raises NotFound when there is none."""
    request_counts.count(counters.DELETES)
    _blob(url).delete(retry=None, timeout=retries.ATTEMPT_TIMEOUT_S)


def split_url(url):
    """'gs://bucket/some/name' -> ('bucket', 'some/name'); the name may be empty."""
    return gcsio.parse_gcs_path(url, object_optional=True)


def as_folder(url):
    """``url`` with one trailing '/', so a listing of ``gs://b/cats`` does not also match ``gs://b/catsup``."""
    return url.rstrip('/') + '/'


def iter_level(storage_client, url, policy=None):
    """Yields (PREFIX, url) for each sub-folder and (OBJECT, url) for each object directly below ``url``.

    One page of the listing is in memory at a time, each page retried under ``policy``. Folder
    placeholder objects (names ending in '/') are skipped: they hold no data.
    """
    bucket, _ = split_url(as_folder(url))
    for page in _pages(storage_client, url, policy, delimiter='/'):
        for blob in page:
            if not blob.name.endswith('/'):
                yield OBJECT, f'gs://{bucket}/{blob.name}'
        for sub in page.prefixes:
            yield PREFIX, f'gs://{bucket}/{sub}'


def iter_objects(storage_client, url, policy=None):
    """Yields (url, size, generation) of every object below ``url``, at any depth, one page in memory at a
    time (``storage_client`` None: this process's client for single-object calls)."""
    storage_client = storage_client or _object_client(os.environ.get(EMULATOR_HOST))
    bucket, _ = split_url(as_folder(url))
    for page in _pages(storage_client, url, policy):
        for blob in page:
            if not blob.name.endswith('/'):
                yield f'gs://{bucket}/{blob.name}', blob.size, blob.generation


def _pages(storage_client, url, policy, delimiter=None):
    """The pages of the listing below the folder ``url``, each request retried under ``policy`` and counted."""
    bucket, prefix = split_url(as_folder(url))
    blobs = storage_client.list_blobs(bucket, prefix=prefix, delimiter=delimiter, page_size=PAGE_SIZE,
                                      retry=retries.api_retry_for(retries.LIST, policy),
                                      timeout=retries.ATTEMPT_TIMEOUT_S)
    for page in blobs.pages:
        request_counts.count(counters.LISTS)
        yield page


def stat(storage_client, url, policy=None):
    """(size, generation) of object ``url``, None when there is none: a metadata request, transient errors
    retried under ``policy`` (``storage_client`` None: this process's client for single-object calls)."""
    storage_client = storage_client or _object_client(os.environ.get(EMULATOR_HOST))
    bucket, name = split_url(url)

    def attempt():
        request_counts.count(counters.METADATA_READS)
        return storage_client.bucket(bucket).get_blob(name, retry=None, timeout=retries.ATTEMPT_TIMEOUT_S)

    blob = retries.call(attempt, retries.READ, url, policy)
    return None if blob is None else (blob.size, blob.generation)


def check_readable(storage_client, url):
    """Raises ``exceptions.GoogleAPICallError`` unless the objects under ``url`` can be listed."""
    bucket, prefix = split_url(as_folder(url))
    request_counts.count(counters.LISTS)
    for _ in storage_client.list_blobs(bucket, prefix=prefix, max_results=1):
        break


def describe_error(url, error):
    """One line naming what went wrong with ``url``, for a GCS API error."""
    bucket, _ = split_url(as_folder(url))
    if isinstance(error, exceptions.NotFound):
        return f'bucket gs://{bucket} not found (for {url})'
    if isinstance(error, exceptions.Forbidden):
        return (f'permission denied on {url}: the account running the job needs Storage Object Admin '
                f'(or Storage Object Viewer to read) on gs://{bucket}')
    return f'cannot access {url}: {retries.describe(error)}'

