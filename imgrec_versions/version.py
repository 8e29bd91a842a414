"""Finds a version folder from what a user types (OUT or OUT/VERSION), by the contract's rules
(``contract.version_ref``), and reads its metadata files."""
import json
import typing

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from contract import layout, version_ref
from imgrec_storage import fileio


class InspectionError(Exception):
    """A version that cannot be found or read: reported in one line."""


class Version(typing.NamedTuple):
    path: str  # the version folder
    document: dict  # dataset.json
    labels: list  # labels.txt, one class a line


def _ref(path):
    """The contract's VersionRef of ``path`` (OUT or OUT/VERSION), read through Beam's filesystems."""
    try:
        return version_ref.resolve(path, fileio.read_bytes, FileSystems.exists)
    except version_ref.VersionError as error:
        raise InspectionError(str(error)) from None


def resolve(path):
    """The version folder ``path`` names: itself when it holds dataset.json, else the one its LATEST names."""
    return _ref(path).directory


def load(path):
    """The Version at ``path`` (OUT or OUT/VERSION)."""
    ref = _ref(path)
    labels_path = layout.join(ref.directory, layout.LABELS_TXT)
    labels = fileio.read_bytes(labels_path).decode('utf-8').splitlines() if FileSystems.exists(labels_path) else None
    return Version(ref.directory, ref.document, labels)


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
