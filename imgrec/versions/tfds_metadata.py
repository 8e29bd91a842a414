"""TFDS's metadata for a version folder, so ``tfds.builder_from_directory(version_dir)`` reads it as is.

TFDS reads ``dataset_info.json`` (the DatasetInfo proto as JSON: splits, shard lengths, file-name
template, file formats, supervised keys), ``features.json`` (the FeatureConnector tree) and one
``<feature>.labels.txt`` per ClassLabel. Written here from the contract and dataset.json, without TFDS or
TensorFlow (Beam workers have neither). docs/array-record.md says what each choice gives a user.

Features: one top-level feature per contract key, named by the key itself (``image/encoded``,
``image/class/label``...). TFDS looks a feature's Example key up by its path, so the records need no
change and keep the Model Garden keys, and nothing is stored twice. Top-level features are what TFDS's
``as_supervised`` (``supervised_keys`` name top-level features only) and ``tfds.show_examples`` (it looks
for a top-level Image and ClassLabel) need: so ``as_supervised=True`` yields (uint8 image, label), and
``as_dataset`` yields ``example['image/encoded']``. Nesting at each '/' instead (``example['image']
['encoded']``) offers neither; renaming the features ``image`` and ``label`` would mean new Example keys.

Formats: ``fileFormat`` is TFRecord, so ``as_dataset`` (tf.data, which TFDS offers for TFRecord only) reads
the TFRecord shards; with ArrayRecord shards, ``alternativeFileFormats`` names them, and
``as_data_source`` (random access, which TFDS offers for ArrayRecord only) picks them. TFDS's own choice:
``as_data_source`` switches that builder to ArrayRecord for good, so its ``as_dataset`` then fails; use
one builder for each (``builder_from_directory(..., file_format='array_record')`` is refused by TFDS
4.9.10, as the primary format is already set).

By name: TFDS looks for ``data_dir/NAME/VERSION/`` with VERSION a semantic version and takes the highest
(``read_only_builder._find_builder_dir``). Once LATEST names a new local version, its view
``OUT/<tfds name>/<semantic version>/`` holds the same metadata, numbered one above the views already
there (``imgrec.contract.version_ref.next_semantic_version``), with shard templates that lead to
``../../<version>/``: so ``tfds.load(NAME, data_dir=OUT)`` reads the version's own shards. The version
folder's own dataset_info.json stays ``TFDS_VERSION``, so its bytes depend on the inputs and options
alone, not on the output's history. Not where the storage does not resolve relative links (gs://): TFDS
joins a template to the view folder without resolving ``..`` (and an absolute URL becomes a sub-path), so a
gs:// view could not reach the shards; there ``builder_from_directory(OUT/<version>)``.
"""
import json
import re

from imgrec.contract import features as F, layout, metadata, version_ref
from imgrec.storage import storage as storage_lib
from imgrec.storage.output import Output

# The shards' names (layout.shard_file_name) in TFDS's template language: the same names up to 99,999
# shards a split (TFDS pads to the digits of the shard count, at least 5), for either format.
SHARD_TEMPLATE = '{SPLIT}-{SHARD_X_OF_Y}.{FILEFORMAT}'
FILE_FORMAT = layout.TFRECORD
# The version folder's own semantic version; by name, a version is its view's number (write_view).
TFDS_VERSION = version_ref.FIRST_SEMANTIC_VERSION
SUPERVISED_KEYS = (F.IMAGE_ENCODED, F.LABEL)
_PACKAGE = 'tensorflow_datasets.core.features.'
_DICT = _PACKAGE + 'features_dict.FeaturesDict'


def labels_file_name(key=F.LABEL):
    """The file TFDS reads a top-level ClassLabel's names from: the feature's name with '.' for '/'."""
    return key.replace('/', '.') + '.labels.txt'


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
    """The FeaturesDict of the contract's features: one top-level feature a key, named by the key."""
    return {'pythonClassName': _DICT, 'featuresDict': {'features': {
        key: _connector(key, dtype, document) for key, dtype in sorted(document['features'].items())}}}


def _split(name, info):
    return {'name': name, 'filepathTemplate': SHARD_TEMPLATE,
            'shardLengths': [str(shard['records']) for shard in info['shards']],
            'numBytes': str(sum(shard['bytes'] for shard in info['shards']))}


