"""Images/s of the build job against a naive one-process Pillow loop, measured in the same run.

    python benchmarks/build_throughput.py [--images 2000] [--image_size 192]

The baseline does, for each file: Image.open -> convert('RGB') -> ImageOps.fit(size, BILINEAR) -> JPEG
save at quality 90. The job runs on the DirectRunner with one worker process per core, end to end
(listing, decoding, sharding, writing, publishing). Also reports the PSNR of the job's images against
the baseline's, to show draft decoding and reducing_gap keep them visually identical, and the job's
fixed start-up cost, measured on a small run, so its per-image rate can be read apart from it.
"""
import argparse
import io
import os
import shutil
import sys
import tempfile
import time

import numpy as np
from PIL import Image, ImageOps

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from contract import features as F, layout  # noqa: E402
from contract.tfrecord import read_records  # noqa: E402
from pipelines import build_dataset  # noqa: E402
from samples.generate import photo_corpus  # noqa: E402
from transforms.image_ops import parse_image_size  # noqa: E402

# The job's start-up (imports, graph construction, worker processes, ~28 stages) does not grow with the
# input; a second run on this many images measures it, so the per-image rate can be reported apart.
SMALL_RUN = 40
CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'out')


def baseline(root, size):
    """The naive loop; returns ({source: jpeg bytes}, seconds)."""
    height, width = size
    outputs, start = {}, time.perf_counter()
    for kind in sorted(os.listdir(root)):
        for name in sorted(os.listdir(os.path.join(root, kind))):
            image = Image.open(os.path.join(root, kind, name)).convert('RGB')
            image = ImageOps.fit(image, (width, height), Image.Resampling.BILINEAR)
            out = io.BytesIO()
            image.save(out, 'JPEG', quality=90)
            outputs[f'{kind}/{name}'] = out.getvalue()
    return outputs, time.perf_counter() - start


def job(root, size_text, workers):
    """The build job end to end; returns ({source: jpeg bytes}, seconds)."""
    output = tempfile.mkdtemp(prefix='build-bench-')
    try:
        start = time.perf_counter()
        build_dataset.run(['--input', root, '--output', output, '--image_size', size_text, '--version', 'bench',
                           '--direct_running_mode', 'multi_processing', '--direct_num_workers', str(workers)])
        seconds = time.perf_counter() - start
        outputs = {}
        import tensorflow as tf  # only to read back what was written
        for name in os.listdir(os.path.join(output, 'bench')):
            if layout.parse_shard_file_name(name):
                with open(os.path.join(output, 'bench', name), 'rb') as stream:
                    for record in read_records(stream):
                        feature = tf.train.Example.FromString(record).features.feature
                        outputs[feature[F.SOURCE].bytes_list.value[0].decode()] = feature[F.IMAGE_ENCODED].bytes_list.value[0]
        return outputs, seconds
    finally:
        shutil.rmtree(output)


def subset(root, count):
    """A folder of symlinks to the first ``count`` images of ``root`` (same classes), for the fixed cost."""
    folder = tempfile.mkdtemp(prefix='build-bench-subset-')
    names = [(kind, name) for kind in sorted(os.listdir(root)) for name in sorted(os.listdir(os.path.join(root, kind)))]
    for kind, name in names[::max(1, len(names) // count)][:count]:
        os.makedirs(os.path.join(folder, kind), exist_ok=True)
        os.symlink(os.path.join(root, kind, name), os.path.join(folder, kind, name))
    return folder


def psnr(a, b):
    a = np.asarray(Image.open(io.BytesIO(a)), dtype=np.float64)
    b = np.asarray(Image.open(io.BytesIO(b)), dtype=np.float64)
    mse = np.mean((a - b) ** 2)
    return float('inf') if mse == 0 else 10 * np.log10(255 ** 2 / mse)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--images', type=int, default=2000)
    parser.add_argument('--image_size', default='192')
    parser.add_argument('--workers', type=int, default=os.cpu_count())
    args = parser.parse_args()
    root = photo_corpus(CACHE, args.images)
    size = parse_image_size(args.image_size)
    print(f'{args.images} photos (640x480 to 1600x1200) -> {size[0]}x{size[1]}, {args.workers} worker(s), '
          f'{os.cpu_count()} core(s)')
    naive, naive_seconds = baseline(root, size)
    built, job_seconds = job(root, args.image_size, args.workers)
    assert set(naive) == set(built), 'the job did not write every image'
    small_root = subset(root, SMALL_RUN)
    try:
        _, small_seconds = job(small_root, args.image_size, args.workers)
    finally:
        shutil.rmtree(small_root)
    scores = [psnr(built[source], naive[source]) for source in sorted(naive)]
    naive_rate, job_rate = len(naive) / naive_seconds, len(built) / job_seconds
    marginal_rate = (len(built) - SMALL_RUN) / (job_seconds - small_seconds)
    print(f'baseline (one process, full decode): {naive_rate:8.1f} images/s  ({naive_seconds:.1f} s)')
    print(f'build job (DirectRunner):            {job_rate:8.1f} images/s  ({job_seconds:.1f} s)')
    print(f'speed-up, end to end:                {job_rate / naive_rate:8.2f}x')
    print(f'fixed cost of a local job ({SMALL_RUN} images): {small_seconds:.1f} s; beyond it the job runs at '
          f'{marginal_rate:.1f} images/s, {marginal_rate / naive_rate:.2f}x the baseline')
    print(f'PSNR of job vs baseline images: mean {np.mean(scores):.1f} dB, min {np.min(scores):.1f} dB')


if __name__ == '__main__':
    main()
