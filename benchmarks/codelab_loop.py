"""A peer of the build: the TF-ops loop of the "TFRecords for TPU" codelab style, the way many TPU users
make their shards.

    python benchmarks/codelab_loop.py INPUT OUTPUT [--size 224] [--workers 2] [--shards 16]

INPUT holds <class>/<image> files. A ``tf.data`` pipeline over the file names and their labels:
``tf.io.read_file`` -> ``tf.image.decode_jpeg`` (RGB, a full decode) -> ``tf.image.resize`` (bilinear, the
shorter side to SIZE) -> a centre crop to SIZE x SIZE -> ``tf.image.encode_jpeg`` (quality 90), mapped on
WORKERS parallel calls, then ``.batch(shard size)``; each batch becomes one TFRecord file, written by
``tf.io.TFRecordWriter`` in this loop, a ``tf.train.Example`` (``image/encoded``, ``image/class/label``) an
image: SHARDS files. No dedupe, checks, splits, index or atomic publication. It needs TensorFlow (the
project's venv has it) and shares no code with the project.
"""
import argparse
import math
import os


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('input')
    parser.add_argument('output')
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--workers', type=int, default=2, help="the map's num_parallel_calls")
    parser.add_argument('--shards', type=int, default=16)
    args = parser.parse_args()
    import tensorflow as tf  # pylint: disable=import-outside-toplevel  (--help answers without it)

    classes = sorted(os.listdir(args.input))
    paths, labels = [], []
    for label, name in enumerate(classes):
        for file in sorted(os.listdir(os.path.join(args.input, name))):
            paths.append(os.path.join(args.input, name, file))
            labels.append(label)
    shard_size = math.ceil(len(paths) / args.shards)
    size = args.size

    def resized_jpeg(path, label):
        image = tf.image.decode_jpeg(tf.io.read_file(path), channels=3)
        height, width = tf.shape(image)[0], tf.shape(image)[1]
        scale = size / tf.cast(tf.minimum(height, width), tf.float32)  # the shorter side to SIZE, then crop
        new_height = tf.maximum(size, tf.cast(tf.round(tf.cast(height, tf.float32) * scale), tf.int32))
        new_width = tf.maximum(size, tf.cast(tf.round(tf.cast(width, tf.float32) * scale), tf.int32))
        image = tf.image.resize(image, [new_height, new_width], method='bilinear')
        image = tf.image.crop_to_bounding_box(image, (new_height - size) // 2, (new_width - size) // 2, size, size)
        image = tf.cast(tf.clip_by_value(tf.round(image), 0, 255), tf.uint8)
        return tf.image.encode_jpeg(image, quality=90), label

    dataset = tf.data.Dataset.from_tensor_slices((paths, labels))
    dataset = dataset.map(resized_jpeg, num_parallel_calls=args.workers).batch(shard_size)

    os.makedirs(args.output, exist_ok=True)
    written = 0
    for shard, (jpegs, shard_labels) in enumerate(dataset):
        filename = os.path.join(args.output, f'{shard:02d}-{len(jpegs)}.tfrec')
        with tf.io.TFRecordWriter(filename) as writer:
            for jpeg, label in zip(jpegs.numpy(), shard_labels.numpy()):
                example = tf.train.Example(features=tf.train.Features(feature={
                    'image/encoded': tf.train.Feature(bytes_list=tf.train.BytesList(value=[jpeg])),
                    'image/class/label': tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
                }))
                writer.write(example.SerializeToString())
                written += 1
    print(written, 'images')


if __name__ == '__main__':
    main()
