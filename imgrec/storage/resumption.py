"""What a rerun takes from a stopped build's staging folder (docs/publication.md, "A stopped build").

A build writes ``resume.json`` into its staging folder once it holds its lease: what makes it the same build as a
later one (``BuildConfig.identity()``), its output, and the version LATEST named when it started. A staging folder
with one, that no live lease holds, is a build that stopped (killed, interrupted, failed): the cleanup before a
build leaves it (``tidying.tidy``), so that the build after it can ``claim`` it when it is the same build, and
take up its spill files' records (``imgrec.transforms.resumed``). The claim is a build lease on the folder, held
while the rerun reads from it, so no cleanup deletes it meanwhile; once the rerun published, it deletes the
folder. A folder that is not claimed is cleaned up as any other (``tidying.tidy`` with ``resumable`` off).
"""
from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Mapping
from typing import Any

from imgrec.contract import layout
from imgrec.storage import leases
from imgrec.storage.folder_io import name_of, read_or_none
from imgrec.storage.spill import SUFFIX
from imgrec.storage.staging import staging_folders
from imgrec.storage.storage import Conflict, Storage

MARKER = 'resume.json'


def mark(staging_dir: str, storage: Storage, identity: Mapping[str, Any], output: str, previous: str | None,
         created: str) -> None:
    """Writes the staging folder's ``resume.json``: what a rerun compares before it takes anything up."""
    document = {'identity': identity, 'output': output.rstrip('/'), 'previous': previous, 'created': created}
    storage.write(layout.join(staging_dir, MARKER), json.dumps(document, sort_keys=True).encode())


@dataclasses.dataclass(frozen=True)
class Stopped:
    """A stopped build's staging folder: its path, when it was last written (UTC seconds) and its ``resume.json``."""
    path: str
    last_written: float
    marker: Mapping[str, Any]

    @property
    def stopped_at(self) -> str:
        return datetime.datetime.fromtimestamp(self.last_written, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')

    def refusal(self, identity: Mapping[str, Any], output: str, previous: str | None) -> str | None:
        """Why this folder is not the same build as one of ``identity`` into ``output`` from ``previous``: a phrase
        naming the first difference; None when it is."""
        if self.marker.get('output') != output.rstrip('/'):
            return f"it was built into {self.marker.get('output')}"
        if self.marker.get('previous') != previous:
            return f"it started from version {self.marker.get('previous') or 'none'}, LATEST names {previous or 'none'}"
        before = self.marker.get('identity') or {}
        for part in ('record_options', 'options'):
            was, now = before.get(part) or {}, identity.get(part) or {}
            for name in sorted(set(was) | set(now)):
                if was.get(name) != now.get(name):
                    shown = 'the encoder' if name == 'encoder' else f'--{name}'
                    return f'{shown} was {_shown(was.get(name))}, now {_shown(now.get(name))}'
        return None if before == identity else 'its options differ'


def _shown(value: Any) -> str:
    if isinstance(value, list) and all(isinstance(item, int) for item in value):
        return 'x'.join(map(str, value))
    if isinstance(value, dict):
        return ','.join(f'{key}={item}' for key, item in value.items())
    return str(value)


def _marker(folder: str, storage: Storage) -> Mapping[str, Any] | None:
    data = read_or_none(layout.join(folder, MARKER), storage)
    try:
        found = json.loads(data) if data is not None else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def stopped_builds(output: str, storage: Storage) -> list[Stopped]:
    """The staging folders of ``output`` that hold a ``resume.json`` and that no live lease holds, oldest first:
    listed before the leases, as the cleanup lists them (a build takes its lease before it writes)."""
    folders = staging_folders(output, storage)
    held = leases.live(leases.read_all(storage, output)).staging
    found = []
    for last_written, folder in folders:
        if name_of(folder) in held:
            continue
        marker = _marker(folder, storage)
        if marker is not None:
            found.append(Stopped(folder, last_written, marker))
    return found


def marked(folder: str, storage: Storage) -> bool:
    """Whether a staging ``folder`` holds a ``resume.json`` (the cleanup leaves such a folder to the build)."""
    return storage.exists(layout.join(folder, MARKER))


def claim_token(build_id: str) -> str:
    """The token of the leases the build ``build_id`` holds on the stopped runs it takes up: its promotion tells
    them from another build's by it."""
    return f'resume-{build_id}'


def claim(output: str, stopped: Stopped, storage: Storage, build_id: str) -> leases.Lease | None:
    """A build lease on ``stopped``'s folder for the build ``build_id`` in this process (its dead lease taken over,
    or a new one where it has none), started; None when another process holds it now."""
    name = name_of(stopped.path)
    for entry in leases.read_all(storage, output):
        if entry.kind == layout.BUILD_LEASE and entry.lease and entry.lease.get('target') == name:
            taken = leases.take_over(storage, output, entry, claim_token(build_id))
            return taken.start() if taken is not None else None
    lease = leases.Lease(storage, output, layout.BUILD_LEASE, name, layout.staging_build_id(name))
    lease.token = claim_token(build_id)
    try:
        lease.acquire()
    except Conflict:  # another build claimed it first
        return None
    return lease.start()


def spill_files(folder: str, storage: Storage) -> list[str]:
    """The spill files of a staging ``folder``, sorted."""
    return sorted(entry.path for entry in storage.list(layout.join(folder, layout.SPILL_DIR))
                  if entry.path.endswith(SUFFIX))
