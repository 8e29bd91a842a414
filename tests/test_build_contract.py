"""The on-disk contract of a local build, field by field, read back with TensorFlow."""
import json
import os

from imgrec.contract import features as F, layout, metadata
from tests.conftest import build
from tests.contract_checks import check_version, load_version


def test_every_record_follows_the_contract(built_dataset, sample_images):
    document, by_split = check_version(built_dataset, input_root=sample_images, image_size=(32, 32))
    sources = sorted(r[F.SOURCE].decode() for records in by_split.values() for r in records)
    expected = sorted(f'{label}/{name}' for label in os.listdir(sample_images)
                      for name in os.listdir(os.path.join(sample_images, label)) if not name.endswith('.txt'))
    assert sources == expected  # every image written exactly once


def test_labels_are_the_sorted_class_folders(built_dataset, sample_images):
    version_dir, document = load_version(built_dataset)
    assert document['labels'] == sorted(os.listdir(sample_images))
    with open(os.path.join(version_dir, layout.LABELS_TXT)) as stream:
        assert stream.read() == ''.join(f'{label}\n' for label in document['labels'])


def test_dataset_json_describes_the_build(built_dataset):
    version_dir, document = load_version(built_dataset)
    assert document['version'] == 'v1' == os.path.basename(version_dir)
    assert document['name'] and document['created'].endswith('Z')
    assert document['options']['splits'] == {'train': 75, 'validation': 25}
    assert document['options']['num_shards'] == {'train': 3, 'validation': 2}
    assert document['format_version'] == metadata.FORMAT_VERSION
    assert document['image'] == {'channels': 3, 'format': 'JPEG'}
    assert document['record_options']['image_size'] == [32, 32] and metadata.image_shape(document) == (32, 32, 3)
    # Each option once: those that shape a record's bytes only in record_options.
    assert not set(document['options']) & set(document['record_options'])
    assert {'resize', 'jpeg_quality', 'max_pixels', 'min_size', 'encoder'} <= set(document['record_options'])
    assert [s['num_shards'] for s in document['splits'].values()] == [3, 2]
    counts = document['counts']
    assert counts == {'inputs': 60, 'ignored': 1, 'written': 60, 'quarantined': 0} | {
        key: counts[key] for key in counts if key not in ('inputs', 'ignored', 'written', 'quarantined')}
    assert sum(s['num_examples'] for s in document['splits'].values()) == 60


def test_latest_names_the_newest_complete_version(sample_images, tmp_path):
    build(sample_images, tmp_path, '--version', 'first', '--num_shards', 'train=1,validation=1')
    assert (tmp_path / layout.LATEST).read_text().strip() == 'first'
    build(sample_images, tmp_path, '--version', 'second', '--num_shards', 'train=1,validation=1', '--force')
    assert (tmp_path / layout.LATEST).read_text().strip() == 'second'
    assert json.loads((tmp_path / 'first' / layout.DATASET_JSON).read_text())['version'] == 'first'


def test_pinned_labels_set_the_order_and_refuse_other_classes(sample_images, tmp_path):
    labels_file = tmp_path / 'labels.txt'
    labels_file.write_text('triangle\nsquare\ncircle\n')
    output = build(sample_images, tmp_path / 'out', '--labels', str(labels_file), '--allow_unknown_labels',
                   '--num_shards', 'train=2,validation=1')
    document, by_split = check_version(output, input_root=sample_images)
    assert document['labels'] == ['triangle', 'square', 'circle']
    written = [r for records in by_split.values() for r in records]
    assert {r[F.LABEL_TEXT].decode(): r[F.LABEL] for r in written} == {'triangle': 0, 'square': 1, 'circle': 2}
    assert document['counts']['quarantined'] == 15  # the 'cross' class
    assert document['quarantine']['by_reason'] == {'unknown_label': 15}


def test_default_version_is_a_utc_timestamp(sample_images, tmp_path):
    build(sample_images, tmp_path, '--num_shards', 'train=1,validation=1')
    version = (tmp_path / layout.LATEST).read_text().strip()
    assert len(version) == 16 and version[8] == 'T' and version.endswith('Z') and version[:8].isdigit()
