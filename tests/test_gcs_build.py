"""The real build from gs:// to gs:// on a real GCS server, checked with the same contract as local builds."""
import io
import json

import pyarrow.parquet as pq
import pytest
import tensorflow as tf
from apache_beam.io.filesystems import FileSystems

from imgrec.contract import features as F, index, layout
from imgrec.contract.tfrecord import read_records
from imgrec.storage import storage
from imgrec.pipelines import launcher, summary
from imgrec.samples.generate import write_images
from tests.conftest import SMALL
from tests.contract_checks import check_version
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)


@pytest.fixture(scope='module')
def flowers(gcs_emulator, tmp_path_factory):
    """Local sample images (with a stray text file) and the bucket prefix they were uploaded to."""
    local = tmp_path_factory.mktemp('gcs-images')
    write_images(str(local), 4, **SMALL)
    (local / 'circle' / 'notes.txt').write_text('not an image')
    bucket = gcs_emulator.create_bucket('flowers-in')
    gcs_emulator.upload_folder(local, f'{bucket}/images')
    return local, f'{bucket}/images'


def test_build_from_gcs_to_gcs_on_worker_processes(gcs_emulator, flowers, tmp_path):
    local, prefix = flowers
    output = gcs_emulator.create_bucket('flowers-out') + '/datasets/flowers'
    config, result = launcher.run([
        '--input', prefix, '--output', output, '--image_size', '32', '--version', 'v1',
        '--num_shards', 'train=2,validation=1',
        '--direct_running_mode', 'multi_processing', '--direct_num_workers', '2'])
    assert config.version_dir == output + '/v1'
    assert gcs_emulator.read_bytes(f'{output}/{layout.LATEST}') == b'v1\n'

    downloaded = gcs_emulator.download_folder(output, tmp_path / 'out')
    document, records = check_version(downloaded, input_root=str(local), image_size=(32, 32))
    images = sorted(p.relative_to(local).as_posix() for p in local.rglob('*') if p.suffix in ('.jpg', '.png'))
    assert sorted(r[F.SOURCE].decode() for split in records.values() for r in split) == images
    assert document['counts']['ignored'] == 1
    assert [document['splits'][s]['num_shards'] for s in ('train', 'validation')] == [2, 1]

    # The counters the Dataflow UI shows, as the workers reported them.
    assert summary.counter(result, 'images_listed') == len(images)
    assert summary.counter(result, 'images_decoded') == len(images)
    assert summary.counter(result, 'records_written') == len(images)
    assert summary.counter(result, 'bytes_written') == sum(
        shard['bytes'] for split in document['splits'].values() for shard in split['shards'])


def test_build_from_a_gcs_manifest(gcs_emulator, flowers, tmp_path):
    local, prefix = flowers
    bucket = prefix.rsplit('/', 1)[0]
    absolute = [f'{prefix}/circle/{p.name},circle' for p in sorted((local / 'circle').glob('*.*g'))]
    # Relative paths are relative to the manifest's folder.
    gcs_emulator.upload_folder(local / 'square', f'{bucket}/lists/square')
    relative = [f'square/{p.name},square' for p in sorted((local / 'square').glob('*.*g'))]
    manifest = f'{bucket}/lists/train.csv'
    gcs_emulator.upload_bytes(manifest, '\n'.join(['path,label', *absolute, *relative]).encode())
    output = f'{bucket}/from-manifest'
    launcher.run(['--manifest', manifest, '--output', output, '--image_size', '32', '--version', 'm1',
                       '--direct_running_mode', 'in_memory'])

    document, records = check_version(gcs_emulator.download_folder(output, tmp_path / 'out'), image_size=(32, 32))
    assert document['labels'] == ['circle', 'square']
    sources = sorted(r[F.SOURCE].decode() for split in records.values() for r in split)
    assert sources == sorted(line.split(',')[0] for line in absolute + relative)


def test_the_index_finds_a_record_on_gcs_with_one_ranged_read(gcs_emulator, flowers):
    _, prefix = flowers
    output = gcs_emulator.create_bucket('index-out') + '/ds'
    config, _ = launcher.run(['--input', prefix, '--output', output, '--image_size', '32', '--version', 'v1',
                                   '--direct_running_mode', 'in_memory'])
    document = json.loads(gcs_emulator.read_bytes(f'{config.version_dir}/{layout.DATASET_JSON}'))
    sources = []
    for name in document['index']['files']:
        with FileSystems.open(f'{config.version_dir}/{name}') as stream:
            sources.extend(row[index.SOURCE] for row in pq.read_table(stream).to_pylist())
    assert len(sources) == document['counts']['written'] > 0
    for source in sources:
        row = index.find_record(config.version_dir, document, source, FileSystems.open)
        assert row[index.SOURCE_GENERATION] > 0 and row[index.SOURCE_MTIME_NS] is None
        frame = storage.storage_for(output).read_range(f"{config.version_dir}/{row[index.SHARD]}", row[index.OFFSET],
                                                       row[index.OFFSET] + row[index.LENGTH])
        (record,) = read_records(io.BytesIO(frame))
        feature = tf.train.Example.FromString(record).features.feature
        assert feature[F.SOURCE].bytes_list.value[0].decode() == source
    # Published: no spill files or staging objects are left in the bucket.
    names = gcs_emulator.list(output + '/')
    assert not [name for name in names if layout.is_staging_name(name) or f'/{layout.SPILL_DIR}/' in name]


def test_a_hostile_gcs_manifest_quarantines_each_bad_line_with_its_number(gcs_emulator, flowers, tmp_path):
    from tests.test_manifest import _check_hostile, _hostile_manifest  # pylint: disable=import-outside-toplevel
    local, prefix = flowers
    bucket = prefix.rsplit('/', 1)[0]
    circle, square = sorted((local / 'circle').glob('*.jpg'))[0].name, sorted((local / 'square').glob('*.jpg'))[0].name
    data, expected = _hostile_manifest(f'{prefix}/circle/{circle}', f'{prefix}/square/{square}')
    manifest = f'{bucket}/lists/hostile.csv'
    gcs_emulator.upload_bytes(manifest, data)
    output = f'{bucket}/from-hostile-manifest'
    launcher.run(['--manifest', manifest, '--output', output, '--image_size', '32', '--version', 'm1',
                  '--max_error_rate', '1', '--direct_running_mode', 'in_memory'])
    document = json.loads(gcs_emulator.read_bytes(f'{output}/m1/{layout.DATASET_JSON}'))
    quarantine = [json.loads(line) for line in gcs_emulator.read_bytes(f'{output}/m1/quarantine.jsonl').splitlines()]
    _check_hostile(document, quarantine, expected)
