"""``--keep_versions``: which published versions a build keeps (LATEST, the newest, those a live lease holds) and
the pruning of the others, each unpublished first (its ``dataset.json`` deleted), then deleted, under a prune
lease (docs/publication.md)."""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from imgrec.contract import layout, version_ref
from imgrec.storage import leases, storage as storage_lib
from imgrec.storage.crash_points import crash_point
from imgrec.storage.folder_io import delete_in_halves, name_of, read_or_none
from imgrec.storage.latest import latest_version
from imgrec.storage.storage import Storage


@dataclasses.dataclass(frozen=True)
class Kept:
    """A version pruning kept, and why: LATEST, one of the newest, or the live lease that holds it."""
    version: str
    why: str

    def __str__(self) -> str:
        return f'{self.version} ({self.why})'


@dataclasses.dataclass(frozen=True)
class Retention:
    """What ``--keep_versions`` kept (LATEST, the newest, then those a lease holds) and deleted (oldest
    first) after a build."""
    keep_versions: int
    kept: tuple[Kept, ...] = ()
    deleted: tuple[str, ...] = ()

    def describe(self) -> str:
        """'--keep_versions 1: kept v3 (LATEST), v1 (leased by ...); deleted v2': the summary's line."""
        line = f"--keep_versions {self.keep_versions}: kept {', '.join(map(str, self.kept)) or 'none'}"
        return line + (f"; deleted {', '.join(self.deleted)}" if self.deleted else '')


def published_versions(output: str, storage: Storage | None = None) -> list[tuple[float, str]]:
    """[(published at, version)] of every published version below ``output``, oldest first.

    A version is published once its dataset.json is in place: the file's time is when it was, since it
    is written (locally) or copied (gs://) last.
    """
    storage, found = storage_lib.given_or_default(output, storage), []
    for entry in storage.list_level(output):
        version = name_of(entry.path)
        if entry.is_folder and not version_ref.version_name_problem(version):  # never a staging or lease folder
            marker = storage.stat(layout.join(output, version, layout.DATASET_JSON))
            if marker is not None:
                found.append((marker.updated, version))
    return sorted(found)


def to_keep(versions: Sequence[str], latest: str | None, keep_count: int) -> list[Kept]:
    """Which of ``versions`` (newest first) ``--keep_versions keep_count`` keeps, leases aside: the one
    LATEST names, then the newest others, ``keep_count`` in all."""
    kept = [Kept(latest, 'LATEST')] if latest is not None and latest in versions else []
    newest = f'one of the {keep_count} newest' if keep_count > 1 else 'the newest'
    kept += [Kept(version, newest) for version in versions if version != latest][:max(0, keep_count - len(kept))]
    return kept


def pruning_plan(output: str, version: str, keep_count: int | None,
                 storage: Storage | None = None) -> tuple[str, ...]:
    """The versions a build that publishes ``version`` (and moves LATEST to it) is to delete, oldest first,
    if no lease holds them."""
    if not keep_count:
        return ()
    versions = [version] + [name for _, name in reversed(published_versions(output, storage)) if name != version]
    kept = {entry.version for entry in to_keep(versions, version, keep_count)}
    return tuple(name for name in reversed(versions) if name not in kept)


_HOLDERS = {layout.BUILD_LEASE: 'a build', layout.READER_LEASE: 'a reader', layout.PRUNE_LEASE: 'a pruning'}


def _holder(entry: Any) -> str:
    """'leased by a reader (pid 4242 on build-1, lease 3f9c0a1b2c4d)': who holds a live lease (a ``leases.Found``)."""
    held_by = (entry.lease or {}).get('holder') or {}
    where = f"pid {held_by.get('pid')} on {held_by.get('host')}, " if held_by.get('host') else ''
    return f'leased by {_HOLDERS.get(entry.kind, entry.kind)} ({where}lease {entry.id})'


def _holders(found: Iterable[Any], version: str, exclude: str) -> list[str]:
    """Who holds a live lease on ``version`` (a reader, a build publishing it, another pruning)."""
    return [_holder(entry) for entry in found
            if entry.path != exclude and leases.is_live(entry.lease) and entry.lease.get('target') is not None
            and version in leases.live([entry]).versions]


DELETED = 'deleted'


def prune_version(storage: Storage, output: str, version: str, lease: leases.Lease) -> str:
    """Unpublishes, then deletes ``version`` under its prune ``lease`` unless a live lease holds it or
    LATEST names it. Returns DELETED, or why it was kept (``Kept.why``)."""
    version_dir = layout.join(output, version)
    marker = layout.join(version_dir, layout.DATASET_JSON)
    with storage.locked(output):  # locally, a reader takes its lease under the same lock
        if latest_version(output, storage) == version:
            return 'LATEST'
        saved = read_or_none(marker, storage)
        holders = _holders(leases.read_all(storage, output), version, lease.path) if saved is not None else []
        if holders:
            return ', '.join(holders)
        storage.delete(marker)
    crash_point('prune:after_unpublish')
    if saved is not None:  # gs: no lock; locally, a reader that took its lease since found no dataset.json
        holders = _holders(leases.read_all(storage, output), version, lease.path)
        if holders:
            # gs://: a reader took its lease while dataset.json was going (it reads it after taking the lease)
            with contextlib.suppress(storage_lib.Conflict):
                storage.write(marker, saved, if_generation=0)
            return ', '.join(holders)
    delete_in_halves(version_dir, 'prune:mid_delete', storage)
    return DELETED


def keep_newest(output: str, keep_count: int, storage: Storage | None = None) -> Retention:
    """Deletes every published version but the ``keep_count`` newest (the one LATEST names among them),
    and but those a live lease holds (a reader's, a build's that is publishing it). Returns the
    ``Retention``: what was kept and why, and what was deleted."""
    storage = storage_lib.given_or_default(output, storage)
    versions = [version for _, version in reversed(published_versions(output, storage))]
    kept = to_keep(versions, latest_version(output, storage), keep_count)
    deleted = []
    for version in reversed(versions):  # oldest first
        if any(entry.version == version for entry in kept):
            continue
        with leases.Lease(storage, output, layout.PRUNE_LEASE, version) as lease:
            outcome = prune_version(storage, output, version, lease)
        if outcome == DELETED:
            deleted.append(version)
        else:
            kept.append(Kept(version, outcome))
    return Retention(keep_count, tuple(kept), tuple(deleted))
