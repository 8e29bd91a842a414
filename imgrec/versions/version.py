"""Finds a version folder from what a user types (OUT or OUT/VERSION), by the contract's rules
(``imgrec.contract.version_ref``), and reads its metadata files."""
import contextlib
import json
import typing
from collections.abc import Iterator
from typing import Any

from imgrec.contract import layout, version_ref
from imgrec.storage import leases, storage as storage_lib


class InspectionError(Exception):
    """A version that cannot be found or read: reported in one line."""


class Version(typing.NamedTuple):
    path: str  # the version folder
    document: dict  # dataset.json
    labels: list | None  # labels.txt, one class a line (None when there is none)


def _ref(path: str, storage: storage_lib.Storage | None = None) -> version_ref.VersionRef:
    """The contract's VersionRef of ``path`` (OUT or OUT/VERSION), read through the storage layer."""
    storage = storage_lib.given_or_default(path, storage)
    try:
        return version_ref.resolve(path, storage.read, storage.exists)
    except version_ref.VersionError as error:
        raise InspectionError(str(error)) from None


def resolve(path: str) -> str:
    """The version folder ``path`` names: itself when it holds dataset.json, else the one its LATEST names."""
    return _ref(path).directory


def load(path: str, storage: storage_lib.Storage | None = None, ref: version_ref.VersionRef | None = None) -> Version:
    """The Version at ``path`` (OUT or OUT/VERSION), read through ``storage`` (the job's) when given;
    ``ref``: its VersionRef, resolved already."""
    ref = ref or _ref(path, storage)
    labels_path = layout.join(ref.directory, layout.LABELS_TXT)
    storage = storage_lib.given_or_default(labels_path, storage)
    labels = storage.read(labels_path).decode('utf-8').splitlines() if storage.exists(labels_path) else None
    return Version(ref.directory, ref.document, labels)


@contextlib.contextmanager
def reading(path: str) -> Iterator[Version]:
    """The Version at ``path`` with a reader lease on it while the block runs (``leases.reader_lease``), so a
    build's --keep_versions does not delete it under a command that reads it (verify-dataset, dataset-report)."""
    try:
        ref, lease = leases.resolve_leased(lambda: _ref(path), lambda ref: (ref.output, ref.name))
    except leases.Pruned as error:
        raise InspectionError(f'{error}, three times: run again') from None
    try:
        yield load(path, ref=ref)
    finally:
        if lease is not None:
            lease.release_quietly()


def iter_jsonl(version_dir: str, name: str, storage: storage_lib.Storage | None = None) -> Iterator[Any]:
    """Yields the objects of a JSON-lines file of the version, one line in memory at a time; none when absent.
    ``storage``: the job's, when given."""
    path = layout.join(version_dir, name)
    storage = storage_lib.given_or_default(path, storage)
    if not storage.exists(path):
        return
    with storage.open_read(path) as stream:
        for line in stream:
            if line.strip():
                yield json.loads(line)


def shard_paths(version: Version) -> list[tuple[str, dict, str]]:
    """[(split, shard entry of dataset.json, path)] in split and shard order."""
    return [(split, shard, layout.join(version.path, shard['file']))
            for split, info in version.document['splits'].items() for shard in info['shards']]
