"""Streams the records of a written shard, local or gs://, one at a time."""
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from contract import tfrecord


def read_shard(path):
    """Yields the serialised records of the shard at ``path``; raises ValueError at a bad frame."""
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
        yield from tfrecord.read_records(stream)
