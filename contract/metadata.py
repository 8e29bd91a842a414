"""The ``dataset.json`` document: what a version holds, written by the build, read by training.

Kept as plain dicts with the field names defined here, so the file stays readable by anything that
reads JSON, and both sides agree on the names.
"""
import json

from contract import features as F

FORMAT_VERSION = 1


def build_metadata(*, name, version, created, options, image_size, labels, splits, counts, quarantine,
                   duplicates, decoding, index=None, record_options=None, label_order=None, refresh=None):
    """Returns the ``dataset.json`` document.

    ``splits`` maps split name -> {'class_counts': {label: n}, 'shards': [{'file', 'records', 'bytes'}],
    'inputs': n, 'quarantined': n, 'duplicates': n}. ``counts`` holds inputs = written + quarantined +
    duplicates, and ignored (non-image files). ``quarantine`` = {'file', 'by_reason'}, ``duplicates`` =
    {'file', 'count'}, ``decoding`` = {'background': [r, g, b], 'decisions': {decision: images}};
    ``index`` = ``contract.index.describe(...)``; ``record_options`` the options that shape a record's
    bytes (a refresh reuses records only if they are unchanged); ``label_order`` how the label order was decided; ``refresh`` = {'previous', 'mode',
    'full_reason', 'reused', 'decoded', 'new', 'changed', 'removed'}.
    """
    height, width = image_size
    return {
        'format_version': FORMAT_VERSION,
        'name': name,
        'version': version,
        'created': created,
        'options': options,
        'image': {'height': height, 'width': width, 'channels': F.CHANNELS,
                  'format': F.IMAGE_FORMAT_JPEG.decode()},
        'features': dict(F.FEATURES),
        'labels': list(labels),
        'splits': {
            split: {
                'num_examples': sum(shard['records'] for shard in info['shards']),
                'num_shards': len(info['shards']),
                'inputs': info['inputs'],
                'quarantined': info['quarantined'],
                'duplicates': info['duplicates'],
                'class_counts': {label: info['class_counts'].get(label, 0) for label in labels},
                'shards': info['shards'],
            }
            for split, info in sorted(splits.items())
        },
        'counts': counts,
        'quarantine': quarantine,
        'duplicates': duplicates or {},
        'decoding': decoding or {},
        'index': index,
        'record_options': record_options,
        'label_order': label_order,
        'refresh': refresh,
    }


def dumps(metadata):
    return json.dumps(metadata, indent=2, sort_keys=True, ensure_ascii=False) + '\n'


def loads(text):
    """Parses ``dataset.json`` text and checks it is a format this code understands."""
    metadata = json.loads(text)
    if metadata.get('format_version') != FORMAT_VERSION:
        raise ValueError(f"unsupported dataset.json format_version {metadata.get('format_version')!r}; "
                         f'this code reads {FORMAT_VERSION}')
    return metadata


def image_shape(metadata):
    """(height, width, channels) of every decoded image in the dataset."""
    image = metadata['image']
    return image['height'], image['width'], image['channels']


def num_examples(metadata, split):
    return metadata['splits'][split]['num_examples']
