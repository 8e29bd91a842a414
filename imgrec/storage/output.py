"""An output folder as one object: where versions are published, and the storage that reaches it.

Built once, before the job (with the job's credentials: ``imgrec.pipelines.launcher.parse``), and carried
on the run's facts, so no step rebuilds the output's storage or passes its path and storage apart. Each
method is one step of the publication protocol (``imgrec.storage.publication``, docs/publication.md) on
this output.
"""
import contextlib
import dataclasses
from typing import Iterator

from imgrec.contract import layout
from imgrec.storage import leases, publication
from imgrec.storage.storage import Storage


@dataclasses.dataclass(frozen=True)
class Output:
    """``root`` (a local folder or gs:// prefix) and ``storage``, the storage that reaches it."""
    root: str
    storage: Storage

    def version_dir(self, version: str) -> str:
        return layout.join(self.root, version)

    def staging(self, version: str, build_id: str) -> str:
        """The staging folder a build of ``version`` with ``build_id`` writes before it publishes."""
        return layout.join(self.root, layout.staging_name(version, build_id))

    def latest(self) -> publication.Latest:
        """What LATEST names now (``publication.read_latest``)."""
        return publication.read_latest(self.root, self.storage)

    def replace_latest(self, version: str, expected: publication.Latest) -> None:
        """Points LATEST at ``version`` if it is still as ``expected`` (``publication.replace_latest``)."""
        publication.replace_latest(self.root, version, expected, self.storage)

    def versions(self) -> list[tuple[float, str]]:
        """[(published at, version)], oldest first (``publication.published_versions``)."""
        return publication.published_versions(self.root, self.storage)

    @contextlib.contextmanager
    def lease(self, staging_dir: str, detached: bool = False) -> Iterator[leases.Lease]:
        """A build's lease on its staging folder, held for the block (``publication.build_lease``)."""
        with publication.build_lease(self.root, staging_dir, detached, self.storage) as lease:
            yield lease

    def tidy(self, clean: bool = False) -> publication.Tidied:
        """Before a build: what killed builds and prunings left, finished or removed (``publication.tidy``)."""
        return publication.tidy(self.root, clean, self.storage)

    def keep_newest(self, count: int) -> publication.Retention:
        """Deletes all but the ``count`` newest versions and those a lease holds (``publication.keep_newest``)."""
        return publication.keep_newest(self.root, count, self.storage)
