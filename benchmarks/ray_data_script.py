"""A peer of the build: the script a Ray user writes instead, with Ray Data on the local cores.

    .venv-peers/bin/python benchmarks/ray_data_script.py INPUT OUTPUT [--size 224] [--workers 2] [--shards 16]

INPUT holds <class>/<image> files. ``ray.data.read_images`` decodes each file whole with Pillow (RGB), the
class coming from its folder (a ``Partitioning('dir')``); a ``map`` fits each image to SIZE x SIZE (Pillow's
``ImageOps.fit``, bilinear: resize and centre crop) and encodes a JPEG at quality 90; ``write_tfrecords``,
Ray Data's own writer, writes a ``tf.train.Example`` a row (``image/encoded``, ``image/class/label``) into
about SHARDS files (``min_rows_per_file``). Ray starts here, on WORKERS CPUs (``ray.init(num_cpus=...)``),
and stops at the end, so its start-up is part of the run, as a user meets it. No dedupe, checks, splits,
index or atomic publication.

It needs Ray Data, and TensorFlow for the writer's ``tf.train.Example`` (and ``crc32c``): not the project's
venv but ``.venv-peers`` (``make bench-peers``). It shares no code with the project.
"""
import argparse
import io
import math
import os

import ray
from PIL import Image, ImageOps
from ray.data.datasource.partitioning import Partitioning


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('input')
    parser.add_argument('output')
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--workers', type=int, default=2, help='CPUs Ray may use (ray.init(num_cpus=...))')
    parser.add_argument('--shards', type=int, default=16, help='about this many TFRecord files')
    args = parser.parse_args()
    root = os.path.abspath(args.input)
    classes = sorted(os.listdir(root))
    labels = {name: index for index, name in enumerate(classes)}
    count = sum(len(os.listdir(os.path.join(root, name))) for name in classes)
    size = args.size

    def to_example(row):
        image = ImageOps.fit(Image.fromarray(row['image']), (size, size), Image.Resampling.BILINEAR)
        jpeg = io.BytesIO()
        image.save(jpeg, 'JPEG', quality=90)
        return {'image/encoded': jpeg.getvalue(), 'image/class/label': labels[row['class']]}

    ray.init(num_cpus=args.workers)
    try:
        ds = ray.data.read_images(root, mode='RGB',
                                  partitioning=Partitioning('dir', field_names=['class'], base_dir=root))
        ds = ds.map(to_example)
        ds.write_tfrecords(os.path.abspath(args.output), min_rows_per_file=math.ceil(count / args.shards))
    finally:
        ray.shutdown()
    print(count, 'images')


if __name__ == '__main__':
    main()
