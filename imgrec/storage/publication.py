"""The publication protocol (docs/publication.md): the one module that promotes, prunes or deletes a
version or a staging folder, and moves LATEST.

A build publishes in steps, each handed the one ``Publication`` summary of the step before, and each
idempotent: run again after it finished, or after a crash anywhere inside it, it ends in the same
published state (a Beam runner retries a failed bundle; a scheduler reruns a killed build).

- A build writes its version into its staging folder, which its build lease names (``imgrec.storage.leases``).
- ``promote``: the staging folder becomes ``<version>``, only while the build still holds its lease and
  only if every shard ``dataset.json`` lists is there. Locally: one rename, under ``flock`` on the
  output folder. On ``gs://``: every object but ``dataset.json`` is copied and the copies checked, then
  ``dataset.json``, the completion marker, last; then the staging objects are deleted. A version folder
  without ``dataset.json`` was never published (or is being pruned): a promotion of that name replaces it.
  One whose ``dataset.json`` is this build's was promoted already.
- ``move_latest``: LATEST moves only if it still names the version the build started from
  (compare-and-swap): locally under the lock, on ``gs://`` with a generation precondition.
- ``prune``: keeps the ``--keep_versions`` newest versions (LATEST among them) and those a live lease
  holds; any other is unpublished first (``dataset.json`` deleted), then deleted, under a prune lease.
- ``tidy`` (before every build): finishes the jobs of dead leases (a killed build's staging folder, its
  half-promoted version, or its promoted version whose LATEST did not move yet; an interrupted pruning)
  and removes staging folders failed builds left.

Every call takes the output's ``Storage`` (``files``; a step, the ``Publication``'s): the job's, built with its
retry policy and options, so a worker's calls authenticate as the job's listing and shard writers do (Beam keeps
``--impersonate_service_account`` to the launcher: docs/publication.md). None (tests, tools): the output's storage
with the defaults.

``IMGREC_CRASH_AT`` and ``IMGREC_PAUSE_AT`` are test hooks at the points ``CRASH_POINTS`` names, read in
``crash_point`` only.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import json
import os
import signal
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from imgrec.contract import layout, metadata, shard_check, version_ref
from imgrec.console.errors import BuildFailed, UserError
from imgrec.storage import leases, retries, storage
from imgrec.storage.storage import Storage


# Objects copied at once where each copy is a round trip (gs://).
THREADS = 8

# Test hooks: the named point ends the process at once, as a SIGKILL would (IMGREC_CRASH_AT, exit status
# 137), or stops it until a SIGCONT (IMGREC_PAUSE_AT). Nothing else reads them.
CRASH_AT = 'IMGREC_CRASH_AT'
PAUSE_AT = 'IMGREC_PAUSE_AT'
CRASH_POINTS = (
    'metadata:after_files',        # the metadata files are in the staging folder, the report is not
    'publish:before_promote',      # the staging folder is complete (dataset.json in it); nothing moved
    'promote:after_rename',        # local: the version is published, LATEST not moved
    'promote:after_copy',          # gs://: every object but dataset.json copied to the version folder
    'promote:after_dataset_json',  # gs://: the version is published; the staging objects are all still there
    'promote:mid_cleanup',         # gs://: half the staging objects deleted
    'publish:after_latest',        # LATEST names the new version; the build lease is not yet released
    'prune:after_unpublish',       # a pruned version's dataset.json is gone, every other file still there
    'prune:mid_delete',            # half a pruned version's files deleted
)
LOCAL_ONLY = ('promote:after_rename',)
GCS_ONLY = ('promote:after_copy', 'promote:after_dataset_json', 'promote:mid_cleanup')


def crash_point(name: str) -> None:
    """Where the test hooks act (CRASH_POINTS names every call)."""
    if os.environ.get(CRASH_AT) == name:
        os._exit(137)  # pylint: disable=protected-access  # no cleanup, no finally: as a SIGKILL
    if os.environ.get(PAUSE_AT) == name:
        os.kill(os.getpid(), signal.SIGSTOP)


@dataclasses.dataclass(frozen=True)
class Latest:
    """What LATEST held when the build started: the version name (None when absent) and, on gs://, the
    object's generation (0 when absent)."""
    version: str | None = None
    generation: int | None = 0


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


