"""Streams the records of a written shard, local or gs://, one at a time.

The shard is read through the storage layer (``Storage.open_read``): on gs://, two requests for a small
shard where Beam's reader makes five, one after the other, and each next chunk already on its way.
"""
from collections.abc import Iterator

from imgrec.contract import tfrecord
from imgrec.storage import storage as storage_lib


def read_shard(path: str, storage: storage_lib.Storage | None = None) -> Iterator[bytes]:
    """Yields the serialised records of the shard at ``path`` (through ``storage``, the job's, when given);
    raises ValueError at a bad frame."""
    with storage_lib.given_or_default(path, storage).open_read(path) as stream:
        yield from tfrecord.read_records(stream)
