"""A build's staging folder (``<version>.incomplete-<build id>``), where it writes its version before it publishes,
and the build lease that names it: taken before anything is written there, checked before promotion, released
after LATEST moved (docs/publication.md)."""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from imgrec.console.errors import BuildFailed
from imgrec.contract import layout
from imgrec.storage import leases, storage as storage_lib
from imgrec.storage.folder_io import name_of, sizes
from imgrec.storage.storage import Storage


@contextlib.contextmanager
def build_lease(output: str, staging_dir: str, detached: bool = False,
                storage: Storage | None = None) -> Iterator[leases.Lease]:
    """The build's lease on its staging folder, taken before anything is written there and renewed by a
    heartbeat thread until the block ends, then released. ``detached`` (a job nobody waits for): written
    once for ``leases.DETACHED_TTL_S``, not renewed; the job's publication step releases it."""
    name = name_of(staging_dir)
    lease = leases.Lease(storage_lib.given_or_default(output, storage), output, layout.BUILD_LEASE, name,
                         layout.staging_build_id(name), ttl=leases.DETACHED_TTL_S if detached else leases.TTL_S,
                         detached=detached)
    lease.acquire()
    if detached:
        yield lease
        return
    with lease.held():
        yield lease


def own_lease(output: str, staging_dir: str, storage: Storage) -> leases.Lease:
    """The build lease of ``staging_dir``, as its build holds it (its id is the build's)."""
    name = name_of(staging_dir)
    return leases.Lease(storage, output, layout.BUILD_LEASE, name, layout.staging_build_id(name))


def check_lease(output: str, staging_dir: str, storage: Storage) -> None:
    """Refuses to go on once the build's lease is no longer its own: a cleanup took it over after it lapsed,
    and may be deleting the staging folder."""
    lease = own_lease(output, staging_dir, storage)
    if not lease.holds():
        raise BuildFailed(f'the staging folder {staging_dir} is no longer this build\'s: its lease {lease.path} '
                          f'lapsed (the build was paused or cut off for over {leases.TTL_S:.0f} s) and a cleanup '
                          f'took it over; nothing was published')


def release_build_lease(output: str, staging_dir: str, storage: Storage) -> None:
    """Deletes the build's lease if it is still its own (a no-op when the launcher already did)."""
    own_lease(output, staging_dir, storage).release()


def staging_folders(output: str, storage: Storage | None = None) -> list[tuple[float, str]]:
    """[(last written, path)] of the staging folders below ``output``: a folder's own time counts too (a
    build killed before its first file was written leaves only folders)."""
    storage, found = storage_lib.given_or_default(output, storage), []
    for entry in storage.list_level(output):
        if entry.is_folder and layout.is_staging_name(name_of(entry.path)):
            path = layout.join(output, name_of(entry.path))
            found.append((max([entry.updated, *(listed.updated for listed in storage.list(path))]), path))
    return sorted(found)


def staged_bytes(staging_dir: str, storage: Storage) -> int:
    """The bytes below ``staging_dir`` now: the work a build had written when it stopped."""
    return sum(sizes(staging_dir, storage).values())