@dataclasses.dataclass(frozen=True)
class Accounting:
    """What the accounting step found (every listed image written, quarantined or a duplicate), for the
    step that writes the metadata: the shard writers' stats in (split, index) order, the counts per split
    and in total, the quarantined and duplicate inputs (sorted), and the job's tallies."""
    shard_stats: tuple[Mapping[str, Any], ...]
    per_split: Mapping[str, Mapping[str, int]]
    totals: Mapping[str, int]
    rejected: tuple[Any, ...]
    duplicates: tuple[Any, ...]
    ignored: int = 0
    decoded: int = 0
    upscaled: int = 0


@dataclasses.dataclass(frozen=True)
class Publication:
    """What one build publishes, handed from step to step (``imgrec.transforms.publish`` runs the steps).

    ``output``: the output folder and its storage, as the job built it (its retry policy and options), which
    every step's I/O goes through. ``unchanged``: nothing changed, nothing to publish (the staging folder goes, LATEST stays, pruning
    still runs). ``accounting``: what the accounting step found, for the step that writes the metadata;
    ``document`` is the version's dataset.json and ``dataset_json`` its bytes, once written. The
    promotion sets ``earlier_run`` when an earlier run of the same build had published the version.
    """
    output: 'Output'
    version: str
    staging_dir: str
    previous: Latest
    keep_versions: int | None = None
    unchanged: bool = False
    accounting: Accounting | None = None
    document: Mapping[str, Any] | None = None
    dataset_json: bytes | None = None
    earlier_run: bool = False
    retention: Retention | None = None

    @property
    def version_dir(self) -> str:
        return self.output.version_dir(self.version)

    @property
    def storage(self) -> Storage:
        """The output's storage, through which every step's I/O goes."""
        return self.output.storage


def _name(path: str) -> str:
    return path.rstrip('/').rsplit('/', 1)[-1]


# -- lease I/O on the build's side ------------------------------------------------------------------------

def lease_files(output: str, files: Storage | None = None) -> Storage:
    """The lease I/O for ``output``: its storage (a ``leases.LeaseFiles``), ``files`` when given."""
    return storage.given_or_default(output, files)


@contextlib.contextmanager
def build_lease(output: str, staging_dir: str, detached: bool = False,
                files: Storage | None = None) -> Iterator[leases.Lease]:
    """The build's lease on its staging folder, taken before anything is written there and renewed by a
    heartbeat thread until the block ends, then released. ``detached`` (a job nobody waits for): written
    once for ``leases.DETACHED_TTL_S``, not renewed; the job's publication step releases it."""
    name = _name(staging_dir)
    lease = leases.Lease(lease_files(output, files), output, layout.BUILD_LEASE, name,
                         layout.staging_build_id(name), ttl=leases.DETACHED_TTL_S if detached else leases.TTL_S,
                         detached=detached)
    lease.acquire()
    if detached:
        yield lease
        return
    with lease.held():
        yield lease


def _own_lease(output: str, staging_dir: str, files: Storage | None) -> leases.Lease:
    """The build lease of ``staging_dir``, as its build holds it (its id is the build's)."""
    name = _name(staging_dir)
    return leases.Lease(lease_files(output, files), output, layout.BUILD_LEASE, name, layout.staging_build_id(name))


def _check_lease(output: str, staging_dir: str, files: Storage | None) -> None:
    """Refuses to go on once the build's lease is no longer its own: a cleanup took it over after it lapsed,
    and may be deleting the staging folder."""
    lease = _own_lease(output, staging_dir, files)
    if not lease.holds():
        raise BuildFailed(f'the staging folder {staging_dir} is no longer this build\'s: its lease {lease.path} '
                          f'lapsed (the build was paused or cut off for over {leases.TTL_S:.0f} s) and a cleanup '
                          f'took it over; nothing was published')


