"""Publishing a version: the staging folder becomes ``<version>``, then LATEST moves to it, only if
LATEST still names the version the build started from (compare-and-swap).

- Locally, the staging folder is renamed (atomic), and LATEST is replaced under an exclusive lock on
  the output folder itself: read, compare, write a temporary file of a name unique to this writer,
  rename.
- On ``gs://``, the staging objects are copied to their final names and deleted, and LATEST is written
  with a generation precondition (``if_generation_match``: the generation read at the start, or 0 when
  there was none), so of two overlapping builds exactly one wins.
"""
import concurrent.futures
import contextlib
import fcntl
import os
import shutil
import uuid

from apache_beam.io.filesystems import FileSystems
from google.api_core import exceptions as gcs_exceptions

from contract import layout
from imgrec_console.errors import BuildFailed
from imgrec_storage import fileio, gcs, retries

# Objects copied or deleted at once on gs://.
THREADS = 8


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


def read_latest(output, policy=None):
    """LATEST of ``output`` as a ``Latest``; transient errors are retried under ``policy``."""
    path = layout.join(output, layout.LATEST)
    if _is_local(path):
        try:
            with open(path, encoding='utf-8') as stream:
                return Latest(stream.read().strip() or None)
        except FileNotFoundError:
            return Latest()
    data, generation = retries.call(lambda: gcs.download_with_generation(path), retries.READ, path, policy)
    return Latest(data.decode('utf-8').strip() or None, generation) if data is not None else Latest()


def _moved_by_another(output, expected, found):
    was = expected.version or 'nothing'
    return BuildFailed(f'LATEST of {output} changed during the build (it named {was}, now '
                       f'{found.version or "nothing"}): another build published first; this version was '
                       f'left unpublished')


@contextlib.contextmanager
def _locked(folder):
    """An exclusive lock on ``folder`` (flock on the folder itself: no lock file is left behind)."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # releases the lock


def replace_latest(output, version, expected, policy=None):
    """Points LATEST at ``version`` if it still holds ``expected`` (a Latest); else raises BuildFailed."""
    path = layout.join(output, layout.LATEST)
    content = f'{version}\n'.encode('utf-8')
    if _is_local(path):
        with _locked(output):
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
        except gcs_exceptions.PreconditionFailed:
            found = read_latest(output, policy)
            if found.version != version:  # else an earlier attempt of ours landed, and its answer was lost
                raise _moved_by_another(output, expected, found) from None

    fileio.retried('write', path, attempt, policy)


def _objects(folder):
    return sorted(m.path for m in FileSystems.match([layout.join(folder, '**')])[0].metadata_list)


def _each(function, items):
    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        retries.counted_map(pool, function, items)


def delete_tree(folder, policy=None):
    """Deletes ``folder`` and everything below it, if it exists."""
    if _is_local(folder):
        shutil.rmtree(folder, ignore_errors=True)
    else:
        _each(lambda path: fileio.delete(path, policy), _objects(folder))


def promote(staging_dir, version_dir, policy=None):
    """Moves the finished staging folder to its version name.

    A folder of that name without dataset.json is what an older, failed build left: it was never
    published, so it is replaced. A published one is refused (the pre-flight check saw none).
    """
    if FileSystems.exists(layout.join(version_dir, layout.DATASET_JSON)):
        raise BuildFailed(f'version folder {version_dir} was published by another build meanwhile')
    delete_tree(version_dir, policy)
    if _is_local(staging_dir):
        os.rename(staging_dir, version_dir)
        return
    sources = _objects(staging_dir)
    prefix = gcs.as_folder(staging_dir)
    _each(lambda source: fileio.copy(source, layout.join(version_dir, source[len(prefix):]), policy), sources)
    _each(lambda source: fileio.delete(source, policy), sources)


def published_versions(output):
    """[(published at, version)] of every published version below ``output``, oldest first.

    A version is published once its dataset.json is in place: the file's time (from the listing, no
    read) is when it was, since a build writes it last, just before the move.
    """
    found = []
    for match in FileSystems.match([layout.join(output, '*', layout.DATASET_JSON)])[0].metadata_list:
        version = match.path.rstrip('/').split('/')[-2]
        if not layout.is_staging_name(version):
            found.append((match.last_updated_in_seconds, version))
    return sorted(found)


def prune_versions(output, keep_count, keep=(), policy=None):
    """Deletes all but the ``keep_count`` newest published versions; never a version named in ``keep``."""
    versions = published_versions(output)
    for _, version in versions[:max(0, len(versions) - keep_count)]:
        if version not in keep:
            delete_tree(layout.join(output, version), policy)


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


def remove_staging(output, everything=False, policy=None):
    """Removes the staging folders failed or killed builds left: those last written before the newest
    version was published (a build still running writes newer files), or all with ``everything``.

    Returns how many were removed.
    """
    published_at = max((when for when, _ in published_versions(output)), default=None)
    removed = 0
    for last_written, folder in staging_folders(output):
        if everything or (published_at is not None and last_written < published_at):
            delete_tree(folder, policy)
            removed += 1
    return removed
