"""The publication protocol (docs/publication.md): the one module that promotes, prunes or deletes a
version or a staging folder, and moves LATEST.

- A build writes its version into its staging folder, which its build lease names (``imgrec_storage.leases``).
- ``promote``: the staging folder becomes ``<version>``, only while the build still holds its lease and
  only if every shard ``dataset.json`` lists is there. Locally: one rename, under ``flock`` on the
  output folder. On ``gs://``: every object but ``dataset.json`` is copied and the copies checked, then
  ``dataset.json``, the completion marker, last; then the staging objects are deleted. A version folder
  without ``dataset.json`` was never published (or is being pruned): a promotion of that name replaces it.
- ``replace_latest``: LATEST moves only if it still names the version the build started from
  (compare-and-swap): locally under the lock, on ``gs://`` with a generation precondition.
- ``prune_versions``: a version no reader leases is unpublished first (``dataset.json`` deleted), then
  deleted, under a prune lease.
- ``tidy`` (before every build): finishes the jobs of dead leases (a killed build's staging folder and
  half-promoted version, an interrupted pruning) and removes staging folders failed builds left.

``IMGREC_CRASH_AT`` and ``IMGREC_PAUSE_AT`` are test hooks, read in ``_step`` only.
"""
import collections
import concurrent.futures
import contextlib
import os
import shutil
import signal
import uuid

from apache_beam.io.filesystems import FileSystems

from contract import layout, shard_check, version_ref
from imgrec_console.errors import BuildFailed
from imgrec_storage import fileio, gcs, leases, retries, storage

# Objects copied or deleted at once on gs://.
THREADS = 8

# Test hooks: the named step ends the process at once, as a SIGKILL would (IMGREC_CRASH_AT, exit status
# 137), or stops it until a SIGCONT (IMGREC_PAUSE_AT). Nothing else reads them.
CRASH_AT = 'IMGREC_CRASH_AT'
PAUSE_AT = 'IMGREC_PAUSE_AT'
STEPS = (
    'publish:before_promote',      # the staging folder is complete (dataset.json in it); nothing moved
    'promote:after_copy',          # gs://: every object but dataset.json copied to the version folder
    'promote:after_dataset_json',  # gs://: the version is published; the staging objects are all still there
    'promote:mid_cleanup',         # gs://: half the staging objects deleted
    'publish:after_latest',        # LATEST names the new version; the build lease is not yet released
    'prune:after_unpublish',       # a pruned version's dataset.json is gone, every other file still there
    'prune:mid_delete',            # half a pruned version's files deleted
)


def _step(name):
    """Where the test hooks act (STEPS names every call)."""
    if os.environ.get(CRASH_AT) == name:
        os._exit(137)  # pylint: disable=protected-access  # no cleanup, no finally: as a SIGKILL
    if os.environ.get(PAUSE_AT) == name:
        os.kill(os.getpid(), signal.SIGSTOP)


class Latest:
    """What LATEST held when the build started: the version name (None when absent) and, on gs://, the
    object's generation (0 when absent)."""

    def __init__(self, version=None, generation=0):
        self.version = version
        self.generation = generation

    def __eq__(self, other):
        return isinstance(other, Latest) and (self.version, self.generation) == (other.version, other.generation)

    def __repr__(self):
        return f'Latest({self.version!r}, {self.generation!r})'


def _is_local(path):
    return FileSystems.get_scheme(path) is None


def _name(path):
    return path.rstrip('/').rsplit('/', 1)[-1]


def _parent(path):
    return path.rstrip('/').rsplit('/', 1)[0]


# -- lease I/O on the build's side ------------------------------------------------------------------------

def lease_files(output, policy=None):
    """The lease I/O for ``output``: its storage."""
    return storage.storage_for(output, policy)


