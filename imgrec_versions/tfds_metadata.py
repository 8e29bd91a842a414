"""TFDS's metadata for a version folder, so ``tfds.builder_from_directory(version_dir)`` reads it as is.

TFDS reads ``dataset_info.json`` (the DatasetInfo proto as JSON: splits, shard lengths, file-name
template), ``features.json`` (the FeatureConnector tree) and one ``<feature key>.labels.txt`` per
ClassLabel. Written here from the contract and dataset.json, without TFDS or TensorFlow (Beam workers
have neither). TFDS flattens nested FeaturesDict keys with '/', so the contract's key ``image/encoded``
is feature ``encoded`` inside dict ``image``: the records need no change, and ``as_dataset`` yields
``example['image']['encoded']`` (the decoded uint8 image) and ``example['image']['class']['label']``.
No supervised keys: TFDS looks them up at the top level only, so ``as_supervised`` is not offered.
"""
import json
import re

from contract import features as F, layout, metadata
from imgrec_storage import fileio

# The shards' names (layout.shard_file_name) in TFDS's template language: the same names up to 99,999
# shards a split (TFDS pads to the digits of the shard count, at least 5).
SHARD_TEMPLATE = '{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}'
FILE_FORMAT = 'tfrecord'
# TFDS needs a semantic version; ours (a folder name) is in the description.
TFDS_VERSION = '1.0.0'
_PACKAGE = 'tensorflow_datasets.core.features.'
_DICT = _PACKAGE + 'features_dict.FeaturesDict'


def labels_file_name(key=F.LABEL):
    """The file TFDS reads a ClassLabel's names from: the feature's path with '-' for '/'."""
    return key.replace('/', '-') + '.labels.txt'


def tfds_name(name):
    """A dataset name TFDS accepts (lower-case snake case, starting with a letter)."""
    snake = re.sub(r'[^a-z0-9]+', '_', name.lower()).strip('_')
    return snake if snake[:1].isalpha() else f'dataset_{snake}'


def _connector(key, dtype, document):
    if key == F.IMAGE_ENCODED:
        height, width, channels = metadata.image_shape(document)
        return {'pythonClassName': _PACKAGE + 'image_feature.Image',
                'image': {'shape': {'dimensions': [str(height), str(width), str(channels)]},
                          'dtype': 'uint8', 'encodingFormat': document['image']['format'].lower()}}
    if key == F.LABEL:
        return {'pythonClassName': _PACKAGE + 'class_label_feature.ClassLabel',
                'classLabel': {'numClasses': str(len(document['labels']))}}
    if dtype == F.BYTES:
        return {'pythonClassName': _PACKAGE + 'text_feature.Text', 'text': {}}
    return {'pythonClassName': _PACKAGE + 'scalar.Scalar',
            'tensor': {'shape': {}, 'dtype': 'int64', 'encoding': 'none'}}


def features_json(document):
    """The FeaturesDict tree of the contract's features, nested at each '/' of their keys."""
    root = {}
    for key, dtype in sorted(document['features'].items()):
        *parents, leaf = key.split('/')
        node = root
        for parent in parents:
            node = node.setdefault(parent, {'pythonClassName': _DICT, 'featuresDict': {'features': {}}})
            node = node['featuresDict']['features']
        node[leaf] = _connector(key, dtype, document)
    return {'pythonClassName': _DICT, 'featuresDict': {'features': root}}


def dataset_info_json(document):
    """The DatasetInfo of a version: its splits' shard lengths and bytes, and the shard name template."""
    return {
        'name': tfds_name(document['name']),
        'version': TFDS_VERSION,
        'description': f"{document['name']} version {document['version']}, built by build-dataset "
                       f'(see dataset.json and report.html).',
        'fileFormat': FILE_FORMAT,
        'moduleName': 'pipelines.build_dataset',
        'splits': [{'name': split, 'filepathTemplate': SHARD_TEMPLATE,
                    'shardLengths': [str(shard['records']) for shard in info['shards']],
                    'numBytes': str(sum(shard['bytes'] for shard in info['shards']))}
                   for split, info in document['splits'].items()],
    }


def files(document):
    """{file name: bytes} of TFDS's metadata for the version ``document`` (dataset.json) describes."""
    as_json = lambda value: (json.dumps(value, indent=2, sort_keys=True) + '\n').encode()  # noqa: E731
    return {
        layout.TFDS_DATASET_INFO: as_json(dataset_info_json(document)),
        layout.TFDS_FEATURES: as_json(features_json(document)),
        labels_file_name(): ''.join(f'{label}\n' for label in document['labels']).encode('utf-8'),
    }


def write(version_dir, document, policy=None):
    """Writes TFDS's metadata files into ``version_dir`` (local or gs://)."""
    for name, data in files(document).items():
        fileio.write_bytes(layout.join(version_dir, name), data, policy)
