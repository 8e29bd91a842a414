"""Small published datasets for the training tests, written with the contract's own encoder.

``write_dataset`` lays out ``<output>/LATEST`` + ``<output>/<version>/`` exactly as the build job does,
without Beam, so the training tests do not depend on the pipeline. With ``content='ids'`` every image
encodes its record id in black/white blocks (mirror-symmetric, so a horizontal flip keeps it), which
lets a test name the records that came out of the input pipeline; ``content='shapes'`` draws the
sample shapes so a model has something to learn.
"""
import hashlib
import io
import os
import random

import numpy as np
from PIL import Image, ImageDraw

from imgrec.contract import example, features as F, layout, metadata, tfrecord
from imgrec.samples import one_style

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # cwd for `python -m tests.<module>`
ID_BITS = 8
_GRID = 4  # 4x4 blocks: 4 rows x 2 mirrored columns = 8 bits


def id_image(record_id, size):
    """A uint8 [size, size, 3] image whose blocks spell ``record_id`` (0 <= id < 256)."""
    bits = [(record_id >> bit) & 1 for bit in range(ID_BITS)]
    grid = np.zeros((_GRID, _GRID), np.uint8)
    for row in range(_GRID):
        for column in range(_GRID // 2):
            value = 255 * bits[row * (_GRID // 2) + column]
            grid[row, column] = grid[row, _GRID - 1 - column] = value
    block = size // _GRID
    return np.repeat(np.repeat(grid, block, 0), block, 1)[..., None].repeat(3, axis=2)


def decode_ids(images):
    """Record ids of a batch of images (uint8 or scaled to [-1, 1]), read from the block means."""
    images = np.asarray(images, np.float32)
    threshold = 127.5 if images.max() > 1.5 else 0.0
    size = images.shape[1]
    block = size // _GRID
    ids = np.zeros(images.shape[0], np.int64)
    for row in range(_GRID):
        for column in range(_GRID // 2):
            patch = images[:, row * block:(row + 1) * block, column * block:(column + 1) * block]
            bit = (patch.mean(axis=(1, 2, 3)) > threshold).astype(np.int64)
            ids |= bit << (row * (_GRID // 2) + column)
    return ids


def plain_shape(kind, size, rng):
    """A uint8 [size, size, 3] image of one white ``kind`` of sample shape, at a random place and size, on
    black: the sample shapes without the demo's backgrounds, which a network learns in a few dozen steps."""
    image = Image.new('RGB', (size, size))
    radius = rng.uniform(0.25, 0.4) * size
    cx, cy = rng.uniform(radius, size - radius), rng.uniform(radius, size - radius)
    draw, box = ImageDraw.Draw(image), (cx - radius, cy - radius, cx + radius, cy + radius)
    if kind == 'circle':
        draw.ellipse(box, fill='white')
    elif kind == 'square':
        draw.rectangle(box, fill='white')
    elif kind == 'triangle':
        draw.polygon([(cx, cy - radius), (cx - radius, cy + radius), (cx + radius, cy + radius)], fill='white')
    else:  # a cross
        bar = radius / 3
        draw.rectangle((cx - radius, cy - bar, cx + radius, cy + bar), fill='white')
        draw.rectangle((cx - bar, cy - radius, cx + bar, cy + radius), fill='white')
    return np.asarray(image, np.uint8)


def _jpeg(pixels):
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format='JPEG', quality=90)
    return buffer.getvalue()


def write_dataset(output, splits, *, image_size=32, labels=('circle', 'square', 'triangle', 'cross'),
                  content='ids', version='v1', seed=0):
    """Publishes ``splits`` (name -> (records, shards)) and returns {split: [record ids]}.

    Record ids run on across splits; a record's label is ``id % len(labels)``.
    """
    rng = random.Random(seed)
    version_dir = layout.join(output, version)
    os.makedirs(version_dir, exist_ok=True)
    ids, split_info, next_id = {}, {}, 0
    for split, (count, num_shards) in sorted(splits.items()):
        ids[split] = list(range(next_id, next_id + count))
        next_id += count
        shards = [[] for _ in range(num_shards)]
        class_counts = {}
        for position, record_id in enumerate(ids[split]):
            label = record_id % len(labels)
            if content == 'ids':
                pixels = id_image(record_id, image_size)
            elif content == 'plain_shapes':
                pixels = plain_shape(labels[label], image_size, rng)
            else:
                drawn = one_style.draw_render(labels[label], image_size, image_size, rng)  # seeded noise
                pixels = np.asarray(drawn, np.uint8)
            encoded = _jpeg(pixels)
            source = f'{labels[label]}/{record_id:05d}.jpg'
            shards[position % num_shards].append(example.encode_example({
                F.IMAGE_ENCODED: encoded, F.IMAGE_FORMAT: F.IMAGE_FORMAT_JPEG,
                F.IMAGE_HEIGHT: image_size, F.IMAGE_WIDTH: image_size, F.IMAGE_CHANNELS: F.CHANNELS,
                F.LABEL: label, F.LABEL_TEXT: labels[label], F.SOURCE: source,
                F.SHA256: hashlib.sha256(encoded).hexdigest()}))
            class_counts[labels[label]] = class_counts.get(labels[label], 0) + 1
        shard_entries = []
        for index, shard in enumerate(shards):
            name = layout.shard_file_name(split, index, num_shards)
            data = b''.join(tfrecord.frame(record) for record in shard)
            with open(layout.join(version_dir, name), 'wb') as f:
                f.write(data)
            shard_entries.append({'file': name, 'records': len(shard), 'bytes': len(data)})
        split_info[split] = {'class_counts': class_counts, 'shards': shard_entries, 'inputs': count,
                             'quarantined': 0, 'duplicates': 0}
    document = metadata.build_metadata(
        name='fixture', version=version, created='2026-01-01T00:00:00Z', options={},
        record_options={'image_size': [image_size, image_size], 'resize': 'crop'}, labels=list(labels), splits=split_info,
        counts={'inputs': next_id, 'written': next_id, 'quarantined': 0, 'duplicates': 0, 'ignored': 0},
        quarantine={'file': layout.QUARANTINE_JSONL, 'by_reason': {}},
        duplicates={'file': layout.DUPLICATES_JSONL, 'count': 0}, decoding={'background': [255, 255, 255], 'decisions': {}})
    with open(layout.join(version_dir, layout.DATASET_JSON), 'w') as f:
        f.write(metadata.dumps(document))
    with open(layout.join(version_dir, layout.LABELS_TXT), 'w') as f:
        f.write(''.join(f'{label}\n' for label in labels))
    with open(layout.join(output, layout.LATEST), 'w') as f:
        f.write(version + '\n')
    return ids