@contextlib.contextmanager
def build_lease(output, staging_dir, detached=False, policy=None):
    """The build's lease on its staging folder, taken before anything is written there and renewed by a
    heartbeat thread until the block ends, then released. ``detached`` (a job nobody waits for): written
    once for ``leases.DETACHED_TTL_S``, not renewed; the job's publication step releases it."""
    name = _name(staging_dir)
    lease = leases.Lease(lease_files(output, policy), output, layout.BUILD_LEASE, name,
                         layout.staging_build_id(name), ttl=leases.DETACHED_TTL_S if detached else leases.TTL_S,
                         detached=detached)
    lease.acquire()
    if detached:
        yield lease
        return
    with lease.held():
        yield lease


def _own_lease(output, staging_dir, policy):
    """The build lease of ``staging_dir``, as its build holds it (its id is the build's)."""
    name = _name(staging_dir)
    return leases.Lease(lease_files(output, policy), output, layout.BUILD_LEASE, name, layout.staging_build_id(name))


def _check_lease(output, staging_dir, policy):
    """Refuses to go on once the build's lease is no longer its own: a cleanup took it over after it lapsed,
    and may be deleting the staging folder."""
    lease = _own_lease(output, staging_dir, policy)
    if not lease.holds():
        raise BuildFailed(f'the staging folder {staging_dir} is no longer this build\'s: its lease {lease.path} '
                          f'lapsed (the build was paused or cut off for over {leases.TTL_S:.0f} s) and a cleanup '
                          f'took it over; nothing was published')


def release_build_lease(output, staging_dir, policy=None):
    """Deletes the build's lease if it is still its own (a no-op when the launcher already did)."""
    _own_lease(output, staging_dir, policy).release()


# -- LATEST -----------------------------------------------------------------------------------------------

def read_latest(output, policy=None):
    """LATEST of ``output`` as a ``Latest`` (no version when there is no LATEST); transient errors are
    retried under ``policy``. A LATEST that names no plain version folder (empty, a staging name,
    ``../elsewhere``) raises ``contract.version_ref.VersionError``, by the contract's one rule set."""
    path = layout.join(output, layout.LATEST)
    if _is_local(path):
        try:
            with open(path, 'rb') as stream:
                data, generation = stream.read(), 0
        except FileNotFoundError:
            return Latest()
        except IsADirectoryError as error:
            raise version_ref.unreadable(path, error) from None
    else:
        data, generation = retries.call(lambda: gcs.download_with_generation(path), retries.READ, path, policy)
        if data is None:
            return Latest()
    return Latest(version_ref.latest_name(data, path), generation)


def _latest_version(output, policy):
    """What LATEST names now; None when nothing (or nothing readable, which protects nothing)."""
    try:
        return read_latest(output, policy).version
    except version_ref.VersionError:
        return None


def _moved_by_another(output, expected, found):
    was = expected.version or 'nothing'
    return BuildFailed(f'LATEST of {output} changed during the build (it named {was}, now '
                       f'{found.version or "nothing"}): another build published first; this version was '
                       f'left unpublished')


def replace_latest(output, version, expected, policy=None):
    """Points LATEST at ``version`` if it still holds ``expected`` (a Latest); else raises BuildFailed."""
    path = layout.join(output, layout.LATEST)
    content = f'{version}\n'.encode('utf-8')
    if _is_local(path):
        with storage.storage_for(output).locked(output):
            found = read_latest(output)
            if found.version != expected.version:
                raise _moved_by_another(output, expected, found)
            temporary = f'{path}.tmp-{uuid.uuid4().hex}'
            with open(temporary, 'wb') as stream:
                stream.write(content)
                stream.flush()
                os.fsync(stream.fileno())
            os.replace(temporary, path)
        return

    def attempt():
        try:
            gcs.upload_if_generation(path, content, expected.generation)
        except storage.Conflict:
            found = read_latest(output, policy)
            if found.version != version:  # else an earlier attempt of ours landed, and its answer was lost
                raise _moved_by_another(output, expected, found) from None

    fileio.retried('write', path, attempt, policy)


# -- files and folders ------------------------------------------------------------------------------------

