"""A scheduled refresh against the full build of the same images, measured in the same run.

    python benchmarks/refresh_throughput.py [--images 20000] [--new 0.01] [--changed 0.005]

Builds the corpus (``harness.corpus``: above 2,400, pixel variants of 2,400 photos), then adds ``--new``
new images and rewrites ``--changed`` of them in place, and refreshes: the refresh decodes only those,
and copies every other record from the previous version's shards. Both run as a user runs them
(``python -m imgrec.pipelines.build_dataset``, DirectRunner with a worker per core), timed from process start
to exit, with the peak memory of the process tree. The input folder is hard links to the cached corpus,
so the cache is never changed.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import corpus, counter, job, listed  # noqa: E402
from imgrec.contract import counters, layout  # noqa: E402


def linked_copy(root, target):
    """``target`` holding hard links to every image of ``root``."""
    for name in listed(root):
        os.makedirs(os.path.join(target, os.path.dirname(name)), exist_ok=True)
        os.link(os.path.join(root, name), os.path.join(target, name))


def edit(images, new, changed):
    """Adds ``new`` images and rewrites ``changed`` in place (a new file, so the hard-linked cache keeps its
    bytes); returns (new, changed) counts."""
    names = listed(images)
    for i in range(new):
        source = os.path.join(images, names[i * 7 % len(names)])
        with open(source, 'rb') as stream:
            data = stream.read()
        with open(os.path.join(os.path.dirname(source), f'new-{i:06d}.jpg'), 'wb') as out:
            out.write(data + f'new {i}'.encode())
    for i in range(changed):
        path = os.path.join(images, names[(i * 13 + 5) % len(names)])
        with open(path, 'rb') as stream:
            data = stream.read()
        os.unlink(path)
        with open(path, 'wb') as out:
            out.write(data + f'changed {i}'.encode())
    return new, changed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--images', type=int, default=20000)
    parser.add_argument('--new', type=float, default=0.01)
    parser.add_argument('--changed', type=float, default=0.005)
    parser.add_argument('--image_size', default='224')
    args = parser.parse_args()
    root = corpus(args.images)
    work = tempfile.mkdtemp(prefix='refresh-bench-')
    try:
        images, output = os.path.join(work, 'images'), os.path.join(work, 'out')
        linked_copy(root, images)
        options = ['--input', images, '--output', output, '--image_size', args.image_size,
                   '--direct_running_mode', 'multi_processing']
        full = job([*options, '--version', 'v1'])
        new, changed = edit(images, round(args.images * args.new), round(args.images * args.changed))
        refresh = job([*options, '--version', 'v2'])
        with open(os.path.join(output, 'v2', layout.DATASET_JSON)) as stream:
            document = json.load(stream)
        decoded = counter(refresh, counters.IMAGES_DECODED)
        print(f'{args.images} photos -> {args.image_size}; refresh after {new} new and {changed} changed images')
        print(f"full build:  {full['seconds']:7.1f} s  ({args.images / full['seconds']:.0f} images/s), "
              f"peak memory {full['peak_tree'] / 2**20:.0f} MB")
        print(f"refresh:     {refresh['seconds']:7.1f} s  = {refresh['seconds'] / full['seconds']:.2f} of the full build, "
              f"peak memory {refresh['peak_tree'] / 2**20:.0f} MB")
        print(f"images_decoded {decoded} (new + changed = {new + changed}); images_reused "
              f"{counter(refresh, counters.IMAGES_REUSED)}; dataset.json refresh: {document['refresh']}")
        if decoded != new + changed:
            raise SystemExit('the refresh decoded other images than the new and changed ones')
    finally:
        shutil.rmtree(work)


if __name__ == '__main__':
    main()
