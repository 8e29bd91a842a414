"""A real GCS server for the tests: ``gcp-storage-emulator`` on a free loopback port (with generation
preconditions, ``tests.gcs_emulator_server``).

Use it from any test module with ``from tests.gcs_emulator import gcs_emulator  # noqa: F401`` and a
``gcs_emulator`` argument (or list ``tests.gcs_emulator`` in conftest's ``pytest_plugins``). The first
use in a session starts the server, points this process and every
process it starts (the DirectRunner's workers, ``subprocess`` runs of the job) at it through
``STORAGE_EMULATOR_HOST`` with anonymous credentials, yields an ``Emulator`` to create buckets and move
files, and stops the server at the end. Nothing can reach Google while it runs.
"""
import concurrent.futures
import pathlib
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from google.cloud import storage

from imgrec.storage import gcs_storage
from imgrec.pipelines.local import emulator as beam_emulator_credentials

_START_DEADLINE_S = 30  # how long the server may take to answer before the fixture gives up


def _free_loopback_port():
    with socket.socket() as probe:
        probe.bind(('127.0.0.1', 0))
        return probe.getsockname()[1]


def _wait_until_serving(url, server):
    deadline = time.monotonic() + _START_DEADLINE_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f'gcp-storage-emulator exited with status {server.returncode}')
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f'gcp-storage-emulator did not answer at {url} within {_START_DEADLINE_S} s')


def start_server(log_stream=subprocess.DEVNULL):
    """(url, process) of a ``gcp-storage-emulator`` (in memory) serving on a free loopback port; the
    caller stops the process."""
    port = _free_loopback_port()
    url = f'http://127.0.0.1:{port}'
    server = subprocess.Popen(
        [sys.executable, str(pathlib.Path(__file__).with_name('gcs_emulator_server.py')), 'start',
         '--host', '127.0.0.1', '--port', str(port), '--in-memory', '--quiet'],
        stdout=log_stream, stderr=subprocess.STDOUT)
    try:
        _wait_until_serving(url, server)
    except RuntimeError:
        server.kill()
        server.wait()
        raise
    return url, server


class Emulator:
    """Buckets and objects on the running emulator, through an anonymous google-cloud-storage client."""

    def __init__(self, url):
        self.url = url
        self.client = storage.Client.create_anonymous_client()

    def create_bucket(self, name):
        """Creates bucket ``name`` (names must be unique across the session); returns 'gs://name'."""
        self.client.create_bucket(name)
        return f'gs://{name}'

    def _blob(self, url):
        bucket, _, name = url[len('gs://'):].partition('/')
        return self.client.bucket(bucket).blob(name)

    def upload_bytes(self, url, data):
        self._blob(url).upload_from_string(data)

    def read_bytes(self, url):
        return self._blob(url).download_as_bytes()

    def upload_files(self, files, url):
        """Uploads {relative name: local path} below ``url``, on a few threads."""
        def one(item):
            name, path = item
            self._blob(f"{url.rstrip('/')}/{name}").upload_from_filename(path)

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(one, sorted(files.items())))

    def upload_folder(self, folder, url):
        """Uploads every file below the local ``folder`` to the same relative names under ``url``."""
        folder = pathlib.Path(folder)
        for path in sorted(p for p in folder.rglob('*') if p.is_file()):
            self.upload_bytes(f"{url.rstrip('/')}/{path.relative_to(folder).as_posix()}", path.read_bytes())

    def list(self, url):
        """Every object url below the prefix ``url``, sorted."""
        bucket, _, prefix = url[len('gs://'):].partition('/')
        return sorted(f'gs://{bucket}/{blob.name}' for blob in self.client.list_blobs(bucket, prefix=prefix))

    def download_folder(self, url, folder):
        """Downloads every object below ``url`` into the local ``folder``, keeping relative names."""
        prefix = url.rstrip('/') + '/'
        for object_url in self.list(prefix):
            target = pathlib.Path(folder, object_url[len(prefix):])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(self.read_bytes(object_url))
        return str(folder)


# Each test module that imports the fixture holds its own copy of it: they all share one server.
_shared = {}


@pytest.fixture(scope='session')
def gcs_emulator(tmp_path_factory):
    """Yields an ``Emulator`` serving on a free loopback port, for the whole session."""
    if _shared:
        yield _shared['emulator']  # started by the first module's copy, which also stops it, last
        return
    log = tmp_path_factory.mktemp('gcs-emulator') / 'server.log'
    with open(log, 'wb') as log_stream:
        url, server = start_server(log_stream)
    try:
        with pytest.MonkeyPatch.context() as environment:
            # Inherited by every process the tests start: Beam's workers and the job run as a subprocess.
            environment.setenv(gcs_storage.EMULATOR_HOST, url)
            # Should anything still look for credentials, it must not wait on a metadata server.
            environment.setenv('NO_GCE_CHECK', 'true')
            beam_emulator_credentials.skip_credential_search()  # for Beam's own clients in this process
            _shared['emulator'] = Emulator(url)
            yield _shared['emulator']
    finally:
        _shared.clear()
        server.terminate()
        server.wait()