def _objects(folder):
    """Every object (path, size) below the gs:// (or other remote) ``folder``, sorted."""
    prefix = gcs.as_folder(folder)
    return sorted((m.path, m.size_in_bytes) for m in FileSystems.match([layout.join(folder, '**')])[0].metadata_list
                  if m.path.startswith(prefix))


def _each(function, items):
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        retries.counted_map(pool, function, items)


def delete_tree(folder, policy=None):
    """Deletes ``folder`` and everything below it, if it exists."""
    if _is_local(folder):
        shutil.rmtree(folder, ignore_errors=True)
    else:
        _each(lambda path: fileio.delete(path, policy), [path for path, _ in _objects(folder)])


def _delete_in_halves(folder, step, policy):
    """Deletes everything below ``folder``, ``step`` (a test hook) half-way through."""
    if _is_local(folder):
        paths = sorted(os.path.join(directory, name) for directory, _, names in os.walk(folder) for name in names)
        half = len(paths) // 2
        for path in paths[:half]:
            os.remove(path)
        _step(step)
        for path in paths[half:]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)
        shutil.rmtree(folder, ignore_errors=True)
        return
    paths = [path for path, _ in _objects(folder)]
    half = len(paths) // 2
    _each(lambda path: fileio.delete(path, policy), paths[:half])
    _step(step)
    _each(lambda path: fileio.delete(path, policy), paths[half:])


# -- promotion --------------------------------------------------------------------------------------------

def _check_promotion(files, output, version, staging_dir, document, size_of, policy):
    """Everything that must hold before ``staging_dir`` becomes version ``version``; then removes an
    unpublished folder of that name (what a killed promotion or pruning left). Locally, runs under the lock."""
    _check_lease(output, staging_dir, policy)
    problems = shard_check.shard_problems(document, staging_dir, size_of)
    if problems:
        more = f' (and {len(problems) - 1} more)' if len(problems) > 1 else ''
        raise BuildFailed(f'the staging folder lost files before publication: {problems[0]}{more}; nothing was '
                          f'published')
    version_dir = layout.join(output, version)
    if files.exists(layout.join(version_dir, layout.DATASET_JSON)):
        raise BuildFailed(f'version folder {version_dir} was published by another build meanwhile')
    own = _own_lease(output, staging_dir, policy).path
    others = leases.live(leases.read_all(files, output), exclude={own})
    if version in others.building or version in others.pruning:
        raise BuildFailed(f'another build is writing or deleting version {version} in {output} now (see '
                          f'{leases.folder(output)}); this version was left unpublished: pass another --version')
    delete_tree(version_dir, policy)


def promote(staging_dir, version_dir, document, policy=None):
    """Makes the finished staging folder version ``version_dir`` (``document``: its dataset.json)."""
    output, version = _parent(version_dir), _name(version_dir)
    files = lease_files(output, policy)
    if _is_local(staging_dir):
        def size_of(path):
            return os.path.getsize(path) if os.path.isfile(path) else None

        with files.locked(output):
            _check_promotion(files, output, version, staging_dir, document, size_of, policy)
            os.rename(staging_dir, version_dir)
        return
    prefix = gcs.as_folder(staging_dir)
    listed = {path[len(prefix):]: size for path, size in _objects(staging_dir)}
    _check_promotion(files, output, version, staging_dir, document,
                     lambda path: listed.get(path[len(prefix):]), policy)
    rest = sorted(name for name in listed if name != layout.DATASET_JSON)
    marker = layout.join(version_dir, layout.DATASET_JSON)
    try:
        _each(lambda name: fileio.copy(prefix + name, layout.join(version_dir, name), policy), rest)
        _step('promote:after_copy')
        copied = {path[len(gcs.as_folder(version_dir)):] for path, _ in _objects(version_dir)}
        missing = [name for name in rest if name not in copied]
        if missing:
            raise BuildFailed(f'{layout.join(version_dir, missing[0])} is missing after the copy; this version was '
                              f'left unpublished')
        _check_lease(output, staging_dir, policy)  # once more, just before the version is published
        if files.exists(marker):
            raise BuildFailed(f'version folder {version_dir} was published by another build meanwhile')
        fileio.copy(prefix + layout.DATASET_JSON, marker, policy)  # last: now the version is published
    except BuildFailed:
        with contextlib.suppress(Exception):  # what this promotion copied, unless published after all
            if not files.exists(marker):
                delete_tree(version_dir, policy)
        raise
    _step('promote:after_dataset_json')
    staged = [prefix + name for name in sorted(listed)]
    half = len(staged) // 2
    _each(lambda path: fileio.delete(path, policy), staged[:half])
    _step('promote:mid_cleanup')
    _each(lambda path: fileio.delete(path, policy), staged[half:])


