"""Beam's own GCS clients made anonymous at once against a GCS emulator (feature emulator-credentials).

Beam's GCS file system looks for Application Default Credentials with four back-off retries (about
20 s a process, and a warning) before it falls back to an anonymous client, which is all an emulator
(``STORAGE_EMULATOR_HOST``) needs. Recording "no credentials" in Beam's per-process credential cache
(``auth._Credentials``) skips the search. Without an emulator nothing here acts: Beam uses Application
Default Credentials as usual. The project's own GCS client (``imgrec.storage.gcs_storage``) needs none of
this: it asks Beam's public ``gcsio.create_storage_client`` for an anonymous client.
"""
import contextlib
import os

import apache_beam
from apache_beam.internal.gcp import auth

from imgrec.storage import gcs_storage
from imgrec.pipelines.local.checks import attribute, function, require, uses


def check():
    credentials = attribute(auth, '_Credentials')
    lock = attribute(credentials, '_credentials_lock')
    require(hasattr(lock, '__enter__') and hasattr(lock, '__exit__'),
            f'Beam {apache_beam.__version__}: auth._Credentials._credentials_lock is no lock')
    require(isinstance(attribute(credentials, '_credentials_init'), bool),
            f'Beam {apache_beam.__version__}: auth._Credentials._credentials_init is no flag')
    attribute(credentials, '_credentials')
    uses(function(credentials, 'get_service_credentials'), 'auth._Credentials.get_service_credentials',
         '_credentials_init', '_credentials')


def _cache(credentials, initialised):
    """Sets Beam's credential cache; returns what it held."""
    cache = auth._Credentials  # pylint: disable=protected-access
    with cache._credentials_lock:  # pylint: disable=protected-access
        held = cache._credentials, cache._credentials_init  # pylint: disable=protected-access
        cache._credentials, cache._credentials_init = credentials, initialised  # pylint: disable=protected-access
    return held


@contextlib.contextmanager
def anonymous(run=None):  # pylint: disable=unused-argument
    """Within the block, and with an emulator named, Beam's GCS clients in this process skip the credential search."""
    if not os.environ.get(gcs_storage.EMULATOR_HOST):
        yield
        return
    held = _cache(None, True)
    try:
        yield
    finally:
        _cache(*held)


def skip_credential_search():
    """``anonymous()`` for the rest of this process: for a worker process (``worker_plugin``) and the tests."""
    if os.environ.get(gcs_storage.EMULATOR_HOST):
        _cache(None, True)