def release_build_lease(output: str, staging_dir: str, files: Storage | None = None) -> None:
    """Deletes the build's lease if it is still its own (a no-op when the launcher already did)."""
    _own_lease(output, staging_dir, files).release()


# -- LATEST -----------------------------------------------------------------------------------------------

def read_latest(output: str, files: Storage | None = None) -> Latest:
    """LATEST of ``output`` as a ``Latest`` (no version when there is no LATEST); transient errors are
    retried under the storage's policy. A LATEST that names no plain version folder (empty, a staging name,
    ``../elsewhere``) raises ``imgrec.contract.version_ref.VersionError``, by the contract's one rule set."""
    path = layout.join(output, layout.LATEST)
    try:
        found = storage.given_or_default(path, files).read_versioned(path)
    except IsADirectoryError as error:
        raise version_ref.unreadable(path, error) from None
    if found is None:
        return Latest()
    return Latest(version_ref.latest_name(found.data, path), found.generation)


def _latest_version(output: str, files: Storage | None) -> str | None:
    """What LATEST names now; None when nothing (or nothing readable, which protects nothing)."""
    try:
        return read_latest(output, files).version
    except version_ref.VersionError:
        return None


def _moved_by_another(output: str, expected: Latest, found: Latest) -> BuildFailed:
    was = expected.version or 'nothing'
    return BuildFailed(f'LATEST of {output} changed during the build (it named {was}, now '
                       f'{found.version or "nothing"}): another build published first; this version was '
                       f'left unpublished')


def replace_latest(output: str, version: str, expected: Latest, files: Storage | None = None) -> None:
    """Points LATEST at ``version`` if it is still as ``expected`` (a Latest: the same generation), or names
    ``version`` already (a retry); else raises BuildFailed. Locally under the output folder's lock."""
    path = layout.join(output, layout.LATEST)
    files = storage.given_or_default(output, files)
    with files.locked(output):
        found = read_latest(output, files)
        if found.version == version:
            return
        if found.version != expected.version:
            raise _moved_by_another(output, expected, found)
        try:
            files.write(path, f'{version}\n'.encode('utf-8'), if_generation=expected.generation)
        except storage.Conflict:
            raise _moved_by_another(output, expected, read_latest(output, files)) from None


# -- files and folders ------------------------------------------------------------------------------------

def _objects(folder: str, files: Storage | None) -> dict[str, int]:
    """{name relative to ``folder``: size} of every file below it."""
    prefix = folder.rstrip('/') + '/'
    return {entry.path[len(prefix):]: entry.size for entry in storage.given_or_default(folder, files).list(folder)}


def _each(function: Callable[[str], Any], items: Sequence[str]) -> None:
    """``function`` on every item, several at a time: on gs:// each call is a round trip."""
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        retries.counted_map(pool, function, items)


def delete_tree(folder: str, files: Storage | None = None) -> None:
    """Deletes ``folder`` and everything below it, if it exists."""
    storage.given_or_default(folder, files).delete_tree(folder)


def _delete_in_halves(folder: str, step: str, files: Storage | None) -> None:
    """Deletes everything below ``folder``, ``step`` (a test hook) half-way through."""
    files = storage.given_or_default(folder, files)
    paths = [entry.path for entry in files.list(folder)]
    half = len(paths) // 2
    _each(files.delete, paths[:half])
    crash_point(step)
    _each(files.delete, paths[half:])
    files.delete_tree(folder)  # what is left: local folders


def _read(path: str, files: Storage | None) -> bytes | None:
    """The file's bytes, or None when there is none."""
    found = storage.given_or_default(path, files).read_versioned(path)
    return None if found is None else found.data


# -- the steps: promote, move LATEST, prune ---------------------------------------------------------------

