"""The publication protocol (docs/publication.md): how a build publishes a version, and the ``Publication`` handed
from step to step. Only the protocol's modules promote, prune or delete a version or a staging folder, or move
LATEST, each a step:

- ``staging``: a build writes its version into its staging folder, which its build lease names (``leases``).
- ``promotion``: the steps a build's job runs, each handed the ``Publication`` of the step before: ``promote``
  (the staging folder becomes ``<version>``, while the build still holds its lease and only if every shard
  ``dataset.json`` lists is there: locally one rename under ``flock`` on the output folder, on ``gs://`` copies
  with ``dataset.json``, the completion marker, last), ``move_latest`` and ``prune``.
- ``latest``: LATEST moves only if it still names the version the build started from (compare-and-swap).
- ``retention``: ``--keep_versions``, the newest versions (LATEST among them) and those a live lease holds kept;
  any other unpublished first (``dataset.json`` deleted), then deleted, under a prune lease.
- ``tidying`` (before every build): finishes the jobs of dead leases and removes the staging folders failed
  builds left; after a failure, sheds a staging folder's bulk.

Each step is idempotent: run again after it finished, or after a crash anywhere inside it, it ends in the same
published state (a Beam runner retries a failed bundle; a scheduler reruns a killed build). Every step takes the
output's ``Storage``: the job's (``output.Output``, carried on the ``Publication``), built with its retry policy
and options, so a worker's calls authenticate as the job's listing and shard writers do (Beam keeps
``--impersonate_service_account`` to the launcher). None (tests, tools): the output's storage with the defaults.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from imgrec.storage.latest import Latest
from imgrec.storage.output import Output
from imgrec.storage.retention import Retention
from imgrec.storage.storage import Storage


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
    output: Output
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
