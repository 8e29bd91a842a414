"""An output folder as one object: its root and the storage that reaches it, whose methods are the publication
protocol's steps on it. It imports the steps' modules and none imports it, so the ``Publication`` that carries it
(``imgrec.storage.publication``) and the steps handed that (``imgrec.storage.promotion``) stand above it."""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

from imgrec.contract import layout
from imgrec.storage import latest as latest_file, leases, retention, staging as staging_folder, storage as storage_lib, tidying
from imgrec.storage.latest import Latest
from imgrec.storage.retention import Retention
from imgrec.storage.storage import Storage
from imgrec.storage.tidying import Tidied


@dataclasses.dataclass(frozen=True)
class Output:
    """An output folder, ``root`` (a local folder or gs:// prefix), and ``storage``, the storage that reaches
    it: built once, before the job, with the job's credentials (``imgrec.pipelines.launcher.prepare``), and
    carried on the run's facts and its ``Publication``, so no step rebuilds the output's storage or passes
    its path and storage apart."""
    root: str
    storage: Storage

    @classmethod
    def at(cls, root: str) -> Output:
        """The output at ``root`` through its own storage with the defaults (a command, a test: not the job's)."""
        return cls(root, storage_lib.storage_for(root))

    def version_dir(self, version: str) -> str:
        return layout.join(self.root, version)

    def staging(self, version: str, build_id: str) -> str:
        """The staging folder a build of ``version`` with ``build_id`` writes before it publishes."""
        return layout.join(self.root, layout.staging_name(version, build_id))

    def latest(self) -> Latest:
        """What LATEST names now (``latest.read_latest``)."""
        return latest_file.read_latest(self.root, self.storage)

    def replace_latest(self, version: str, expected: Latest) -> None:
        """Points LATEST at ``version`` if it is still as ``expected`` (``latest.replace_latest``)."""
        latest_file.replace_latest(self.root, version, expected, self.storage)

    def versions(self) -> list[tuple[float, str]]:
        """[(published at, version)], oldest first (``retention.published_versions``)."""
        return retention.published_versions(self.root, self.storage)

    def staging_folders(self) -> list[tuple[float, str]]:
        """[(last written, path)] of the staging folders in it (``staging.staging_folders``)."""
        return staging_folder.staging_folders(self.root, self.storage)

    @contextlib.contextmanager
    def lease(self, staging_dir: str, detached: bool = False) -> Iterator[leases.Lease]:
        """A build's lease on its staging folder, held for the block (``staging.build_lease``)."""
        with staging_folder.build_lease(self.root, staging_dir, detached, self.storage) as lease:
            yield lease

    def tidy(self, clean: bool = False, resumable: bool = True) -> Tidied:
        """Before a build: what killed builds and prunings left, finished or removed (``tidying.tidy``)."""
        return tidying.tidy(self.root, clean, self.storage, resumable)

    def refuse_published(self, version: str, recorded: Mapping[str, Any]) -> bool:
        """Before a build, after ``tidy``: a published ``version`` refused, unless a rerun of its build
        (``tidying.refuse_published``)."""
        return tidying.refuse_published(self.root, version, recorded, self.storage)

    def state_after_failure(self, version: str, created: str) -> str:
        """What a build of ``version`` that failed left readers (``tidying.state_after_failure``)."""
        return tidying.state_after_failure(self.root, version, created, self.storage)

    def promoted_by(self, version: str, created: str) -> bool:
        """Whether the build that started at ``created`` promoted ``version`` (``tidying.promoted_by``)."""
        return tidying.promoted_by(self.root, version, created, self.storage)

    def pruning_plan(self, version: str, keep_count: int | None) -> tuple[str, ...]:
        """The versions a build that publishes ``version`` is to delete (``retention.pruning_plan``)."""
        return retention.pruning_plan(self.root, version, keep_count, self.storage)

    def keep_newest(self, count: int) -> Retention:
        """Deletes all but the ``count`` newest versions and those a lease holds (``retention.keep_newest``)."""
        return retention.keep_newest(self.root, count, self.storage)
