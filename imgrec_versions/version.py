"""Finds a version folder from what a user types (OUT or OUT/VERSION) and reads its metadata files."""
import json
import typing

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from contract import layout, metadata
from imgrec_storage import fileio


class InspectionError(Exception):
    """A version that cannot be found or read: reported in one line."""


class Version(typing.NamedTuple):
    path: str  # the version folder
    document: dict  # dataset.json
    labels: list  # labels.txt, one class a line


def resolve(path):
    """The version folder ``path`` names: itself when it holds dataset.json, else the one its LATEST names."""
    path = path.rstrip('/')
    if FileSystems.exists(layout.join(path, layout.DATASET_JSON)):
        return path
    latest = layout.join(path, layout.LATEST)
    if FileSystems.exists(latest):
        name = fileio.read_bytes(latest).decode('utf-8').strip()
        if name and FileSystems.exists(layout.join(path, name, layout.DATASET_JSON)):
            return layout.join(path, name)
        raise InspectionError(f'{latest} names version {name!r}, which has no {layout.DATASET_JSON}')
    raise InspectionError(f'no dataset found at {path}: expected {layout.DATASET_JSON} or {layout.LATEST} there')


def load(path):
    """The Version at ``path`` (OUT or OUT/VERSION)."""
    version_dir = resolve(path)
    try:
        document = metadata.loads(fileio.read_bytes(layout.join(version_dir, layout.DATASET_JSON)))
    except ValueError as error:
        raise InspectionError(f'{layout.join(version_dir, layout.DATASET_JSON)}: {error}') from None
    labels_path = layout.join(version_dir, layout.LABELS_TXT)
    labels = fileio.read_bytes(labels_path).decode('utf-8').splitlines() if FileSystems.exists(labels_path) else None
    return Version(version_dir, document, labels)


def iter_jsonl(version_dir, name):
    """Yields the objects of a JSON-lines file of the version, one line in memory at a time; none when absent."""
    path = layout.join(version_dir, name)
    if not FileSystems.exists(path):
        return
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        for line in stream:
            if line.strip():
                yield json.loads(line)


def shard_paths(version):
    """[(split, shard entry of dataset.json, path)] in split and shard order."""
    return [(split, shard, layout.join(version.path, shard['file']))
            for split, info in version.document['splits'].items() for shard in info['shards']]
