"""What failed and killed builds leave, and the cleanup of it: before every build, ``tidy`` finishes the jobs of
dead leases and removes old staging folders, and ``refuse_published`` tells a published --version from a rerun of
its build; after a failure, ``shed`` gives back a staging folder's bulk and ``state_after_failure`` says what
readers can see (docs/publication.md)."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Mapping
from typing import Any

from imgrec.console.errors import UserError
from imgrec.contract import layout, metadata, version_ref
from imgrec.storage import leases, resumption, storage as storage_lib
from imgrec.storage.folder_io import delete_tree, each, name_of, read_or_none, sizes
from imgrec.storage.latest import finish_latest, latest_version
from imgrec.storage.retention import DELETED, prune_version, published_versions
from imgrec.storage.staging import staging_folders
from imgrec.storage.storage import Storage


def same_build(published: Mapping[str, Any], built: Mapping[str, Any]) -> bool:
    """Whether a published dataset.json came from a run of the same build as ``built`` (a dataset.json, or
    ``BuildConfig.recorded()``): ``metadata.identity``, the one rule for it (the output aside: an output
    folder may have been copied or moved)."""
    return metadata.identity(published) == metadata.identity(built)


# -- a failed build's staging folder ---------------------------------------------------------------------

# What a failed build's staging folder keeps for its user (the report and the lists it names); the rest (spill
# files, shards, partial shards, the index) is the bulk that filled the disk, and goes (``shed``).
FAILURE_KEEPS = frozenset((layout.REPORT_HTML, layout.QUARANTINE_JSONL, layout.DUPLICATES_JSONL,
                           layout.BUILD_FAILURE_JSON))


def shed(staging_dir: str, storage: Storage) -> int:
    """Deletes the bulk of a failed or stopped build's staging folder, keeping what explains the failure
    (``FAILURE_KEEPS``, at its top): so a build that ran out of space gives its space back, and the user keeps
    its report and quarantine list. Returns the bytes freed. Run again, it finds nothing more to delete."""
    bulk = {name: size for name, size in sizes(staging_dir, storage).items() if name not in FAILURE_KEEPS}

    def delete(path: str) -> None:
        local = storage.local_path(path)
        if local is not None:  # a writer of the failed run may hold it open still: its blocks go now all the same
            with contextlib.suppress(OSError):
                os.truncate(local, 0)
        storage.delete(path)
    each(delete, [layout.join(staging_dir, name) for name in sorted(bulk)])
    for folder in sorted({name.split('/', 1)[0] for name in bulk if '/' in name}):
        storage.delete_tree(layout.join(staging_dir, folder))  # local: the folders left empty (spill/)
    return sum(bulk.values())


# -- after a failure: what readers can see ----------------------------------------------------------------

UNPUBLISHED, LATEST_NAMES_IT, LATEST_MOVED_NOW, PUBLISHED_NOT_LATEST, SUPERSEDED = (
    'unpublished', 'latest', 'moved', 'published', 'superseded')


def promoted_by(output: str, version: str, created: str, storage: Storage) -> bool:
    """Whether ``OUT/<version>/dataset.json`` is the one the build that started at ``created`` wrote: that build
    promoted the version, and readers can see it by name."""
    data = read_or_none(layout.join(output, version, layout.DATASET_JSON), storage)
    try:
        return data is not None and json.loads(data).get('created') == created
    except ValueError:
        return False


def state_after_failure(output: str, version: str, created: str, storage: Storage) -> str:
    """What a build that failed (or stopped) left readers: UNPUBLISHED (nothing of it is visible), LATEST_NAMES_IT
    (it published, and LATEST moved: only a later step failed), LATEST_MOVED_NOW (promoted, LATEST not moved by the
    build, moved now as the build would have done: ``finish_latest``'s rule), PUBLISHED_NOT_LATEST (promoted,
    and LATEST could not be moved now either: the disk is still full), or SUPERSEDED (promoted, but another build
    moved LATEST first: the build's own line says so): judged by ``OUT/<version>/dataset.json``
    being this build's (its ``created``)."""
    data = read_or_none(layout.join(output, version, layout.DATASET_JSON), storage)
    try:
        recorded = json.loads(data) if data is not None else {}
    except ValueError:
        recorded = {}
    if recorded.get('created') != created:
        return UNPUBLISHED
    latest = latest_version(output, storage)
    if latest == version:
        return LATEST_NAMES_IT
    if latest != (recorded.get('refresh') or {}).get('previous'):
        return SUPERSEDED  # another build moved LATEST first: this build lost the compare-and-swap
    with contextlib.suppress(Exception):  # the disk may still be full: then the rerun finishes it
        if finish_latest(output, version, storage):
            return LATEST_MOVED_NOW
    return PUBLISHED_NOT_LATEST


# -- cleanup before a build -------------------------------------------------------------------------------

def _finish_build(storage: Storage, output: str, staging_name: str, lease: leases.Lease) -> str | None:
    """Finishes after a build that died: deletes its staging folder, and its version folder if that holds
    no dataset.json (a promotion cut short) and no live lease, nor LATEST, names it; a version it
    published whose LATEST it did not move gets LATEST now. Returns that version, if so."""
    delete_tree(layout.join(output, staging_name), storage)
    version = layout.staging_version(staging_name)
    version_dir = layout.join(output, version)
    with storage.locked(output):  # locally, a promotion renames under the same lock
        if storage.exists(layout.join(version_dir, layout.DATASET_JSON)):
            return version if finish_latest(output, version, storage) else None
        if latest_version(output, storage) == version:
            return None
        if version in leases.live(leases.read_all(storage, output), exclude={lease.path}).versions:
            return None
        delete_tree(version_dir, storage)
    return None


# A staging folder that no lease names and that holds no failure report was left by a build stopped by Ctrl-C or
# SIGTERM, or is a template job's (which takes no lease) still running: its bulk is shed only once nothing was
# written to it for this long.
QUIET_BEFORE_SHED_S = 3600.0


def _finished(folder: str, last_written: float, storage: Storage) -> bool:
    """Whether the unleased staging ``folder`` is a build's that ended: it holds the mark a failed build leaves
    with its report (``layout.BUILD_FAILURE_JSON``; a report.html alone is also every build's before promotion),
    or nothing was written to it for QUIET_BEFORE_SHED_S."""
    return (storage.exists(layout.join(folder, layout.BUILD_FAILURE_JSON))
            or time.time() - last_written > QUIET_BEFORE_SHED_S)


@dataclasses.dataclass(frozen=True)
class Tidied:
    """What the cleanup before a build did: staging folders removed, versions whose interrupted pruning it
    finished, and versions whose interrupted publication it finished (LATEST moved to them)."""
    staging_removed: int
    pruned: tuple[str, ...] = ()
    published: tuple[str, ...] = ()


def tidy(output: str, clean: bool = False, storage: Storage | None = None, resumable: bool = True) -> Tidied:
    """Before a build: finishes the jobs of dead leases (a killed build's staging folder and half-promoted
    version, or its published version that LATEST does not name yet; an interrupted pruning), then
    removes the staging folders that no lease names, which failed builds (or builds older than leases)
    left: those last written before the newest version was published, or all of them with ``clean``.
    Never anything a live lease names. With ``resumable`` (and not ``clean``), a stopped build's staging
    folder that a rerun may take up (``resumption.marked``) is left as it is, its dead lease too: the build
    claims it or runs this again without ``resumable``. Returns ``Tidied``."""
    storage = storage_lib.given_or_default(output, storage)
    staging = staging_folders(output, storage)  # before the leases: a build takes its lease before it writes
    found = leases.read_all(storage, output)
    named = {entry.lease['target'] for entry in found if entry.kind == layout.BUILD_LEASE and entry.lease}
    left = ({name_of(folder) for _, folder in staging if resumption.marked(folder, storage)}
            if resumable and not clean else set())
    removed, pruned, published = 0, [], []
    for entry in found:
        if leases.is_live(entry.lease) or (entry.kind == layout.BUILD_LEASE and entry.lease
                                           and entry.lease.get('target') in left):
            continue
        lease = leases.take_over(storage, output, entry)
        if lease is None:
            continue
        with lease.held():
            if entry.kind == layout.BUILD_LEASE and lease.target and layout.is_staging_name(lease.target):
                finished = _finish_build(storage, output, lease.target, lease)
                removed += 1
                if finished:
                    published.append(finished)
            elif entry.kind == layout.PRUNE_LEASE and lease.target and not version_ref.version_name_problem(
                    lease.target):
                if prune_version(storage, output, lease.target, lease) == DELETED:
                    pruned.append(lease.target)
    published_at = max((when for when, _ in published_versions(output, storage)), default=None)
    for last_written, folder in staging:
        if name_of(folder) in named or name_of(folder) in left:
            continue
        if clean or (published_at is not None and last_written < published_at):
            delete_tree(folder, storage)
            removed += 1
        elif _finished(folder, last_written, storage):  # kept for its report: its bulk goes, so a full disk gets
            shed(folder, storage)                          # its space back
    if found:
        with storage.locked(output):
            storage.remove_empty_folder(leases.folder(output))
    return Tidied(removed, tuple(pruned), tuple(published))


def refuse_published(output: str, version: str, recorded: Mapping[str, Any], storage: Storage) -> bool:
    """Before a build, after ``tidy``: refuses a --version that is published already, unless it is the same
    build (``recorded``: ``BuildConfig.recorded()``) and LATEST names it: a rerun of the build that published
    it. That rerun refreshes the version; it ends with nothing published when it finds nothing new, and fails
    at promotion (``promotion.published_by``) when it does.

    A version of the same options that LATEST does not name yet, while LATEST still names the version that
    build started from and no live build lease names it, is a publication that failed after promotion (the
    disk filled as LATEST was written): LATEST is moved to it now, as that build would have, and True is
    returned (the caller says so)."""
    data = read_or_none(layout.join(output, version, layout.DATASET_JSON), storage)
    if data is None:
        return False
    try:
        published = json.loads(data)
    except ValueError:
        published = {}
    if not same_build(published, recorded):
        raise UserError(f'version {version} already exists in {output}; pass another --version')
    if latest_version(output, storage) == version:
        return False
    building = leases.live(leases.read_all(storage, output)).building
    if version not in building and finish_latest(output, version, storage):
        return True
    raise UserError(f'version {version} already exists in {output}; pass another --version')
