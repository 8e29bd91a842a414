"""Peak memory against the number of images, where the pixels cost next to nothing: what the graph holds.

A photo build's peak mixes Pillow's buffers with what the runner keeps per image; here every image is a
48-pixel copy of one of 200 small drawings, made distinct by trailing bytes (distinct sha256s, so none is a
duplicate), so what grows with N is the graph's own. Each size is built in each mode, as ``build-dataset``
runs; the table gives the peak of the runner process, of its worker processes and of the whole tree, each
as a ratio to the smallest size, and what each process adds per image between the two largest sizes.

    .venv/bin/python benchmarks/memory_scaling.py --images 2000,20000,80000
    .venv/bin/python benchmarks/memory_scaling.py --images 2400,20000 --corpus photos --near_duplicates group

``--corpus photos`` builds the throughput benchmark's photos instead (``harness.corpus``: one shape on a noisy
gradient, 640 to 1,600 pixels, and their mirror images beyond 2,400) at 224 pixels: what a photo build's peak
does, pixels and near-duplicate candidates included.
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.harness import CACHE, corpus, distinct_copies, job  # noqa: E402

BASE_IMAGES = 200
MODES = {'default': [], 'in_memory': ['--direct_running_mode', 'in_memory']}


def small_corpus(count):
    """``count`` distinct small JPEGs in class folders under the benchmarks' cache, made once."""
    from imgrec.samples.generate import write_images  # pylint: disable=import-outside-toplevel  # not in the job's process
    base = os.path.join(CACHE, f'small-base-{BASE_IMAGES}')
    if not os.path.isdir(base):
        write_images(base + '.partial', BASE_IMAGES // 4, min_side=40, max_side=48, png_every=0)
        os.rename(base + '.partial', base)
    return distinct_copies(base, os.path.join(CACHE, f'small-{count}'), count)


# The corpora: (the folder of ``count`` images, the size they are built at).
CORPORA = {'small': lambda count: (small_corpus(count), '32'), 'photos': lambda count: (corpus(count), '224')}


def peaks(count, mode, near_duplicates, output, kind='small'):
    """(runner MB, largest worker MB, tree MB) of one build of ``count`` images of corpus ``kind``."""
    folder, size = CORPORA[kind](count)
    run = job(['--input', folder, '--output', output, '--image_size', size, '--version', 'v',
               '--near_duplicates', near_duplicates, *MODES[mode]])
    shutil.rmtree(output)
    worker = max((rss for rss, _ in run['workers']), default=0)
    return run['peak_root'] / 2**20, worker / 2**20, run['peak_tree'] / 2**20


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--images', default='2000,20000,80000', help='the sizes, smallest first')
    parser.add_argument('--modes', default='default,in_memory', help=f'of {", ".join(MODES)}')
    parser.add_argument('--near_duplicates', default='off', choices=('off', 'group'),
                        help='off: the graph alone (copies of one drawing would all be near-duplicates)')
    parser.add_argument('--corpus', default='small', choices=sorted(CORPORA),
                        help='small: 48-pixel copies of 200 drawings at 32 px; photos: harness.corpus at 224 px')
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.images.split(','))
    modes = [mode.strip() for mode in args.modes.split(',')]
    if len(sizes) < 2 or any(mode not in MODES for mode in modes):
        parser.error(f'give two sizes or more, and modes of {", ".join(MODES)}')
    print(f"{'mode':10s} {'images':>7s} {'runner MB':>10s} {'worker MB':>10s} {'tree MB':>8s}   against {sizes[0]}")
    with tempfile.TemporaryDirectory() as scratch:
        for mode in modes:
            measured = {}
            for count in sizes:
                measured[count] = peaks(count, mode, args.near_duplicates, os.path.join(scratch, f'{mode}-{count}'),
                                        args.corpus)
                runner, worker, tree = measured[count]
                first = measured[sizes[0]]
                print(f'{mode:10s} {count:7d} {runner:10.0f} {worker:10.0f} {tree:8.0f}   '
                      f'runner {runner / first[0]:.2f}x, tree {tree / first[2]:.2f}x', flush=True)
            small, large = measured[sizes[-2]], measured[sizes[-1]]
            per_image = [(b - a) * 2**20 / (sizes[-1] - sizes[-2]) / 1024 for a, b in zip(small, large)]
            print(f'{mode:10s} per image from {sizes[-2]} to {sizes[-1]}: runner {per_image[0]:.1f} kB, '
                  f'a worker {per_image[1]:.1f} kB, tree {per_image[2]:.1f} kB')


if __name__ == '__main__':
    main()
