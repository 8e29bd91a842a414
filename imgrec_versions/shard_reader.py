"""Streams the records of a written shard, local or gs://, one at a time.

A gs:// shard is read through the storage layer (``fileio.ObjectReader``): two requests for a small shard
where Beam's reader makes five, one after the other, and each next chunk already on its way.
"""
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from contract import tfrecord
from imgrec_storage import fileio, gcs


def read_shard(path):
    """Yields the serialised records of the shard at ``path``; raises ValueError at a bad frame."""
    opened = (fileio.ObjectReader(path) if gcs.is_gcs(path)
              else FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED))
    with opened as stream:
        yield from tfrecord.read_records(stream)
