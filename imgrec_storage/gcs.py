"""The gs:// calls ``imgrec_storage.publication`` still makes by name, until it moves onto ``storage.Storage``:
each one a call of ``gcs_storage.GcsStorage``, under the default retry policy or none."""
from __future__ import annotations

from imgrec_storage import storage
from imgrec_storage.gcs_storage import EMULATOR_HOST, as_folder  # noqa: F401  (names publication uses)


def is_gcs(path: str) -> bool:
    return storage.on_gcs(path)


def download_with_generation(url: str) -> tuple[bytes | None, int]:
    """(bytes, generation) of object ``url``, or (None, 0) when there is none."""
    found = storage.storage_for(url).read_versioned(url)
    return (None, 0) if found is None else (found.data, found.generation)


def upload_if_generation(url: str, data: bytes, generation: int) -> int:
    """Writes object ``url`` only if its generation is still ``generation`` (0: only if there is none);
    raises ``storage.Conflict`` otherwise. Returns the new generation."""
    return storage.storage_for(url).write(url, data, if_generation=generation)