def _same_build(published: Mapping[str, Any], built: Mapping[str, Any]) -> bool:
    """Whether a published dataset.json came from a run of the same build as ``built`` (a dataset.json, or
    ``BuildConfig.recorded()``): ``metadata.identity``, the one rule for it (the output aside: an output
    folder may have been copied or moved)."""
    return metadata.identity(published) == metadata.identity(built)


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
    data = _read(layout.join(publication.version_dir, layout.DATASET_JSON), publication.storage)
    if data is None:
        return None
    if data == publication.dataset_json:
        return THIS_BUILD
    try:
        recorded = json.loads(data)
    except ValueError:
        recorded = {}
    if _same_build(recorded, publication.document) and \
            _latest_version(publication.output.root, publication.storage) == publication.version:
        if _nothing_new_since(publication.document, publication.version):
            return EARLIER_RUN
        raise BuildFailed(f'version {publication.version} already exists in {publication.output.root} (an earlier run '
                          f'of this build published it) and images changed since: pass another --version')
    raise BuildFailed(f'version folder {publication.version_dir} was published by another build meanwhile')


def _check_promotion(files: Storage, publication: Publication, listed: Mapping[str, int]) -> None:
    """Everything that must hold before the staging folder (its files ``listed``) becomes the version; then
    removes an unpublished folder of that name (what a killed promotion or pruning left). Locally, runs
    under the lock."""
    output, version, staging_dir = publication.output.root, publication.version, publication.staging_dir
    assert publication.document is not None
    _check_lease(output, staging_dir, files)
    prefix = staging_dir.rstrip('/') + '/'
    problems = shard_check.shard_problems(publication.document, staging_dir,
                                          lambda path: listed.get(path[len(prefix):]))
    if problems:
        more = f' (and {len(problems) - 1} more)' if len(problems) > 1 else ''
        raise BuildFailed(f'the staging folder lost files before publication: {problems[0]}{more}; nothing was '
                          f'published')
    if files.exists(layout.join(publication.version_dir, layout.DATASET_JSON)):
        raise BuildFailed(f'version folder {publication.version_dir} was published by another build meanwhile')
    own = _own_lease(output, staging_dir, files).path
    others = leases.live(leases.read_all(lease_files(output, files), output), exclude={own})
    if version in others.building or version in others.pruning:
        raise BuildFailed(f'another build is writing or deleting version {version} in {output} now (see '
                          f'{leases.folder(output)}); this version was left unpublished: pass another --version')
    files.delete_tree(publication.version_dir)


def _promote_by_rename(publication: Publication) -> None:
    """Where a folder rename is atomic (locally): one rename, under the lock."""
    files = publication.storage
    assert publication.document is not None
    with files.locked(publication.output.root):
        listed = _objects(publication.staging_dir, files)
        _check_promotion(files, publication, listed)
        os.rename(publication.staging_dir, publication.version_dir)
    crash_point('promote:after_rename')


def _promote_by_copy(publication: Publication) -> None:
    """Where there are no folders (gs://): every object but dataset.json copied and the copies checked, then
    dataset.json, last; then the staging objects deleted."""
    output, staging_dir, version_dir, files = (publication.output.root, publication.staging_dir,
                                               publication.version_dir, publication.storage)
    listed = _objects(staging_dir, files)
    _check_promotion(files, publication, listed)
    rest = sorted(name for name in listed if name != layout.DATASET_JSON)
    marker = layout.join(version_dir, layout.DATASET_JSON)
    try:
        _each(lambda name: files.copy(layout.join(staging_dir, name), layout.join(version_dir, name)), rest)
        crash_point('promote:after_copy')
        copied = _objects(version_dir, files)
        missing = [name for name in rest if name not in copied]
        if missing:
            raise BuildFailed(f'{layout.join(version_dir, missing[0])} is missing after the copy; this version was '
                              f'left unpublished')
        _check_lease(output, staging_dir, files)  # once more, just before the version is published
        if files.exists(marker):
            raise BuildFailed(f'version folder {version_dir} was published by another build meanwhile')
        files.copy(layout.join(staging_dir, layout.DATASET_JSON), marker)  # last: now the version is published
    except BuildFailed:
        with contextlib.suppress(Exception):  # what this promotion copied, unless published after all
            if not files.exists(marker):
                files.delete_tree(version_dir)
        raise
    crash_point('promote:after_dataset_json')
    staged = [layout.join(staging_dir, name) for name in sorted(listed)]
    half = len(staged) // 2
    _each(files.delete, staged[:half])
    crash_point('promote:mid_cleanup')
    _each(files.delete, staged[half:])


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


