"""Read benchmark: images/s of ``imgrec.training.dataset`` over TFRecord shards vs a per-file tf.data pipeline.

    python benchmarks/read_throughput.py [--images DIR] [--data OUTPUT] [--count 2000] [--image_size 224]

Both sides deliver the same thing, batches of ``image_size`` images, with the same batch size and the
same tf.data parallelism, measured one after the other in one run:
- shards: ``imgrec.training.dataset.InputReader`` on the ``train`` split (training configuration: file-order
  and record shuffling, parse, decode, scale, augment, batch);
- per-file baseline: ``list_files -> read_file -> decode -> resize -> batch`` over the original images.
Without ``--images`` it uses the build benchmark's corpus of ``--count`` photo-sized images (640x480
to 1600x1200, ``harness.corpus``); without ``--data`` it builds them with the real Beam
job (``imgrec.pipelines.build_dataset``) into ``--work``. Both are reused by the next run.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # noqa: E402

from imgrec.contract import layout  # noqa: E402
from harness import corpus  # noqa: E402
from imgrec.training import dataset, dataset_version  # noqa: E402

SPLIT = 'train'


def build_shards(images, output, image_size, num_shards):
    from imgrec.pipelines import build_dataset
    status = build_dataset.main(['--input', images, '--output', output, '--image_size', str(image_size),
                                 '--splits', f'{SPLIT}=100', '--num_shards', f'{SPLIT}={num_shards}',
                                 '--progress', 'off'])
    if status:
        raise SystemExit(status)


def per_file_pipeline(images, image_size, batch_size):
    """The naive reader: one file open and one full-size decode per image."""
    def load(path):
        image = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
        return tf.image.resize(image, (image_size, image_size))
    files = tf.data.Dataset.list_files(os.path.join(images, '*', '*'), shuffle=True, seed=0)
    return files.map(load, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size, drop_remainder=True).prefetch(
        tf.data.AUTOTUNE)


def images_per_second(passes):
    """(images, images/s) over the datasets of image batches in ``passes``, read one after the other."""
    count, start = 0, time.perf_counter()
    for data in passes:
        for images in data:
            count += int(images.shape[0])
    return count, count / (time.perf_counter() - start)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--images', help='class-folder image tree (default: generate --count photos)')
    parser.add_argument('--data', help='built dataset output for --images (default: build one with the Beam job)')
    parser.add_argument('--count', type=int, default=2000)
    parser.add_argument('--image_size', type=int, default=224)
    parser.add_argument('--batch_size', type=int, default=64)
    parser.add_argument('--num_shards', type=int, default=8)
    parser.add_argument('--passes', type=int, default=3, help='timed passes over each side')
    parser.add_argument('--work', default='benchmarks/out/read', help='where generated images and shards go')
    args = parser.parse_args(argv)

    images = args.images or corpus(args.count)
    data = args.data or os.path.join(args.work, f'records-{args.count}-{args.image_size}')
    if not os.path.exists(os.path.join(data, layout.LATEST)):
        build_shards(images, data, args.image_size, args.num_shards)
    source = dataset_version.open_version(data)
    reader = dataset.InputReader(source, dataset.InputConfig(SPLIT, args.batch_size, is_training=True))
    if source.image_shape[:2] != (args.image_size, args.image_size):
        parser.error(f'--data holds {source.image_shape[0]}x{source.image_shape[1]} images, not --image_size')

    # Warm both up (file cache, tf.data start-up), then time the same number of passes over each.
    images_per_second([reader.dataset(epoch=0).map(lambda batch, labels: batch)])
    images_per_second([per_file_pipeline(images, args.image_size, args.batch_size).take(1)])
    shard_count, shard_rate = images_per_second(
        reader.dataset(epoch=epoch).map(lambda batch, labels: batch) for epoch in range(args.passes))
    file_count, file_rate = images_per_second(
        per_file_pipeline(images, args.image_size, args.batch_size) for _ in range(args.passes))
    print(f'shards   (imgrec.training.dataset):                        {shard_count:6d} images, {shard_rate:8.0f} images/s')
    print(f'per-file (list_files->read->decode->resize->batch): {file_count:6d} images, {file_rate:8.0f} images/s')
    print(f'ratio: {shard_rate / file_rate:.1f}x  (batch {args.batch_size}, {args.image_size}x{args.image_size}, '
          f'{os.cpu_count()} cores)')


if __name__ == '__main__':
    main()
