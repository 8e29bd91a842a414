"""LATEST, the one file that says which version readers get: read, and moved only by compare-and-swap (locally
under the output folder's lock, on gs:// with a generation precondition), by the build that started from what it
names or by the cleanup that finishes a dead build's move (docs/publication.md)."""
from __future__ import annotations

import dataclasses
import json

from imgrec.console.errors import BuildFailed
from imgrec.contract import layout, version_ref
from imgrec.storage import storage as storage_lib
from imgrec.storage.folder_io import read_or_none
from imgrec.storage.storage import Storage


@dataclasses.dataclass(frozen=True)
class Latest:
    """What LATEST held when the build started: the version name (None when absent) and, on gs://, the
    object's generation (0 when absent)."""
    version: str | None = None
    generation: int | None = 0


def read_latest(output: str, storage: Storage | None = None) -> Latest:
    """LATEST of ``output`` as a ``Latest`` (no version when there is no LATEST); transient errors are
    retried under the storage's policy. A LATEST that names no plain version folder (empty, a staging name,
    ``../elsewhere``) raises ``imgrec.contract.version_ref.VersionError``, by the contract's one rule set."""
    path = layout.join(output, layout.LATEST)
    try:
        found = storage_lib.given_or_default(path, storage).read_versioned(path)
    except IsADirectoryError as error:
        raise version_ref.unreadable(path, error) from None
    if found is None:
        return Latest()
    return Latest(version_ref.latest_name(found.data, path), found.generation)


def latest_version(output: str, storage: Storage) -> str | None:
    """What LATEST names now; None when nothing (or nothing readable, which protects nothing)."""
    try:
        return read_latest(output, storage).version
    except version_ref.VersionError:
        return None


def _moved_by_another(output: str, expected: Latest, found: Latest) -> BuildFailed:
    was = expected.version or 'nothing'
    return BuildFailed(f'LATEST of {output} changed during the build (it named {was}, now '
                       f'{found.version or "nothing"}): another build published first; this version was '
                       f'left unpublished')


def replace_latest(output: str, version: str, expected: Latest, storage: Storage | None = None) -> None:
    """Points LATEST at ``version`` if it is still as ``expected`` (a Latest: the same generation), or names
    ``version`` already (a retry); else raises BuildFailed. Locally under the output folder's lock."""
    path = layout.join(output, layout.LATEST)
    storage = storage_lib.given_or_default(output, storage)
    with storage.locked(output):
        found = read_latest(output, storage)
        if found.version == version:
            return
        if found.version != expected.version:
            raise _moved_by_another(output, expected, found)
        try:
            storage.write(path, f'{version}\n'.encode('utf-8'), if_generation=expected.generation)
        except storage_lib.Conflict:
            raise _moved_by_another(output, expected, read_latest(output, storage)) from None


def finish_latest(output: str, version: str, storage: Storage) -> bool:
    """A dead build published ``version`` but did not move LATEST: moves it, as that build would have, if
    LATEST still names the version the build started from (dataset.json's ``refresh.previous``)."""
    data = read_or_none(layout.join(output, version, layout.DATASET_JSON), storage)
    try:
        started_from = json.loads(data or b'')['refresh']['previous']
    except (ValueError, KeyError, TypeError):
        return False
    try:
        latest = read_latest(output, storage)
    except version_ref.VersionError:
        return False
    if latest.version == version:
        return False
    if latest.version != started_from:
        return False  # another build published since: the dead build's move would have failed too
    try:
        replace_latest(output, version, latest, storage)
    except BuildFailed:
        return False  # moved meanwhile by a live build
    return True
