"""--formats tfrecord,array_record: ArrayRecord shards holding the TFRecord shards' records one for one,
listed in dataset.json, placed by the record index, checked by verify-dataset, read by TFDS's
as_data_source, rebuilt by a refresh from reused records, and written to gs:// too."""
import io
import os
import shutil

import pyarrow.parquet as pq
import pytest
import tensorflow_datasets as tfds
from array_record.python.array_record_module import ArrayRecordReader

from imgrec.contract import features as F, index as I, layout, metadata
from imgrec.contract.example import decode_example
from imgrec.contract.tfrecord import read_records
from imgrec.console.errors import BuildFailed
from imgrec.storage import array_records, retries, storage
from imgrec.versions import verify
from imgrec.pipelines import launcher, summary
from imgrec.samples.generate import write_images
from tests.conftest import SMALL, build
from tests.contract_checks import check_version, load_version
from tests.fault_proxy import WRITE, faulty_gcs, gcs_emulator  # noqa: F401  (the fixtures)

BOTH = ('--formats', 'tfrecord,array_record')


@pytest.fixture(scope='module')
def both(sample_images, tmp_path_factory):
    """``sample_images`` built as conftest's ``built_dataset`` is, with ArrayRecord shards too."""
    output = tmp_path_factory.mktemp('both')
    return build(sample_images, output, '--splits', 'train=75,validation=25', '--num_shards',
                 'train=3,validation=2', '--version', 'v1', *BOTH)


def _tfrecords(path):
    with open(path, 'rb') as stream:
        return list(read_records(stream))


def _array_records(path):
    reader = ArrayRecordReader(path)
    try:
        return reader.read(0, reader.num_records()) if reader.num_records() else []
    finally:
        reader.close()


def test_array_record_shards_hold_the_tfrecord_records_one_for_one(both, built_dataset):
    document, _ = check_version(both, image_size=(32, 32))  # the whole contract, ArrayRecord files listed
    version_dir, _ = load_version(both)
    assert document['formats'] == ['tfrecord', 'array_record']
    assert document['options']['formats'] == ['tfrecord', 'array_record']
    for split, info in document['splits'].items():
        entries = metadata.array_record_shards(document, split)
        assert [e['file'] for e in entries] == [layout.shard_file_name(split, i, info['num_shards'], 'array_record')
                                                for i in range(info['num_shards'])]
        for shard, entry in zip(info['shards'], entries):
            path = os.path.join(version_dir, entry['file'])
            records = _array_records(path)
            assert records == _tfrecords(os.path.join(version_dir, shard['file']))  # same bytes, same order
            assert entry['records'] == shard['records'] == len(records)
            assert entry['bytes'] == os.path.getsize(path)
            assert 'group_size:1,' in array_records.writer_options(path)
            assert ',uncompressed,' in array_records.writer_options(path)
    # The TFRecord shards are byte for byte those of a TFRecord-only build of the same input.
    plain_dir, plain = load_version(built_dataset)
    assert plain['formats'] == ['tfrecord'] and 'array_record_shards' not in plain['splits']['train']
    for info in plain['splits'].values():
        for shard in info['shards']:
            with open(os.path.join(plain_dir, shard['file']), 'rb') as a, \
                    open(os.path.join(version_dir, shard['file']), 'rb') as b:
                assert a.read() == b.read()


def test_the_index_gives_each_records_position_in_its_array_record_shard(both, built_dataset):
    version_dir, document = load_version(both)
    rows = [row for name in document['index']['files']
            for row in pq.read_table(os.path.join(version_dir, name)).to_pylist()]
    assert len(rows) == document['counts']['written']
    for row in rows:
        with open(os.path.join(version_dir, row[I.SHARD]), 'rb') as stream:
            stream.seek(row[I.OFFSET])
            (from_tfrecord,) = read_records(io.BytesIO(stream.read(row[I.LENGTH])))
        reader = ArrayRecordReader(os.path.join(version_dir, layout.array_record_file_name(row[I.SHARD])),
                                   'readahead_buffer_size:0')
        assert reader.read([row[I.ARRAY_RECORD_POSITION]]) == [from_tfrecord]
        reader.close()
        assert decode_example(from_tfrecord)[F.SOURCE].decode() == row[I.SOURCE]
    plain_dir, plain = load_version(built_dataset)
    assert all(row[I.ARRAY_RECORD_POSITION] is None
               for row in pq.read_table(os.path.join(plain_dir, plain['index']['files'][0])).to_pylist())


def test_verify_dataset_checks_both_formats_record_for_record(both, tmp_path, capsys):
    version_dir, document = load_version(both)
    assert verify.main([both]) == 0
    assert 'ArrayRecord shards, record for record' in capsys.readouterr().out
    # Same size, same count, other records: the ArrayRecord shards of two train shards swapped.
    damaged = str(tmp_path / 'v1')
    shutil.copytree(version_dir, damaged)
    first, second = (entry['file'] for entry in metadata.array_record_shards(document, 'train')[:2])
    os.replace(os.path.join(damaged, first), os.path.join(damaged, 'swap'))
    os.replace(os.path.join(damaged, second), os.path.join(damaged, first))
    os.replace(os.path.join(damaged, 'swap'), os.path.join(damaged, second))
    assert verify.main([damaged]) == 1
    err = capsys.readouterr().err
    assert f'{first} record 0: differs from record 0 of {layout.shard_file_name("train", 0, 3)}' in err
    assert f'{second} record 0: differs' in err
    os.remove(os.path.join(damaged, first))
    assert verify.main([damaged]) == 1
    assert f'{first}: missing' in capsys.readouterr().err


