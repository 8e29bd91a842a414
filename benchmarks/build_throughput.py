"""The build job against a naive one-process Pillow loop, measured in the same run: throughput, start-up
cost, CPU utilisation, peak memory of the whole process tree, and bytes through the shuffles.

    python benchmarks/build_throughput.py [--images 2400] [--image_size 224] [--workers N]
    python benchmarks/build_throughput.py --images 20000    # 2,000 photos copied with distinct trailing bytes

The baseline does, for each file: Image.open -> convert('RGB') -> ImageOps.fit(size, BILINEAR) -> JPEG
save at quality 90, on up to 2,400 of the images (its rate per image does not depend on the count), once
before the job and once after: the ratios use the mean of the two, so a machine that speeds up or slows
down during the run (these are shared) moves both sides alike, and the drift is printed. The job runs as a
user runs it, ``python -m pipelines.build_dataset`` in a process of its own (DirectRunner, one worker
process per core), timed from process start to exit. Three jobs on 40 images measure the fixed start-up
cost (their median). Memory is sampled every 0.2 s over the job's process and all its descendants.
"""
import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
from PIL import Image, ImageOps

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import MAX_GENERATED, corpus, job, listed  # noqa: E402

from contract import features as F, index as I, layout  # noqa: E402
from contract.example import decode_example  # noqa: E402
from contract.tfrecord import read_records  # noqa: E402
from imgrec_imaging.image_ops import parse_image_size  # noqa: E402

SMALL_RUN = 40
SMALL_RUNS = 3
# Each record's reference crosses three shuffles: to its sha256 group, its rank bucket, its shard.
SHUFFLES_PER_RECORD = 3


def baseline(root, names, size):
    """The naive loop; returns ({source: jpeg bytes}, seconds)."""
    height, width = size
    outputs, start = {}, time.perf_counter()
    for name in names:
        image = Image.open(os.path.join(root, name)).convert('RGB')
        image = ImageOps.fit(image, (width, height), Image.Resampling.BILINEAR)
        out = io.BytesIO()
        image.save(out, 'JPEG', quality=90)
        outputs[name] = out.getvalue()
    return outputs, time.perf_counter() - start


def build(root, size_text, workers, output):
    return job(['--input', root, '--output', output, '--image_size', size_text, '--version', 'bench',
                '--direct_running_mode', 'multi_processing', '--direct_num_workers', str(workers)])


def written_images(version_dir, sources):
    """{source: JPEG bytes} of ``sources``, each found through the record index and read by offset."""
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    document = json.load(open(os.path.join(version_dir, layout.DATASET_JSON)))
    wanted, images = set(sources), {}
    for name in document['index']['files']:
        for row in pq.read_table(os.path.join(version_dir, name)).to_pylist():
            if row[I.SOURCE] in wanted:
                with open(os.path.join(version_dir, row[I.SHARD]), 'rb') as stream:
                    stream.seek(row[I.OFFSET])
                    (record,) = read_records(io.BytesIO(stream.read(row[I.LENGTH])))
                images[row[I.SOURCE]] = decode_example(record)[F.IMAGE_ENCODED]
    return images, document


def psnr(a, b):
    a = np.asarray(Image.open(io.BytesIO(a)), dtype=np.float64)
    b = np.asarray(Image.open(io.BytesIO(b)), dtype=np.float64)
    mse = np.mean((a - b) ** 2)
    return float('inf') if mse == 0 else 10 * np.log10(255 ** 2 / mse)


def subset(root, names):
    folder = tempfile.mkdtemp(prefix='build-bench-subset-')
    for name in names:
        os.makedirs(os.path.join(folder, os.path.dirname(name)), exist_ok=True)
        os.symlink(os.path.join(root, name), os.path.join(folder, name))
    return folder


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--images', type=int, default=MAX_GENERATED)
    parser.add_argument('--image_size', default='224')
    parser.add_argument('--workers', type=int, default=os.cpu_count())
    args = parser.parse_args()
    root = corpus(args.images)
    names = listed(root)
    size = parse_image_size(args.image_size)
    cores = os.cpu_count()
    print(f'{len(names)} photos (640x480 to 1600x1200) -> {size[0]}x{size[1]}, {args.workers} worker(s), {cores} core(s)')
    sample = names[::max(1, len(names) // MAX_GENERATED)][:MAX_GENERATED]
    naive, naive_before = baseline(root, sample, size)
    output = tempfile.mkdtemp(prefix='build-bench-')
    small_root = subset(root, names[::max(1, len(names) // SMALL_RUN)][:SMALL_RUN])
    try:
        run = build(root, args.image_size, args.workers, os.path.join(output, 'full'))
        small = statistics.median(build(small_root, args.image_size, args.workers, os.path.join(output, f'small{i}'))
                                  ['seconds'] for i in range(SMALL_RUNS))
        built, document = written_images(run['version_dir'], sample)
        _, naive_after = baseline(root, sample, size)
        naive_rate = 2 * len(naive) / (naive_before + naive_after)
        counters = run['counters']
        written = document['counts']['written']
        assert written == len(names), f"the job wrote {written} of {len(names)} images"
        scores = [psnr(built[name], naive[name]) for name in sample]
        job_rate = written / run['seconds']
        marginal = (written - SMALL_RUN) / (run['seconds'] - small)
        ref_bytes = counters.get('record_ref_bytes', 0) / max(1, counters.get('examples_built', 1))
        shard_bytes = sum(s['bytes'] for split in document['splits'].values() for s in split['shards'])
        print(f"baseline (one process, full decode, {len(naive)} images): {naive_rate:8.1f} images/s  "
              f"(before the job {len(naive) / naive_before:.1f}, after {len(naive) / naive_after:.1f})")
        print(f"build job, whole process:                     {job_rate:8.1f} images/s  ({run['seconds']:.1f} s)  "
              f"= {job_rate / naive_rate:.2f}x the baseline")
        print(f"start-up (a {SMALL_RUN}-image job, whole process, median of {SMALL_RUNS}): {small:.1f} s; beyond it "
              f"{marginal:.1f} images/s = {marginal / naive_rate:.2f}x the baseline")
        print(f"CPU utilisation:                              {run['cpu_seconds'] / (run['seconds'] * cores):8.0%} "
              f"of {cores} cores ({run['cpu_seconds']:.0f} CPU s)")
        print(f"peak memory, runner + workers:                {run['peak_tree'] / 2**20:8.0f} MB "
              f"(runner process {run['peak_root'] / 2**20:.0f} MB); shards {shard_bytes / 2**20:.0f} MB")
        print(f"bytes through shuffles per image:             {ref_bytes * SHUFFLES_PER_RECORD:8.0f} "
              f"({ref_bytes:.0f} B a reference x {SHUFFLES_PER_RECORD} shuffles)")
        print("shards: " + ', '.join(f"{name} {split['num_shards']}" for name, split in document['splits'].items()))
        print(f'PSNR of job vs baseline images: mean {np.mean(scores):.1f} dB, min {np.min(scores):.1f} dB')
    finally:
        shutil.rmtree(small_root)
        shutil.rmtree(output)


if __name__ == '__main__':
    main()
