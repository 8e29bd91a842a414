"""Reads a version's ArrayRecord shards with Grain: a global shuffle, no TensorFlow, resumable mid-epoch.

    python examples/grain_reader.py OUT[/VERSION] [--split train] [--batch_size 32] [--epochs 1] [--seed 0]
                                    [--state state.json]

The version must have been built with ``--formats tfrecord,array_record``. Needs ``grain`` (pinned in
requirements/test.txt), numpy and Pillow; not TensorFlow, not Apache Beam. What it does:
- ``grain.sources.ArrayRecordDataSource`` over the split's ArrayRecord shards (dataset.json lists them),
  one indexable sequence of serialised Examples;
- ``shuffle``: a permutation of every record of the split, not a buffer: a global shuffle, and a new one
  each epoch (Grain seeds each epoch apart), so every record comes exactly once an epoch;
- ``ParseExample``: the Example read by ``contract.example.decode_example`` (protobuf's wire format by
  hand) and its JPEG decoded by Pillow, to (uint8 image [H, W, 3], int label);
- ``batch``: numpy batches (images [B, H, W, 3] uint8, labels [B] int64). Epochs run on as one stream, so
  a batch can hold the end of one epoch and the start of the next.
Grain's iterator state (``iterator.get_state()``, a small dict) says where the stream is; a new iterator
given it with ``set_state`` goes on from there, mid-epoch. ``--state FILE`` saves it after every batch and
starts from it when the file exists.
"""
import argparse
import io
import json
import os
import sys

import grain
import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from contract import features as F, layout, metadata, version_ref  # noqa: E402
from contract.example import decode_example  # noqa: E402


def _read_text(path):
    with open(path, encoding='utf-8') as stream:
        return stream.read()


def open_version(path, version=None):
    """The ``contract.version_ref.VersionRef`` of OUT (its LATEST) or OUT/VERSION, on a local disk."""
    return version_ref.resolve(path, _read_text, os.path.exists, version)


def array_record_paths(ref, split):
    """The paths of ``split``'s ArrayRecord shards, in shard order."""
    if split not in ref.document['splits']:
        raise ValueError(f"split {split!r} is not in {ref.directory} (it has {', '.join(ref.document['splits'])})")
    shards = metadata.array_record_shards(ref.document, split)
    if not shards:
        raise ValueError(f'{ref.directory} has no ArrayRecord shards: build it with --formats tfrecord,array_record')
    return [layout.join(ref.directory, shard['file']) for shard in shards]


class ParseExample(grain.transforms.Map):
    """A serialised Example -> (uint8 image [H, W, 3], int label), without TensorFlow."""

    def map(self, element):
        values = decode_example(element)
        with Image.open(io.BytesIO(values[F.IMAGE_ENCODED])) as image:
            pixels = np.asarray(image.convert('RGB'))
        return pixels, values[F.LABEL]


def dataset(paths, *, batch_size, seed=0, num_epochs=1, drop_remainder=False):
    """A Grain MapDataset of (images, labels) numpy batches: ``num_epochs`` passes over every record of
    ``paths``, each in its own global shuffle of ``seed``."""
    records = grain.MapDataset.source(grain.sources.ArrayRecordDataSource(paths))
    return (records
            .shuffle(seed=seed)
            .repeat(num_epochs)  # reseeds each epoch: a new permutation, every record once
            .map(ParseExample())
            .batch(batch_size, drop_remainder=drop_remainder))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('path', help='OUT (its LATEST version) or OUT/VERSION, a local folder')
    parser.add_argument('--version', help='a version of OUT other than LATEST')
    parser.add_argument('--split', default='train')
    parser.add_argument('--batch_size', type=int, default=32)
    parser.add_argument('--epochs', type=int, default=1)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--state', help="a JSON file of Grain's iterator state: saved after every batch, "
                                        'resumed from when it exists')
    args = parser.parse_args(argv)
    try:
        ref = open_version(args.path, args.version)
        paths = array_record_paths(ref, args.split)
    except ValueError as error:  # VersionError too: one line, no traceback
        parser.exit(2, f'grain_reader: error: {error}\n')
    batches = dataset(paths, batch_size=args.batch_size, seed=args.seed, num_epochs=args.epochs)
    iterator = iter(batches)
    if args.state and os.path.exists(args.state):
        with open(args.state, encoding='utf-8') as stream:
            iterator.set_state(json.load(stream))
    records, labels = 0, np.zeros(len(ref.document['labels']), np.int64)
    for images, batch_labels in iterator:
        records += len(batch_labels)
        np.add.at(labels, batch_labels, 1)
        if args.state:
            with open(args.state, 'w', encoding='utf-8') as stream:
                json.dump(iterator.get_state(), stream)
    print(f'grain_reader: {records} records in batches of {args.batch_size} (images {images.shape[1:]} '
          f'{images.dtype}) from {len(paths)} ArrayRecord shard(s) of {ref.directory} split {args.split}; '
          f"per class: {dict(zip(ref.document['labels'], labels.tolist()))}" if records else
          'grain_reader: nothing left to read')
    return 0


if __name__ == '__main__':
    sys.exit(main())
