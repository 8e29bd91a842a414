"""Google Cloud Storage calls that Beam's FileSystems does not offer, and anonymous emulator access.

Listing one level at a time (a ``/`` delimiter) and paging lazily keep a listing of millions of objects
out of memory; Beam's ``FileSystems.match`` returns a whole listing as one list. The client is the one
beneath Beam's GCS file system (``gcsio.create_storage_client``), built from the job's options, so it
authenticates as Beam does: Application Default Credentials on Google Cloud, anonymously against an
emulator named by ``STORAGE_EMULATOR_HOST``.

Object reads, writes, copies and deletions (``download``, ``upload``, ``copy``, ``delete``) are single
attempts with the client's own retries off: ``imgrec_storage.fileio`` retries them under one policy
(``imgrec_storage.retries``). Listings retry each page under that policy.

Beam imports every ``--beam_plugins`` module first thing in a worker process, and
``pipelines.build_dataset`` lists this one when an emulator is set, so the import below prepares the
workers too.
"""
import functools
import os

from apache_beam.internal.gcp import auth
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.gcp import gcsio
from apache_beam.options.pipeline_options import PipelineOptions
from google.api_core import exceptions

from imgrec_console.errors import checked_range
from imgrec_storage import retries

EMULATOR_HOST = 'STORAGE_EMULATOR_HOST'
PAGE_SIZE = 1000
PREFIX, OBJECT = 'prefix', 'object'


def is_gcs(path):
    return path.startswith('gs://')


def connect_anonymously_to_emulator():
    """With ``STORAGE_EMULATOR_HOST`` set, makes Beam's GCS clients anonymous in this process at once.

    Beam looks for Application Default Credentials with four back-off retries (about 20 s a process)
    before it falls back to an anonymous client, which is all an emulator needs: record "no
    credentials" in Beam's per-process credential cache so it skips the search. Without an emulator
    this does nothing, and Beam uses Application Default Credentials as usual.
    """
    if not os.environ.get(EMULATOR_HOST):
        return
    with auth._Credentials._credentials_lock:  # pylint: disable=protected-access
        auth._Credentials._credentials = None  # pylint: disable=protected-access
        auth._Credentials._credentials_init = True  # pylint: disable=protected-access


def client(options=None):
    """A google-cloud-storage client made as Beam makes its own, from ``options`` (a dict or PipelineOptions)."""
    if isinstance(options, dict):
        options = PipelineOptions.from_dictionary(options)
    return gcsio.create_storage_client(options or PipelineOptions([]))


@functools.lru_cache(maxsize=None)
def _object_client(emulator_host):  # pylint: disable=unused-argument  (a new emulator, a new client)
    """The client of Beam's GCS file system in this process, built from the job's options."""
    return FileSystems.get_filesystem('gs://')._gcsIO().client  # pylint: disable=protected-access


def _blob(url):
    bucket, name = split_url(url)
    return _object_client(os.environ.get(EMULATOR_HOST)).bucket(bucket).blob(name)


def download(url):
    """The bytes of object ``url``, in one attempt (checksummed by the client)."""
    return _blob(url).download_as_bytes(retry=None, timeout=retries.ATTEMPT_TIMEOUT_S)


def upload(url, data):
    """Writes ``data`` as object ``url``, in one attempt; the object appears whole or not at all."""
    _blob(url).upload_from_string(data, content_type='application/octet-stream', retry=None,
                                  timeout=retries.ATTEMPT_TIMEOUT_S)


def download_with_generation(url):
    """(bytes, generation) of object ``url``, or (None, 0) when there is none: one attempt."""
    bucket, name = split_url(url)
    blob = _object_client(os.environ.get(EMULATOR_HOST)).bucket(bucket).get_blob(
        name, retry=None, timeout=retries.ATTEMPT_TIMEOUT_S)
    if blob is None:
        return None, 0
    generation = blob.generation  # before the download, which may reset it from the response's headers
    return blob.download_as_bytes(retry=None, timeout=retries.ATTEMPT_TIMEOUT_S,
                                  if_generation_match=generation), generation


def upload_if_generation(url, data, generation):
    """Writes object ``url`` only if its generation is still ``generation`` (0: only if there is none).

    Raises google.api_core.exceptions.PreconditionFailed otherwise: one attempt.
    """
    _blob(url).upload_from_string(data, content_type='text/plain', if_generation_match=generation, retry=None,
                                  timeout=retries.ATTEMPT_TIMEOUT_S)


def upload_file(url, local_path):
    """Uploads the local file as object ``url``, in one attempt; the object appears whole or not at all."""
    _blob(url).upload_from_filename(local_path, content_type='application/octet-stream', retry=None,
                                    timeout=retries.ATTEMPT_TIMEOUT_S)


def download_range(url, start, end):
    """Bytes ``start`` to ``end`` (exclusive) of object ``url``: one ranged GET, in one attempt."""
    data = _blob(url).download_as_bytes(start=start, end=end - 1, checksum=None, retry=None,
                                        timeout=retries.ATTEMPT_TIMEOUT_S)
    return checked_range(url, start, end, data)


def copy(source_url, target_url):
    """Copies an object within GCS (no data through this machine), in one attempt of one or more rewrite calls."""
    source, target = _blob(source_url), _blob(target_url)
    token = None
    while True:
        token, _, _ = target.rewrite(source, token=token, retry=None, timeout=retries.ATTEMPT_TIMEOUT_S)
        if token is None:
            return


def delete(url):
    """Deletes object ``url`` in one attempt; raises NotFound when there is none."""
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
    bucket, prefix = split_url(as_folder(url))
    blobs = storage_client.list_blobs(bucket, prefix=prefix, delimiter='/', page_size=PAGE_SIZE,
                                      retry=retries.api_retry_for(retries.LIST, policy),
                                      timeout=retries.ATTEMPT_TIMEOUT_S)
    for page in blobs.pages:
        for blob in page:
            if not blob.name.endswith('/'):
                yield OBJECT, f'gs://{bucket}/{blob.name}'
        for sub in page.prefixes:
            yield PREFIX, f'gs://{bucket}/{sub}'


def iter_objects(storage_client, url, policy=None):
    """Yields (url, size, generation) of every object below ``url``, at any depth, one page in memory at a time."""
    bucket, prefix = split_url(as_folder(url))
    for blob in storage_client.list_blobs(bucket, prefix=prefix, page_size=PAGE_SIZE,
                                          retry=retries.api_retry_for(retries.LIST, policy),
                                          timeout=retries.ATTEMPT_TIMEOUT_S):
        if not blob.name.endswith('/'):
            yield f'gs://{bucket}/{blob.name}', blob.size, blob.generation


def check_readable(storage_client, url):
    """Raises ``exceptions.GoogleAPICallError`` unless the objects under ``url`` can be listed."""
    bucket, prefix = split_url(as_folder(url))
    for _ in storage_client.list_blobs(bucket, prefix=prefix, max_results=1):
        break


def describe_error(url, error):
    """One line naming what went wrong with ``url``, for a GCS API error."""
    bucket, _ = split_url(url)
    if isinstance(error, exceptions.NotFound):
        return f'bucket gs://{bucket} not found (for {url})'
    if isinstance(error, exceptions.Forbidden):
        return (f'permission denied on {url}: the account running the job needs Storage Object Admin '
                f'(or Storage Object Viewer to read) on gs://{bucket}')
    return f'cannot access {url}: {retries.describe(error)}'


connect_anonymously_to_emulator()
