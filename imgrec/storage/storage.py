"""One storage interface for local paths and gs:// objects; ``storage_for`` is the one place that tells them apart.

The layer uses one stack: the standard library for local paths, google-cloud-storage for gs:// (single
attempts, the client's own retries off, every request counted). Not Beam's FileSystems: training never
imports Beam, and Beam's gcsio would retry on its own, uncounted. Not ``tf.io.gfile``: Beam's workers
have no TensorFlow. Nothing here imports Beam or TensorFlow, so both sides can use it. TensorFlow's file
systems serve only the URLs nothing else does (``ram://``), which only training, which has TensorFlow,
is handed (``tf_storage``).

Each ``Storage`` owns its retry policy (``retry``): transient errors are retried under it, permanent
ones raise at once. Reads raise the permanent error as it is (a missing file: ``FileNotFoundError``
locally, ``google.api_core.exceptions.NotFound`` on gs://), or ``retries.RetriesExhausted``; writes,
copies and deletions raise ``BuildFailed``, one line naming the file, or ``Conflict`` when a generation
precondition does not hold.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from imgrec.storage import retries
from imgrec.storage.paths import (  # noqa: F401  (the path rules, named here for every caller)
    GCS_SCHEME, folder_of, is_inside, is_local_root, is_relative, relative_name, scheme_key)
from imgrec.storage.storage_interface import (  # noqa: F401  (the interface, named here for every caller)
    BaseStorage, Conflict, Entry, Reader, Storage, Versioned, Writer, retried)


def storage_for(path: str, retry: retries.RetryPolicy | None = None,
                options: Mapping[str, Any] | None = None) -> Storage:
    """The ``Storage`` for ``path``'s scheme: gs://, a local path, or another URL for TensorFlow's file systems.

    ``retry``: the policy (``retries.default_policy()`` when None). ``options``: the job's pipeline options
    as a dict, so that a worker's gs:// client authenticates as the job does (None: Application Default
    Credentials). A storage hands both on to the storage of any other path (``for_path``).
    """
    return _storage_for(scheme_key(path), retry or retries.default_policy(),
                        json.dumps(dict(options), sort_keys=True, default=str) if options else None)


def given_or_default(path: str, storage: Storage | None = None) -> Storage:
    """The storage to reach ``path`` through: ``storage`` (the job's, when the caller has it) handed on
    to ``path`` (``Storage.for_path``: its retry policy and options); else ``path``'s own with the default
    policy and no job options, for a public function called without one (a command, a test)."""
    return storage.for_path(path) if storage is not None else storage_for(path)


@functools.lru_cache(maxsize=None)
def _storage_for(path_scheme_key: str, retry: retries.RetryPolicy, options_json: str | None) -> Storage:
    # pylint: disable=import-outside-toplevel  # each imported for its paths only (the GCS client costs a second)
    if path_scheme_key == GCS_SCHEME:
        from imgrec.storage.gcs_storage import GcsStorage
        return GcsStorage(retry, options_json, _storage_for)
    if path_scheme_key:
        from imgrec.storage.tf_storage import TensorFlowStorage
        return TensorFlowStorage(retry, options_json, _storage_for)
    from imgrec.storage.local_storage import LocalStorage
    return LocalStorage(retry, options_json, _storage_for)
