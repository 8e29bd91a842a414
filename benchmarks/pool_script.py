"""The peer the build is measured against: what a user writes in ten minutes instead of using the project.

    python benchmarks/pool_script.py INPUT OUTPUT [--size 224] [--processes 2] [--shards 16]

INPUT holds <class>/<image> files. A pool of processes each takes whole shards: decode with Pillow's
``draft`` (libjpeg's DCT scaling), fit to SIZE x SIZE, encode a JPEG at quality 90, and write each
``tf.train.Example`` (image, size, label, class, source), framed by hand, to its TFRecord shard. No
dedupe, no checks, no splits, no index, no atomic publication: the bar, not a rival design. It shares
no code with the project on purpose.
"""
import argparse
import io
import multiprocessing
import os
import struct

import google_crc32c
from PIL import Image, ImageOps


def varint(n):
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(number, payload):  # a length-delimited protobuf field
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def example(features):  # Example{Features{map<string, Feature{1: BytesList | 3: Int64List}>}}
    entries = b''.join(
        field(1, field(1, key.encode()) + field(2, field(3, field(1, varint(value))) if isinstance(value, int)
                                                  else field(1, field(1, value))))
        for key, value in sorted(features.items()))
    return field(1, entries)


def masked_crc(data):
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def write_shard(job):
    path, size, items = job
    with open(path, 'wb') as out:
        for source, label, class_name in items:
            with Image.open(source) as image:
                image.draft('RGB', (size, size))
                image = ImageOps.fit(image.convert('RGB'), (size, size), Image.Resampling.BILINEAR)
            jpeg = io.BytesIO()
            image.save(jpeg, 'JPEG', quality=90)
            record = example({'image/encoded': jpeg.getvalue(), 'image/height': size, 'image/width': size,
                              'image/class/label': label, 'image/class/text': class_name.encode(),
                              'image/source': source.encode()})
            length = struct.pack('<Q', len(record))
            out.write(length + struct.pack('<I', masked_crc(length)) + record + struct.pack('<I', masked_crc(record)))
    return len(items)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('input')
    parser.add_argument('output')
    parser.add_argument('--size', type=int, default=224)
    parser.add_argument('--processes', type=int, default=2)
    parser.add_argument('--shards', type=int, default=16)
    args = parser.parse_args()
    classes = sorted(os.listdir(args.input))
    items = [(os.path.join(args.input, name, file), label, name)
             for label, name in enumerate(classes) for file in sorted(os.listdir(os.path.join(args.input, name)))]
    os.makedirs(args.output, exist_ok=True)
    jobs = [(os.path.join(args.output, f'train-{i:05d}-of-{args.shards:05d}.tfrecord'), args.size, items[i::args.shards])
            for i in range(args.shards)]
    with multiprocessing.Pool(args.processes) as pool:
        print(sum(pool.imap_unordered(write_shard, jobs)), 'images')


if __name__ == '__main__':
    main()