# -- published versions and pruning -----------------------------------------------------------------------

def published_versions(output: str, files: Storage | None = None) -> list[tuple[float, str]]:
    """[(published at, version)] of every published version below ``output``, oldest first.

    A version is published once its dataset.json is in place: the file's time is when it was, since it
    is written (locally) or copied (gs://) last.
    """
    files, found = storage.given_or_default(output, files), []
    for entry in files.list_level(output):
        version = _name(entry.path)
        if entry.is_folder and not version_ref.version_name_problem(version):  # never a staging or lease folder
            marker = files.stat(layout.join(output, version, layout.DATASET_JSON))
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
                 files: Storage | None = None) -> tuple[str, ...]:
    """The versions a build that publishes ``version`` (and moves LATEST to it) is to delete, oldest first,
    if no lease holds them."""
    if not keep_count:
        return ()
    versions = [version] + [name for _, name in reversed(published_versions(output, files)) if name != version]
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


def _prune(files: Storage, output: str, version: str, lease: leases.Lease) -> str:
    """Unpublishes, then deletes ``version`` under its prune ``lease`` unless a live lease holds it or
    LATEST names it. Returns DELETED, or why it was kept (``Kept.why``)."""
    version_dir = layout.join(output, version)
    marker = layout.join(version_dir, layout.DATASET_JSON)
    with files.locked(output):  # locally, a reader takes its lease under the same lock
        if _latest_version(output, files) == version:
            return 'LATEST'
        saved = _read(marker, files)
        holders = _holders(leases.read_all(files, output), version, lease.path) if saved is not None else []
        if holders:
            return ', '.join(holders)
        files.delete(marker)
    crash_point('prune:after_unpublish')
    if saved is not None:  # gs: no lock; locally, a reader that took its lease since found no dataset.json
        holders = _holders(leases.read_all(files, output), version, lease.path)
        if holders:
            # gs://: a reader took its lease while dataset.json was going (it reads it after taking the lease)
            with contextlib.suppress(storage.Conflict):
                files.write(marker, saved, if_generation=0)
            return ', '.join(holders)
    _delete_in_halves(version_dir, 'prune:mid_delete', files)
    return DELETED


def keep_newest(output: str, keep_count: int, files: Storage | None = None) -> Retention:
    """Deletes every published version but the ``keep_count`` newest (the one LATEST names among them),
    and but those a live lease holds (a reader's, a build's that is publishing it). Returns the
    ``Retention``: what was kept and why, and what was deleted."""
    files = lease_files(output, files)
    versions = [version for _, version in reversed(published_versions(output, files))]
    kept = to_keep(versions, _latest_version(output, files), keep_count)
    deleted = []
    for version in reversed(versions):  # oldest first
        if any(entry.version == version for entry in kept):
            continue
        with leases.Lease(files, output, layout.PRUNE_LEASE, version) as lease:
            outcome = _prune(files, output, version, lease)
        if outcome == DELETED:
            deleted.append(version)
        else:
            kept.append(Kept(version, outcome))
    return Retention(keep_count, tuple(kept), tuple(deleted))


# -- a failed build's staging folder ---------------------------------------------------------------------

# What a failed build's staging folder keeps for its user (the report and the lists it names); the rest (spill
# files, shards, partial shards, the index) is the bulk that filled the disk, and goes (``shed``).
FAILURE_KEEPS = frozenset((layout.REPORT_HTML, layout.QUARANTINE_JSONL, layout.DUPLICATES_JSONL,
                           layout.BUILD_FAILURE_JSON))


