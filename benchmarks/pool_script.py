"""The peer the build is measured against: what a user writes in ten minutes instead of using the project.

    python benchmarks/pool_script.py INPUT OUTPUT [--size 224] [--processes 2] [--shards 16] [--guarantees]

INPUT holds <class>/<image> files. A pool of processes each takes whole shards: decode with Pillow's
``draft`` (libjpeg's DCT scaling), fit to SIZE x SIZE, encode a JPEG at quality 90, and write each
``tf.train.Example`` (image, size, label, class, source), framed by hand, to its TFRecord shard. No
dedupe, no checks, no splits, no index, no atomic publication: the bar, not a rival design. It shares
no code with the project on purpose, except with ``--guarantees``: then each image also gets the per-image
work the build's guarantees cannot do without, with the build's own functions (the sha256 of the source's
bytes, for exact duplicates; the perceptual hashes of the draft-decoded image, for near-duplicates),
so its rate is the most any build that keeps them can reach on these cores.
"""
import argparse
import hashlib
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


def _fingerprint():
    """The build's own perceptual hashes (whole and centre), imported only for --guarantees."""
    from imgrec.imaging.perceptual_hash import perceptual_hashes  # pylint: disable=import-outside-toplevel
    return perceptual_hashes


def write_shard(job):
    path, size, items, guarantees = job
    fingerprint = _fingerprint() if guarantees else None
    with open(path, 'wb') as out:
        for source, label, class_name in items:
            opened = source
            if guarantees:  # the bytes read once, for their sha256 and to decode
                with open(source, 'rb') as file:
                    data = file.read()
                hashlib.sha256(data).hexdigest()
                opened = io.BytesIO(data)
            with Image.open(opened) as image:
                image.draft('RGB', (size, size))
                image = image.convert('RGB')
                if fingerprint:
                    fingerprint(image)
                image = ImageOps.fit(image, (size, size), Image.Resampling.BILINEAR)
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
    parser.add_argument('--guarantees', action='store_true',
                        help="also each image's sha256 and perceptual fingerprint, as the build computes them")
    args = parser.parse_args()
    classes = sorted(os.listdir(args.input))
    items = [(os.path.join(args.input, name, file), label, name)
             for label, name in enumerate(classes) for file in sorted(os.listdir(os.path.join(args.input, name)))]
    os.makedirs(args.output, exist_ok=True)
    jobs = [(os.path.join(args.output, f'train-{i:05d}-of-{args.shards:05d}.tfrecord'), args.size, items[i::args.shards],
             args.guarantees)
            for i in range(args.shards)]
    with multiprocessing.Pool(args.processes) as pool:
        print(sum(pool.imap_unordered(write_shard, jobs)), 'images')


if __name__ == '__main__':
    main()