def dataset_info_json(document):
    """The DatasetInfo of a version: its splits' shard lengths and bytes, shard name template and formats."""
    info = {
        'name': tfds_name(document['name']),
        'version': TFDS_VERSION,
        'description': f"{document['name']} version {document['version']}, built by build-dataset "
                       f'(see dataset.json and report.html).',
        'fileFormat': FILE_FORMAT,
        'moduleName': 'imgrec.pipelines.build_dataset',
        'supervisedKeys': {'tuple': {'items': [{'featureKey': key} for key in SUPERVISED_KEYS]}},
        'splits': [_split(split, info) for split, info in document['splits'].items()],
    }
    alternatives = [name for name in metadata.formats(document) if name != FILE_FORMAT]
    if alternatives:
        info['alternativeFileFormats'] = alternatives
    return info


def _as_json(value):
    return (json.dumps(value, indent=2, sort_keys=True) + '\n').encode()


def files(document):
    """{file name: bytes} of TFDS's metadata for the version ``document`` (dataset.json) describes."""
    return {
        layout.TFDS_DATASET_INFO: _as_json(dataset_info_json(document)),
        layout.TFDS_FEATURES: _as_json(features_json(document)),
        labels_file_name(): ''.join(f'{label}\n' for label in document['labels']).encode('utf-8'),
    }


def _view_target(storage, view_dir):
    """The version a view folder leads to, from its dataset_info.json (None when it holds none)."""
    try:
        found = storage.read_versioned(layout.join(view_dir, layout.TFDS_DATASET_INFO))
        splits = (json.loads(found.data).get('splits') if found is not None else None) or [{}]
    except (OSError, ValueError, AttributeError):
        return None
    return layout.tfds_view_version(splits[0].get('filepathTemplate', ''))


def _views(storage, views):
    """The semantic versions of the views in ``views``, sorted (none when there is no such folder)."""
    return sorted(name for name in (entry.path.rstrip('/').rsplit('/', 1)[-1] for entry in storage.list_level(views)
                                    if entry.is_folder) if version_ref.is_semantic_version(name))


def write_view(output: Output, version: str) -> None:
    """Publishes the TFDS view of the published ``version`` in ``output``, numbered one above the views there,
    and removes the views of versions since deleted (pruned): ``tfds.load(NAME, data_dir=output.root)`` reads
    the newest by name.

    Written after LATEST moved, features.json last: TFDS takes a folder holding it for a dataset. An output
    whose storage does not resolve '..' (gs://) gets none (the module's docstring says why).
    """
    storage, root = output.storage, output.root
    if not storage.resolves_relative_links:
        return
    views = layout.join(root, metadata_name(root, version, storage))
    # Once: a retried publication finds its whole view there (features.json is written last).
    if not any(_view_target(storage, layout.join(views, name)) == version
               and storage.exists(layout.join(views, name, layout.TFDS_FEATURES)) for name in _views(storage, views)):
        _write_view(storage, root, version)
    _remove_stale_views(storage, root, views)


def metadata_name(output, version, storage=None):
    """The dataset's TFDS name, from the version's dataset_info.json."""
    path = layout.join(output, version, layout.TFDS_DATASET_INFO)
    return json.loads(storage_lib.given_or_default(path, storage).read(path))['name']


def _write_view(storage, output, version):
    version_dir = layout.join(output, version)
    info = json.loads(storage.read(layout.join(version_dir, layout.TFDS_DATASET_INFO)))
    for split in info['splits']:
        split['filepathTemplate'] = layout.TFDS_VIEW_TO_VERSION.format(version=version) + split['filepathTemplate']
    views = layout.tfds_views_dir(output, info['name'])
    info['version'] = version_ref.next_semantic_version(_views(storage, views))
    view_dir = layout.join(views, info['version'])
    for name in (labels_file_name(), layout.TFDS_DATASET_INFO, layout.TFDS_FEATURES):  # features.json last
        data = _as_json(info) if name == layout.TFDS_DATASET_INFO else storage.read(layout.join(version_dir, name))
        storage.write(layout.join(view_dir, name), data)


def _remove_stale_views(storage, output, views):
    """The views of versions deleted since (pruned) go with them."""
    for name in _views(storage, views):
        target = _view_target(storage, layout.join(views, name))
        if target and not storage.exists(layout.join(output, target, layout.DATASET_JSON)):
            storage.delete_tree(layout.join(views, name))
