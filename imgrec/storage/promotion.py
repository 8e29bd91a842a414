"""The steps a build's job runs to publish (``imgrec.transforms.publish``), each handed the ``Publication`` of the
step before and each idempotent: ``promote`` (the staging folder becomes the version), ``move_latest`` (LATEST
names it, then the build lease goes) and ``prune`` (``--keep_versions``). What they do to the output is in the
modules named for the parts: ``staging``, ``latest``, ``retention`` (docs/publication.md)."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from imgrec.console.errors import BuildFailed
from imgrec.contract import layout, shard_check
from imgrec.storage import leases, resumption
from imgrec.storage.crash_points import crash_point
from imgrec.storage.folder_io import delete_tree, each, name_of, read_or_none, sizes
from imgrec.storage.latest import latest_version
from imgrec.storage.publication import Publication
from imgrec.storage.staging import check_lease, own_lease, release_build_lease
from imgrec.storage.storage import Storage
from imgrec.storage.tidying import same_build


THIS_BUILD, EARLIER_RUN = 'this build', 'an earlier run'


def _nothing_new_since(document: Mapping[str, Any], version: str) -> bool:
    """Whether ``document`` (a dataset.json) is a refresh of ``version`` that found no image new, changed or
    removed: it would publish what ``version`` holds."""
    refresh = document.get('refresh') or {}
    return refresh.get('previous') == version and all(refresh.get(key) == 0 for key in ('new', 'changed', 'removed'))


def published_by(publication: Publication) -> str | None:
    """Who published the version already: THIS_BUILD (its dataset.json is this build's: a retried step),
    EARLIER_RUN (an earlier run of the same command, which LATEST names, and nothing new since: a rerun
    after a crash, for which ``tidy`` moved LATEST), or None (nobody). Raises BuildFailed when another build
    published it, or an earlier run did and images changed since."""
    assert publication.document is not None
    data = read_or_none(layout.join(publication.version_dir, layout.DATASET_JSON), publication.storage)
    if data is None:
        return None
    if data == publication.dataset_json:
        return THIS_BUILD
    try:
        recorded = json.loads(data)
    except ValueError:
        recorded = {}
    if same_build(recorded, publication.document) and \
            latest_version(publication.output.root, publication.storage) == publication.version:
        if _nothing_new_since(publication.document, publication.version):
            return EARLIER_RUN
        raise BuildFailed(f'version {publication.version} already exists in {publication.output.root} (an earlier run '
                          f'of this build published it) and images changed since: pass another --version')
    raise BuildFailed(f'version folder {publication.version_dir} was published by another build meanwhile')


def _check_promotion(storage: Storage, publication: Publication, listed: Mapping[str, int]) -> None:
    """Everything that must hold before the staging folder (its files ``listed``) becomes the version; then
    removes an unpublished folder of that name (what a killed promotion or pruning left). Locally, runs
    under the lock."""
    output, version, staging_dir = publication.output.root, publication.version, publication.staging_dir
    assert publication.document is not None
    check_lease(output, staging_dir, storage)
    prefix = staging_dir.rstrip('/') + '/'
    problems = shard_check.shard_problems(publication.document, staging_dir,
                                          lambda path: listed.get(path[len(prefix):]))
    if problems:
        more = f' (and {len(problems) - 1} more)' if len(problems) > 1 else ''
        raise BuildFailed(f'the staging folder lost files before publication: {problems[0]}{more}; nothing was '
                          f'published')
    if storage.exists(layout.join(publication.version_dir, layout.DATASET_JSON)):
        raise BuildFailed(f'version folder {publication.version_dir} was published by another build meanwhile')
    own = own_lease(output, staging_dir, storage).path
    found = leases.read_all(storage, output)
    # The leases of this build: its own, and those on the stopped runs of it that it takes up.
    claimed = resumption.claim_token(layout.staging_build_id(name_of(staging_dir)))
    others = leases.live(found, exclude={own, *(entry.path for entry in found
                                                if entry.lease and entry.lease.get('token') == claimed)})
    if version in others.building or version in others.pruning:
        raise BuildFailed(f'another build is writing or deleting version {version} in {output} now (see '
                          f'{leases.folder(output)}); this version was left unpublished: pass another --version')
    storage.delete_tree(publication.version_dir)


def _promote_by_rename(publication: Publication) -> None:
    """Where a folder rename is atomic (locally): one rename, under the lock."""
    storage = publication.storage
    assert publication.document is not None
    with storage.locked(publication.output.root):
        listed = sizes(publication.staging_dir, storage)
        _check_promotion(storage, publication, listed)
        os.rename(publication.staging_dir, publication.version_dir)
    crash_point('promote:after_rename')


def _promote_by_copy(publication: Publication) -> None:
    """Where there are no folders (gs://): every object but dataset.json copied and the copies checked, then
    dataset.json, last; then the staging objects deleted."""
    output, staging_dir, version_dir, storage = (publication.output.root, publication.staging_dir,
                                               publication.version_dir, publication.storage)
    listed = sizes(staging_dir, storage)
    _check_promotion(storage, publication, listed)
    rest = sorted(name for name in listed if name != layout.DATASET_JSON)
    marker = layout.join(version_dir, layout.DATASET_JSON)
    try:
        each(lambda name: storage.copy(layout.join(staging_dir, name), layout.join(version_dir, name)), rest)
        crash_point('promote:after_copy')
        copied = sizes(version_dir, storage)
        missing = [name for name in rest if name not in copied]
        if missing:
            raise BuildFailed(f'{layout.join(version_dir, missing[0])} is missing after the copy; this version was '
                              f'left unpublished')
        check_lease(output, staging_dir, storage)  # once more, just before the version is published
        if storage.exists(marker):
            raise BuildFailed(f'version folder {version_dir} was published by another build meanwhile')
        storage.copy(layout.join(staging_dir, layout.DATASET_JSON), marker)  # last: now the version is published
    except BuildFailed:
        with contextlib.suppress(Exception):  # what this promotion copied, unless published after all
            if not storage.exists(marker):
                storage.delete_tree(version_dir)
        raise
    crash_point('promote:after_dataset_json')
    staged = [layout.join(staging_dir, name) for name in sorted(listed)]
    half = len(staged) // 2
    each(storage.delete, staged[:half])
    crash_point('promote:mid_cleanup')
    each(storage.delete, staged[half:])


def promote(publication: Publication) -> Publication:
    """Step 3: makes the finished staging folder the version. Nothing changed: deletes the staging folder.
    Run again once the version holds this build's dataset.json (or an earlier run's of the same command,
    which LATEST names), it only deletes what is left of the staging folder."""
    if publication.unchanged:
        delete_tree(publication.staging_dir, publication.storage)
        return publication
    by = published_by(publication)
    if by is not None:
        delete_tree(publication.staging_dir, publication.storage)  # gs://: a cleanup cut short; else nothing
        return dataclasses.replace(publication, earlier_run=by == EARLIER_RUN)
    crash_point('publish:before_promote')
    # No rerun takes anything up from here now (its marker goes first), and a version holds neither.
    publication.storage.delete(layout.join(publication.staging_dir, resumption.MARKER))
    delete_tree(layout.join(publication.staging_dir, layout.SPILL_DIR), publication.storage)
    if publication.storage.remote:
        _promote_by_copy(publication)
    else:
        _promote_by_rename(publication)
    return publication


def move_latest(publication: Publication) -> Publication:
    """Step 4: LATEST names the version, if it still named the one the build started from (or names this
    version already: a retry); then the build lease is released. Nothing changed: only the release."""
    if not publication.unchanged:
        publication.output.replace_latest(publication.version, publication.previous)
        crash_point('publish:after_latest')
    release_build_lease(publication.output.root, publication.staging_dir, publication.storage)
    return publication


def prune(publication: Publication) -> Publication:
    """Step 5: prunes to ``keep_versions`` (none given: keeps every version), also when nothing changed."""
    if not publication.keep_versions:
        return publication
    kept = publication.output.keep_newest(publication.keep_versions)
    return dataclasses.replace(publication, retention=kept)