def staged_bytes(staging_dir: str, files: Storage | None = None) -> int:
    """The bytes below ``staging_dir`` now: the work a build had written when it stopped."""
    return sum(_objects(staging_dir, files).values())


def shed(staging_dir: str, files: Storage | None = None) -> int:
    """Deletes the bulk of a failed or stopped build's staging folder, keeping what explains the failure
    (``FAILURE_KEEPS``, at its top): so a build that ran out of space gives its space back, and the user keeps
    its report and quarantine list. Returns the bytes freed. Run again, it finds nothing more to delete."""
    files = storage.given_or_default(staging_dir, files)
    bulk = {name: size for name, size in _objects(staging_dir, files).items() if name not in FAILURE_KEEPS}

    def delete(path: str) -> None:
        local = files.local_path(path)
        if local is not None:  # a writer of the failed run may hold it open still: its blocks go now all the same
            with contextlib.suppress(OSError):
                os.truncate(local, 0)
        files.delete(path)
    _each(delete, [layout.join(staging_dir, name) for name in sorted(bulk)])
    for folder in sorted({name.split('/', 1)[0] for name in bulk if '/' in name}):
        files.delete_tree(layout.join(staging_dir, folder))  # local: the folders left empty (spill/)
    return sum(bulk.values())


# -- after a failure: what readers can see ----------------------------------------------------------------

UNPUBLISHED, LATEST_NAMES_IT, LATEST_MOVED_NOW, PUBLISHED_NOT_LATEST, SUPERSEDED = (
    'unpublished', 'latest', 'moved', 'published', 'superseded')


def promoted_by(output: str, version: str, created: str, files: Storage | None = None) -> bool:
    """Whether ``OUT/<version>/dataset.json`` is the one the build that started at ``created`` wrote: that build
    promoted the version, and readers can see it by name."""
    data = _read(layout.join(output, version, layout.DATASET_JSON), files)
    try:
        return data is not None and json.loads(data).get('created') == created
    except ValueError:
        return False


def state_after_failure(output: str, version: str, created: str, files: Storage | None = None) -> str:
    """What a build that failed (or stopped) left readers: UNPUBLISHED (nothing of it is visible), LATEST_NAMES_IT
    (it published, and LATEST moved: only a later step failed), LATEST_MOVED_NOW (promoted, LATEST not moved by the
    build, moved now as the build would have done: ``_finish_latest``'s rule), PUBLISHED_NOT_LATEST (promoted,
    and LATEST could not be moved now either: the disk is still full), or SUPERSEDED (promoted, but another build
    moved LATEST first: the build's own line says so): judged by ``OUT/<version>/dataset.json``
    being this build's (its ``created``)."""
    data = _read(layout.join(output, version, layout.DATASET_JSON), files)
    try:
        recorded = json.loads(data) if data is not None else {}
    except ValueError:
        recorded = {}
    if recorded.get('created') != created:
        return UNPUBLISHED
    latest = _latest_version(output, files)
    if latest == version:
        return LATEST_NAMES_IT
    if latest != (recorded.get('refresh') or {}).get('previous'):
        return SUPERSEDED  # another build moved LATEST first: this build lost the compare-and-swap
    with contextlib.suppress(Exception):  # the disk may still be full: then the rerun finishes it
        if _finish_latest(output, version, files):
            return LATEST_MOVED_NOW
    return PUBLISHED_NOT_LATEST


# -- cleanup before a build -------------------------------------------------------------------------------

def staging_folders(output: str, files: Storage | None = None) -> list[tuple[float, str]]:
    """[(last written, path)] of the staging folders below ``output``: a folder's own time counts too (a
    build killed before its first file was written leaves only folders)."""
    files, found = storage.given_or_default(output, files), []
    for entry in files.list_level(output):
        if entry.is_folder and layout.is_staging_name(_name(entry.path)):
            path = layout.join(output, _name(entry.path))
            found.append((max([entry.updated, *(listed.updated for listed in files.list(path))]), path))
    return sorted(found)