Pruned = collections.namedtuple('Pruned', 'deleted in_use')


def publish(output, version, staging_dir, document, previous, keep_versions=None, policy=None):
    """Publishes the finished staging folder as ``version`` and moves LATEST to it (if it still names
    ``previous``); releases the build lease; then prunes to ``keep_versions``. Returns ``Pruned``."""
    _step('publish:before_promote')
    delete_tree(layout.join(staging_dir, layout.SPILL_DIR), policy)
    promote(staging_dir, layout.join(output, version), document, policy)
    replace_latest(output, version, previous, policy)
    _step('publish:after_latest')
    release_build_lease(output, staging_dir, policy)
    if not keep_versions:
        return Pruned((), ())
    return prune_versions(output, keep_versions, keep={version, previous.version}, policy=policy)


def discard(output, staging_dir, policy=None):
    """Deletes a staging folder its build will not publish (nothing changed), and releases its lease."""
    delete_tree(staging_dir, policy)
    release_build_lease(output, staging_dir, policy)


# -- published versions and pruning -----------------------------------------------------------------------

def published_versions(output):
    """[(published at, version)] of every published version below ``output``, oldest first.

    A version is published once its dataset.json is in place: the file's time (from the listing, no
    read) is when it was, since it is written (locally) or copied (gs://) last.
    """
    found = []
    for match in FileSystems.match([layout.join(output, '*', layout.DATASET_JSON)])[0].metadata_list:
        version = match.path.rstrip('/').split('/')[-2]
        if not version_ref.version_name_problem(version):  # never a staging folder or the lease folder
            found.append((match.last_updated_in_seconds, version))
    return sorted(found)


DELETED, IN_USE, KEPT = 'deleted', 'in use', 'kept'


def _prune(files, output, version, lease, policy):
    """Unpublishes, then deletes ``version`` under its prune ``lease`` unless a reader holds a lease on it
    or LATEST names it. Returns DELETED, IN_USE (a reader's lease) or KEPT (LATEST names it)."""
    version_dir = layout.join(output, version)
    marker = layout.join(version_dir, layout.DATASET_JSON)
    local = _is_local(output)
    with files.locked(output):  # locally, a reader takes its lease under the same lock
        if _latest_version(output, policy) == version:
            return KEPT
        published = files.exists(marker)
        if published and version in leases.live(leases.read_all(files, output), exclude={lease.path}).reading:
            return IN_USE
        saved = fileio.read_bytes(marker, policy) if published and not local else None
        fileio.delete(marker, policy)
    _step('prune:after_unpublish')
    if saved is not None and version in leases.live(leases.read_all(files, output), exclude={lease.path}).reading:
        # gs://: a reader took its lease while dataset.json was going (it reads it after taking the lease)
        with contextlib.suppress(storage.Conflict):
            files.write(marker, saved, if_generation=0)
        return IN_USE
    _delete_in_halves(version_dir, 'prune:mid_delete', policy)
    return DELETED


def prune_versions(output, keep_count, keep=(), policy=None):
    """Deletes all but the ``keep_count`` newest published versions: never one named in ``keep``, nor one
    LATEST names, nor one a reader holds a lease on. Returns ``Pruned``: (versions deleted, versions kept
    because a reader uses them)."""
    files = lease_files(output, policy)
    versions = [version for _, version in published_versions(output)]
    deleted, in_use = [], []
    for version in versions[:max(0, len(versions) - keep_count)]:
        if version in keep:
            continue
        with leases.Lease(files, output, layout.PRUNE_LEASE, version) as lease:
            outcome = _prune(files, output, version, lease, policy)
        if outcome == DELETED:
            deleted.append(version)
        elif outcome == IN_USE:
            in_use.append(version)
    return Pruned(tuple(deleted), tuple(in_use))


