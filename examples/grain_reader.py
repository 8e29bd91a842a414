"""Reads a version's ArrayRecord shards with Grain (``training.grain_source``), and counts what it read.

    python examples/grain_reader.py OUT[/VERSION] [--split train] [--batch_size 32] [--epochs 1] [--seed 0]
                                    [--state state.json]

What the source does: ``training/grain_input.py``. ``--state FILE`` saves Grain's iterator state after every
batch and starts from it when the file exists: a run stopped mid-epoch goes on where it was. Needs no
TensorFlow.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from imgrec.console.errors import UserError  # noqa: E402
from imgrec.training import grain_input  # noqa: E402


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
        ref = grain_input.open_version(args.path, args.version)
        paths = grain_input.array_record_paths(ref, args.split)
    except UserError as error:
        parser.exit(2, f'grain_reader: error: {error}\n')
    iterator = iter(grain_input.batches(paths, batch_size=args.batch_size, seed=args.seed, num_epochs=args.epochs))
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