def _finish_latest(output: str, version: str, files: Storage | None) -> bool:
    """A dead build published ``version`` but did not move LATEST: moves it, as that build would have, if
    LATEST still names the version the build started from (dataset.json's ``refresh.previous``)."""
    data = _read(layout.join(output, version, layout.DATASET_JSON), files)
    try:
        started_from = json.loads(data or b'')['refresh']['previous']
    except (ValueError, KeyError, TypeError):
        return False
    try:
        latest = read_latest(output, files)
    except version_ref.VersionError:
        return False
    if latest.version == version:
        return False
    if latest.version != started_from:
        return False  # another build published since: the dead build's move would have failed too
    try:
        replace_latest(output, version, latest, files)
    except BuildFailed:
        return False  # moved meanwhile by a live build
    return True


def _finish_build(files: Storage, output: str, staging_name: str, lease: leases.Lease) -> str | None:
    """Finishes after a build that died: deletes its staging folder, and its version folder if that holds
    no dataset.json (a promotion cut short) and no live lease, nor LATEST, names it; a version it
    published whose LATEST it did not move gets LATEST now. Returns that version, if so."""
    delete_tree(layout.join(output, staging_name), files)
    version = layout.staging_version(staging_name)
    version_dir = layout.join(output, version)
    with files.locked(output):  # locally, a promotion renames under the same lock
        if files.exists(layout.join(version_dir, layout.DATASET_JSON)):
            return version if _finish_latest(output, version, files) else None
        if _latest_version(output, files) == version:
            return None
        if version in leases.live(leases.read_all(files, output), exclude={lease.path}).versions:
            return None
        delete_tree(version_dir, files)
    return None


# A staging folder that no lease names and that holds no failure report was left by a build stopped by Ctrl-C or
# SIGTERM, or is a template job's (which takes no lease) still running: its bulk is shed only once nothing was
# written to it for this long.
QUIET_BEFORE_SHED_S = 3600.0


def _finished(folder: str, last_written: float, files: Storage) -> bool:
    """Whether the unleased staging ``folder`` is a build's that ended: it holds the mark a failed build leaves
    with its report (``layout.BUILD_FAILURE_JSON``; a report.html alone is also every build's before promotion),
    or nothing was written to it for QUIET_BEFORE_SHED_S."""
    return (files.exists(layout.join(folder, layout.BUILD_FAILURE_JSON))
            or time.time() - last_written > QUIET_BEFORE_SHED_S)


@dataclasses.dataclass(frozen=True)
class Tidied:
    """What the cleanup before a build did: staging folders removed, versions whose interrupted pruning it
    finished, and versions whose interrupted publication it finished (LATEST moved to them)."""
    staging_removed: int
    pruned: tuple[str, ...] = ()
    published: tuple[str, ...] = ()


def tidy(output: str, clean: bool = False, files: Storage | None = None) -> Tidied:
    """Before a build: finishes the jobs of dead leases (a killed build's staging folder and half-promoted
    version, or its published version that LATEST does not name yet; an interrupted pruning), then
    removes the staging folders that no lease names, which failed builds (or builds older than leases)
    left: those last written before the newest version was published, or all of them with ``clean``.
    Never anything a live lease names. Returns ``Tidied``."""
    files = lease_files(output, files)
    staging = staging_folders(output, files)  # before the leases: a build takes its lease before it writes
    found = leases.read_all(files, output)
    named = {entry.lease['target'] for entry in found if entry.kind == layout.BUILD_LEASE and entry.lease}
    removed, pruned, published = 0, [], []
    for entry in found:
        if leases.is_live(entry.lease):
            continue
        lease = leases.take_over(files, output, entry)
        if lease is None:
            continue
        with lease.held():
            if entry.kind == layout.BUILD_LEASE and lease.target and layout.is_staging_name(lease.target):
                finished = _finish_build(files, output, lease.target, lease)
                removed += 1
                if finished:
                    published.append(finished)
            elif entry.kind == layout.PRUNE_LEASE and lease.target and not version_ref.version_name_problem(
                    lease.target):
                if _prune(files, output, lease.target, lease) == DELETED:
                    pruned.append(lease.target)
    published_at = max((when for when, _ in published_versions(output, files)), default=None)
    for last_written, folder in staging:
        if _name(folder) in named:
            continue
        if clean or (published_at is not None and last_written < published_at):
            delete_tree(folder, files)
            removed += 1
        elif _finished(folder, last_written, files):  # kept for its report: its bulk goes, so a full disk gets
            shed(folder, files)                          # its space back
    if found:
        with files.locked(output):
            files.remove_empty_folder(leases.folder(output))
    return Tidied(removed, tuple(pruned), tuple(published))


