"""TFDS reads a built version folder as is: tfds.builder_from_directory, and the same images and labels as
training.dataset; as_supervised and show_examples work on the contract's own feature keys. By name,
tfds.load, tfds.builder and tfds.data_source open an output's latest version."""
import collections
import os

import matplotlib
import tensorflow_datasets as tfds
from tensorflow_datasets.core import naming
from tensorflow_datasets.core.features.feature import convert_feature_name_to_filename

from imgrec.contract import features as F, layout, version_ref
from imgrec.versions import tfds_metadata
from imgrec.samples.generate import CLASSES, write_images
from tests.conftest import SMALL, build
from tests.contract_checks import load_version
from imgrec.training import dataset, dataset_version
from imgrec.training.dataset import PAD_LABEL


def _training_examples(output, split):
    """Counter of (label, image bytes) that training.dataset reads from ``split`` (each record once)."""
    config = dataset.InputConfig(split=split, global_batch_size=4, is_training=False)
    found = collections.Counter()
    for images, labels in dataset.InputReader(dataset_version.open_version(output), config).dataset():
        for image, label in zip(images.numpy(), labels.numpy()):
            if label != PAD_LABEL:
                found[(int(label), image.tobytes())] += 1
    return found


def test_tfds_loads_the_version_with_the_same_images_and_labels_as_training(built_dataset):
    version_dir, document = load_version(built_dataset)
    for name, data in tfds_metadata.files(document).items():  # as the build published them
        assert open(os.path.join(version_dir, name), 'rb').read() == data
    builder = tfds.builder_from_directory(version_dir)
    assert builder.info.features[F.LABEL].names == document['labels']
    assert builder.info.features[F.IMAGE_ENCODED].shape == (32, 32, 3)
    for split, info in document['splits'].items():
        assert builder.info.splits[split].num_examples == info['num_examples']
        assert builder.info.splits[split].num_shards == info['num_shards']
        from_tfds = collections.Counter(
            (int(example[F.LABEL]), example[F.IMAGE_ENCODED].numpy().tobytes())
            for example in builder.as_dataset(split=split))
        assert sum(from_tfds.values()) == info['num_examples']
        assert from_tfds == _training_examples(built_dataset, split)
        supervised = collections.Counter((int(label), image.numpy().tobytes())
                                         for image, label in builder.as_dataset(split=split, as_supervised=True))
        assert supervised == from_tfds


def test_tfds_show_examples_draws_the_images_with_their_class_names(built_dataset):
    matplotlib.use('Agg')  # no display
    version_dir, document = load_version(built_dataset)
    builder = tfds.builder_from_directory(version_dir)
    for dataset in (builder.as_dataset(split='validation'), builder.as_dataset(split='validation', as_supervised=True)):
        figure = tfds.show_examples(dataset, builder.info, rows=1, cols=3)
        captions = [axes.get_xlabel() for axes in figure.axes]  # 'circle (0)'
        assert len(captions) == 3 and all(caption.split(' (')[0] in document['labels'] for caption in captions)


def test_tfds_reads_the_class_names_from_the_file_we_name():
    assert tfds_metadata.labels_file_name() == convert_feature_name_to_filename(F.LABEL, None) + '.labels.txt'


def test_tfds_template_gives_our_shard_names_and_names_are_tfds_names():
    for index, count in ((3, 12), (0, 1), (99998, 99999)):  # TFDS pads a 6th digit from 100,000 shards
        template = naming.ShardedFileTemplate(data_dir='/v', template=tfds_metadata.SHARD_TEMPLATE, split='train',
                                              filetype_suffix=tfds_metadata.FILE_FORMAT)
        assert template.relative_filepath(shard_index=index, num_shards=count) == layout.shard_file_name(
            'train', index, count)
    for name in ('My Flowers-2026', '2026 photos'):
        assert naming.DatasetName(tfds_metadata.tfds_name(name)).name == tfds_metadata.tfds_name(name)


