"""A version's ArrayRecord shards through Grain: a global shuffle, resumable mid-epoch, without TensorFlow.

The version must have been built with ``--formats tfrecord,array_record``, on a local disk. Needs ``grain``,
numpy and Pillow; importing this imports neither TensorFlow nor Apache Beam. What ``grain_source`` builds:
- ``grain.sources.ArrayRecordDataSource`` over the split's ArrayRecord shards (dataset.json lists them),
  one indexable sequence of serialised Examples;
- ``shuffle``: a permutation of every record of the split, not a buffer: a global shuffle, and a new one
  each epoch (Grain seeds each epoch apart), so every record comes exactly once an epoch;
- ``ParseExample``: the Example read by ``imgrec.contract.example.decode_example`` (protobuf's wire format by
  hand) and its JPEG decoded by Pillow, to (uint8 image [H, W, 3], int label);
- ``batch``: numpy batches (images [B, H, W, 3] uint8, labels [B] int64). Epochs run on as one stream, so
  a batch can hold the end of one epoch and the start of the next.
Grain's iterator state (``iterator.get_state()``, a small dict) says where the stream is; a new iterator
given it with ``set_state`` goes on from there, mid-epoch.
"""
import io
import os

import grain
import numpy as np
from PIL import Image

from imgrec.contract import features as F, layout, metadata, version_ref
from imgrec.contract.example import decode_example
from imgrec.console.errors import UserError
from imgrec.storage import leases


def _read_text(path):
    with open(path, encoding='utf-8') as stream:
        return stream.read()


def open_version(path, version=None):
    """The ``imgrec.contract.version_ref.VersionRef`` of OUT (its LATEST) or OUT/VERSION, on a local disk."""
    try:
        return version_ref.resolve(path, _read_text, os.path.exists, version)
    except version_ref.VersionError as error:
        raise UserError(str(error)) from None


def array_record_paths(ref, split):
    """The paths of ``split``'s ArrayRecord shards, in shard order."""
    if split not in ref.document['splits']:
        raise UserError(f"split {split!r} is not in {ref.directory} (it has {', '.join(ref.document['splits'])})")
    shards = metadata.array_record_shards(ref.document, split)
    if not shards:
        raise UserError(f'{ref.directory} has no ArrayRecord shards: build it with --formats tfrecord,array_record')
    return [layout.join(ref.directory, shard['file']) for shard in shards]


class ParseExample(grain.transforms.Map):
    """A serialised Example -> (uint8 image [H, W, 3], int label), without TensorFlow."""

    def map(self, element):
        values = decode_example(element)
        with Image.open(io.BytesIO(values[F.IMAGE_ENCODED])) as image:
            pixels = np.asarray(image.convert('RGB'))
        return pixels, values[F.LABEL]


def batches(paths, *, batch_size, seed=0, num_epochs=1, drop_remainder=False):
    """A Grain MapDataset of (images, labels) numpy batches: ``num_epochs`` passes over every record of
    the ArrayRecord shards ``paths``, each in its own global shuffle of ``seed``."""
    records = grain.MapDataset.source(grain.sources.ArrayRecordDataSource(paths))
    return (records
            .shuffle(seed=seed)
            .repeat(num_epochs)  # reseeds each epoch: a new permutation, every record once
            .map(ParseExample())
            .batch(batch_size, drop_remainder=drop_remainder))


def grain_source(data, split='train', *, version=None, batch_size=32, seed=0, num_epochs=1, drop_remainder=False):
    """``split`` of OUT (the version its LATEST names) or OUT/VERSION (or ``version`` of OUT) as ``batches``.

    A mistake (no such version or split, no ArrayRecord shards) raises UserError with a one-line message.
    """
    try:
        ref, lease = leases.resolve_leased(lambda: open_version(data, version), lambda ref: (ref.output, ref.name))
    except leases.Pruned as error:
        raise UserError(f'{error}, three times: run again') from None
    try:
        paths = array_record_paths(ref, split)
    except UserError:
        if lease is not None:
            lease.release_quietly()
        raise
    # The lease is renewed while the dataset is alive, so a build's --keep_versions leaves the version alone.
    return leases.held_while(batches(paths, batch_size=batch_size, seed=seed, num_epochs=num_epochs,
                                     drop_remainder=drop_remainder), lease)