# -- cleanup before a build -------------------------------------------------------------------------------

def _last_written_local(folder):
    """The newest modification time in ``folder``'s tree, folders included (a build killed before its
    first file was written leaves only folders)."""
    newest = os.path.getmtime(folder)
    for directory, names, files in os.walk(folder):
        for name in names + files:
            newest = max(newest, os.path.getmtime(os.path.join(directory, name)))
    return newest


def staging_folders(output):
    """[(last modified, path)] of the staging folders below ``output``."""
    if _is_local(output):
        if not os.path.isdir(output):
            return []
        return sorted((_last_written_local(os.path.join(output, name)), layout.join(output, name))
                      for name in os.listdir(output) if layout.is_staging_name(name))
    folders = {}
    for match in FileSystems.match([layout.join(output, f'*{layout.STAGING_MARK}*', '**')])[0].metadata_list:
        name = match.path[len(output.rstrip('/')) + 1:].split('/', 1)[0]
        if layout.is_staging_name(name):
            path = layout.join(output, name)
            folders[path] = max(folders.get(path, 0), match.last_updated_in_seconds)
    return sorted((when, path) for path, when in folders.items())


def _finish_build(files, output, staging_name, lease, policy):
    """Cleans up after a build that died: its staging folder, and its version folder if that holds no
    dataset.json (a promotion cut short) and no live lease, nor LATEST, names it."""
    delete_tree(layout.join(output, staging_name), policy)
    version = layout.staging_version(staging_name)
    version_dir = layout.join(output, version)
    with files.locked(output):  # locally, a promotion renames under the same lock
        if files.exists(layout.join(version_dir, layout.DATASET_JSON)) or _latest_version(output, policy) == version:
            return
        if version in leases.live(leases.read_all(files, output), exclude={lease.path}).versions:
            return
        delete_tree(version_dir, policy)


Tidied = collections.namedtuple('Tidied', 'staging_removed pruned')


def tidy(output, clean=False, policy=None):
    """Before a build: finishes the jobs of dead leases (a killed build's staging folder and half-promoted
    version; an interrupted pruning), then removes the staging folders that no lease names, which failed
    builds (or builds older than leases) left: those last written before the newest version was
    published, or all of them with ``clean``. Never anything a live lease names. Returns ``Tidied``."""
    files = lease_files(output, policy)
    staging = staging_folders(output)  # before the leases: a build takes its lease before it writes
    found = leases.read_all(files, output)
    named = {entry.lease['target'] for entry in found if entry.kind == layout.BUILD_LEASE and entry.lease}
    removed, pruned = 0, []
    for entry in found:
        if leases.is_live(entry.lease):
            continue
        lease = leases.take_over(files, output, entry)
        if lease is None:
            continue
        with lease.held():
            if entry.kind == layout.BUILD_LEASE and lease.target and layout.is_staging_name(lease.target):
                _finish_build(files, output, lease.target, lease, policy)
                removed += 1
            elif entry.kind == layout.PRUNE_LEASE and lease.target and not version_ref.version_name_problem(
                    lease.target):
                if _prune(files, output, lease.target, lease, policy) == DELETED:
                    pruned.append(lease.target)
    published_at = max((when for when, _ in published_versions(output)), default=None)
    for last_written, folder in staging:
        if _name(folder) in named:
            continue
        if clean or (published_at is not None and last_written < published_at):
            delete_tree(folder, policy)
            removed += 1
    if _is_local(output) and os.path.isdir(output):
        with files.locked(output):
            files.remove_empty_folder(leases.folder(output))
    return Tidied(removed, tuple(pruned))