def refuse_published(output: str, version: str, recorded: Mapping[str, Any],
                     files: Storage | None = None) -> bool:
    """Before a build, after ``tidy``: refuses a --version that is published already, unless it is the same
    build (``recorded``: ``BuildConfig.recorded()``) and LATEST names it: a rerun of the build that published
    it. That rerun refreshes the version; it ends with nothing published when it finds nothing new, and fails
    at promotion (``published_by``) when it does.

    A version of the same options that LATEST does not name yet, while LATEST still names the version that
    build started from and no live build lease names it, is a publication that failed after promotion (the
    disk filled as LATEST was written): LATEST is moved to it now, as that build would have, and True is
    returned (the caller says so)."""
    data = _read(layout.join(output, version, layout.DATASET_JSON), files)
    if data is None:
        return False
    try:
        published = json.loads(data)
    except ValueError:
        published = {}
    if not _same_build(published, recorded):
        raise UserError(f'version {version} already exists in {output}; pass another --version')
    if _latest_version(output, files) == version:
        return False
    building = leases.live(leases.read_all(lease_files(output, files), output)).building
    if version not in building and _finish_latest(output, version, files):
        return True
    raise UserError(f'version {version} already exists in {output}; pass another --version')


# -- an output as one object ------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Output:
    """An output folder, ``root`` (a local folder or gs:// prefix), and ``storage``, the storage that reaches
    it: built once, before the job, with the job's credentials (``imgrec.pipelines.launcher.prepare``), and
    carried on the run's facts and its ``Publication``, so no step rebuilds the output's storage or passes
    its path and storage apart. Each method is a step of the protocol above on this output."""
    root: str
    storage: Storage

    def version_dir(self, version: str) -> str:
        return layout.join(self.root, version)

    def staging(self, version: str, build_id: str) -> str:
        """The staging folder a build of ``version`` with ``build_id`` writes before it publishes."""
        return layout.join(self.root, layout.staging_name(version, build_id))

    def latest(self) -> Latest:
        """What LATEST names now (``read_latest``)."""
        return read_latest(self.root, self.storage)

    def replace_latest(self, version: str, expected: Latest) -> None:
        """Points LATEST at ``version`` if it is still as ``expected`` (``replace_latest``)."""
        replace_latest(self.root, version, expected, self.storage)

    def versions(self) -> list[tuple[float, str]]:
        """[(published at, version)], oldest first (``published_versions``)."""
        return published_versions(self.root, self.storage)

    @contextlib.contextmanager
    def lease(self, staging_dir: str, detached: bool = False) -> Iterator[leases.Lease]:
        """A build's lease on its staging folder, held for the block (``build_lease``)."""
        with build_lease(self.root, staging_dir, detached, self.storage) as lease:
            yield lease

    def tidy(self, clean: bool = False) -> Tidied:
        """Before a build: what killed builds and prunings left, finished or removed (``tidy``)."""
        return tidy(self.root, clean, self.storage)

    def keep_newest(self, count: int) -> Retention:
        """Deletes all but the ``count`` newest versions and those a lease holds (``keep_newest``)."""
        return keep_newest(self.root, count, self.storage)