def test_tfds_indexes_the_array_record_shards_with_as_data_source(both):
    version_dir, document = load_version(both)
    sources = tfds.builder_from_directory(version_dir).as_data_source()
    for split, info in document['splits'].items():
        source = sources[split]
        assert len(source) == info['num_examples']
        in_order = [record for shard in info['shards']
                    for record in _tfrecords(os.path.join(version_dir, shard['file']))]
        for position in (0, len(source) - 1, len(source) // 2):
            example = source[position]
            expected = decode_example(in_order[position])
            assert example[F.SOURCE] == expected[F.SOURCE] and example[F.LABEL] == expected[F.LABEL]
            assert example[F.IMAGE_ENCODED].shape == (32, 32, 3)
    # The same version still reads as a tf.data.Dataset (TFRecord) from a builder of its own.
    builder = tfds.builder_from_directory(version_dir)
    assert sum(1 for _ in builder.as_dataset(split='validation')) == document['splits']['validation']['num_examples']


def test_a_refresh_reuses_tfrecord_records_to_add_array_record_shards(sample_images, tmp_path):
    images = tmp_path / 'images'
    shutil.copytree(sample_images, images)
    output = build(str(images), tmp_path / 'out', '--version', 'v1', '--num_shards', 'train=2,validation=1')
    write_images(str(tmp_path / 'more'), 1, **SMALL)
    new = tmp_path / 'more' / 'circle' / os.listdir(tmp_path / 'more' / 'circle')[0]
    shutil.copy(new, images / 'circle' / 'new.jpg')
    config, result = launcher.run(['--input', str(images), '--output', output, '--image_size', '32',
                                        '--version', 'v2', '--num_shards', 'train=2,validation=1',
                                        '--direct_running_mode', 'in_memory', *BOTH])
    document = load_version(output)[1]
    assert document['version'] == 'v2' and document['refresh']['mode'] == 'incremental'
    assert document['refresh']['reused'] == summary.counter(result, 'images_reused') > 0
    assert document['refresh']['decoded'] == 1
    assert verify.main([output]) == 0  # the ArrayRecord shards agree with the TFRecord shards


def test_array_record_shards_on_gcs(gcs_emulator, sample_images, tmp_path):
    bucket = gcs_emulator.create_bucket('array-record-out')
    output = f'{bucket}/ds'
    launcher.run(['--input', sample_images, '--output', output, '--image_size', '32', '--version', 'v1',
                       '--num_shards', 'train=2,validation=1', '--direct_running_mode', 'in_memory', *BOTH])
    assert verify.main([output]) == 0  # read back from gs:// through a local copy
    local = gcs_emulator.download_folder(output, tmp_path / 'out')
    document, _ = check_version(local, image_size=(32, 32))
    version_dir = os.path.join(local, 'v1')
    for split, info in document['splits'].items():
        for shard, entry in zip(info['shards'], metadata.array_record_shards(document, split)):
            assert _array_records(os.path.join(version_dir, entry['file'])) == _tfrecords(
                os.path.join(version_dir, shard['file']))


def _write_to_gcs(url, records):
    policy = retries.RetryPolicy(deadline_s=2.0, initial_delay_s=0.01, max_delay_s=0.05)
    with array_records.ArrayRecordFile(url, storage.storage_for(url, policy)) as shard:
        for record in records:
            shard.write(record)
        return shard.close()


def test_a_gcs_array_record_upload_is_retried(gcs_emulator, faulty_gcs, tmp_path):
    bucket = gcs_emulator.create_bucket('array-record-faults')
    faulty_gcs.configure(rate=0.6, seed=3, kinds=[WRITE], faults=['503'])
    records = [bytes([n]) * (100 + n) for n in range(50)]
    size = _write_to_gcs(f'{bucket}/shard.array_record', records)
    assert ('write', '503', 'shard.array_record') in faulty_gcs.faulted, 'the seed gave no fault: choose another'
    (tmp_path / 'copy').write_bytes(gcs_emulator.read_bytes(f'{bucket}/shard.array_record'))
    assert size == (tmp_path / 'copy').stat().st_size
    assert list(array_records.read_records(str(tmp_path / 'copy'), storage.storage_for(''))) == records


def test_a_gcs_array_record_upload_that_keeps_failing_is_one_line(gcs_emulator, faulty_gcs):
    bucket = gcs_emulator.create_bucket('array-record-down')
    faulty_gcs.configure(rate=1.0, kinds=[WRITE], faults=['503'])
    with pytest.raises(BuildFailed) as failed:
        _write_to_gcs(f'{bucket}/shard.array_record', [b'record'])
    assert str(failed.value).startswith(f'cannot write {bucket}/shard.array_record: ServiceUnavailable (HTTP 503)')
    assert '\n' not in str(failed.value)


def test_the_same_records_make_the_same_bytes(tmp_path):
    records = [bytes([n % 251]) * (n * 37 % 900) for n in range(300)]
    sizes, contents = [], []
    for name in ('a', 'b'):
        path = str(tmp_path / f'{name}.array_record')
        with array_records.ArrayRecordFile(path, storage.storage_for(path)) as shard:
            for record in records:
                shard.write(record)
            sizes.append(shard.close())
        with open(path, 'rb') as stream:
            contents.append(stream.read())
        assert list(array_records.read_records(path, storage.storage_for(path))) == records
    assert contents[0] == contents[1] and sizes == [len(contents[0])] * 2