def _counts(pairs):
    return collections.Counter((int(label), image.tobytes()) for image, label in pairs)


def test_tfds_opens_the_latest_version_by_name_after_two_builds(tmp_path):
    images, output = str(tmp_path / 'images'), str(tmp_path / 'out')
    write_images(images, 6, classes=CLASSES[:2], **SMALL)
    build(images, output, '--version', 'v1', '--name', 'My Shapes', '--formats', 'tfrecord,array_record')
    write_images(images, 6, classes=CLASSES[2:3], seed=1, **SMALL)  # a third class: the second version differs
    build(images, output, '--version', 'v2', '--name', 'My Shapes', '--formats', 'tfrecord,array_record')
    _, document = load_version(output)
    name, versions = 'my_shapes', ('1.0.0', '1.0.1')
    assert document['version'] == 'v2' and len(document['labels']) == 3
    assert sorted(os.listdir(os.path.join(output, name))) == list(versions)

    builder = tfds.builder(name, data_dir=output)
    assert str(builder.info.version) == versions[1] and builder.info.features[F.LABEL].names == document['labels']
    for split, info in document['splits'].items():
        expected = _training_examples(output, split)
        assert builder.info.splits[split].num_examples == info['num_examples']
        assert _counts((image.numpy(), label) for image, label in builder.as_dataset(split=split, as_supervised=True)) \
            == expected
        loaded, loaded_info = tfds.load(name, data_dir=output, split=split, as_supervised=True, with_info=True)
        assert str(loaded_info.version) == versions[1]
        assert _counts((image.numpy(), label) for image, label in loaded) == expected
        # Random access decodes with another JPEG decoder than tf.data's: the records are told by their source.
        by_source = lambda records: collections.Counter((int(r[F.LABEL]), bytes(r[F.SOURCE])) for r in records)  # noqa: E731
        source = tfds.data_source(name, data_dir=output, split=split)
        assert len(source) == info['num_examples'] and source[0][F.IMAGE_ENCODED].shape == (32, 32, 3)
        assert by_source(source) == by_source(tfds.as_numpy(builder.as_dataset(split=split)))
    older = tfds.builder(f'{name}:{versions[0]}', data_dir=output)  # the first version, by its number
    assert older.info.features[F.LABEL].names == document['labels'][:2]


def test_a_pruned_version_leaves_no_tfds_view(tmp_path):
    """The view of a version --keep_versions deleted goes with it; the others stay."""
    images, output = str(tmp_path / 'images'), str(tmp_path / 'out')
    write_images(images, 4, classes=CLASSES[:2], **SMALL)
    build(images, output, '--version', 'v1')
    write_images(images, 4, classes=CLASSES[2:3], seed=1, **SMALL)
    build(images, output, '--version', 'v2')
    write_images(images, 4, classes=CLASSES[3:4], seed=2, **SMALL)
    build(images, output, '--version', 'v3', '--keep_versions', '2')  # deletes v1
    assert sorted(os.listdir(output)) == ['LATEST', 'images', 'v2', 'v3']
    assert sorted(os.listdir(os.path.join(output, 'images'))) == ['1.0.1', '1.0.2']
    assert tfds.builder('images', data_dir=output).info.splits.total_num_examples == 16


def test_semantic_versions_count_up_from_the_previous_one():
    assert version_ref.next_semantic_version([]) == version_ref.FIRST_SEMANTIC_VERSION == '1.0.0'
    assert version_ref.next_semantic_version(['1.0.9', '1.0.10', '1.0.2']) == '1.0.11'  # by number, not by text
    assert version_ref.next_semantic_version(['20261201T090000Z', 'notes']) == '1.0.0'
    assert layout.tfds_view_version(layout.TFDS_VIEW_TO_VERSION.format(version='v7') + tfds_metadata.SHARD_TEMPLATE) \
        == 'v7'
    assert layout.tfds_view_version(tfds_metadata.SHARD_TEMPLATE) is None
