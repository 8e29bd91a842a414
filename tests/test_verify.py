"""verify-dataset on real builds: good local and gs:// versions pass; a flipped byte, a truncated or
missing shard and an edited count each fail with a line naming the shard (and the record)."""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import pytest

from imgrec.contract import features as F, layout, tfrecord
from imgrec.contract.example import decode_example, encode_example
from imgrec.versions import verify
from tests.gcs_emulator import gcs_emulator  # noqa: F401  (the fixture)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def details_in_tmp_path(tmp_path, monkeypatch):
    """The files of problems verify-dataset writes go to the test's own folder, not /tmp."""
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))


@pytest.fixture
def version(built_dataset, tmp_path):
    """A copy of the built version v1 that a test may damage; returns its folder."""
    return shutil.copytree(os.path.join(built_dataset, 'v1'), tmp_path / 'v1')


def _frames(path):
    """[(offset, data length)] of each TFRecord frame of a shard."""
    data, frames, offset = open(path, 'rb').read(), [], 0
    while offset < len(data):
        (length,) = struct.unpack('<Q', data[offset:offset + 8])
        frames.append((offset, length))
        offset += 12 + length + 4
    return frames


def _verify(path, capsys, *args):
    status = verify.main([str(path), *args])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.splitlines()


def test_a_good_version_passes_in_one_quiet_line(built_dataset):
    run = subprocess.run([sys.executable, '-m', 'imgrec.versions.verify', built_dataset], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ''  # TensorFlow's start-up lines are held back without --verbose
    document = json.load(open(os.path.join(built_dataset, 'v1', layout.DATASET_JSON)))
    assert run.stdout.splitlines() == [run.stdout.strip()]
    assert run.stdout.startswith(f"verify-dataset: OK: {document['counts']['written']} records "
                                 f"(train {document['splits']['train']['num_examples']}, validation "
                                 f"{document['splits']['validation']['num_examples']}) in 5 shards")
    assert 'records/s' in run.stdout


def test_verbose_shows_what_tensorflow_prints_and_passes_the_same(built_dataset):
    run = subprocess.run([sys.executable, '-m', 'imgrec.versions.verify', '--verbose', built_dataset], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith('verify-dataset: OK: 60 records (train ') and run.stdout.count('\n') == 1


def test_sample_mode_checks_n_records_a_shard(built_dataset, capsys):
    status, out, _ = _verify(built_dataset, capsys, '--sample', '2')
    assert status == 0
    assert out[0].startswith('verify-dataset: OK: 10 records (train 6, validation 4) in 5 shards')
    assert '2 records a shard sampled' in out[0]


def test_a_flipped_byte_names_the_shard_and_record(version, capsys):
    shard = version / 'train-00001-of-00003.tfrecord'
    offset, length = _frames(shard)[2]
    data = bytearray(shard.read_bytes())
    data[offset + 12 + length // 2] ^= 0x01
    shard.write_bytes(bytes(data))
    status, out, err = _verify(version, capsys)
    assert status == 1 and out == []
    assert err[0] == ('verify-dataset: train-00001-of-00003.tfrecord record 2: corrupt TFRecord data checksum; '
                      'the shard cannot be read past it')


def test_a_truncated_shard_is_named(version, capsys):
    shard = version / 'validation-00000-of-00002.tfrecord'
    records = len(_frames(shard))
    shard.write_bytes(shard.read_bytes()[:-10])
    status, _, err = _verify(version, capsys)
    assert status == 1
    assert f'verify-dataset: validation-00000-of-00002.tfrecord record {records - 1}: truncated TFRecord; ' \
           'the shard cannot be read past it' in err
    assert any(line.startswith('verify-dataset: validation-00000-of-00002.tfrecord: ') and 'bytes, dataset.json says'
               in line for line in err)


def test_a_missing_shard_is_named(version, capsys):
    os.remove(version / 'train-00002-of-00003.tfrecord')
    status, _, err = _verify(version, capsys)
    assert status == 1
    assert err[0] == 'verify-dataset: train-00002-of-00003.tfrecord: missing'
    assert len(err) == 2 and err[1].startswith('verify-dataset: 1 damaged shard: ')
    details = err[1].split('every problem is in ')[1]
    try:
        assert any(line.startswith('split train: ') for line in open(details))
    finally:
        os.remove(details)


def test_each_fault_is_one_line_and_what_follows_from_them_is_counted_and_kept_in_a_file(version):
    """One shard corrupted, one deleted: two lines for the faults and one counting what follows, not ~30."""
    train = version / 'train-00001-of-00003.tfrecord'
    data = bytearray(train.read_bytes())
    data[len(data) // 2] ^= 0x01
    train.write_bytes(bytes(data))
    os.remove(version / 'validation-00000-of-00002.tfrecord')
    document = json.loads((version / layout.DATASET_JSON).read_text())
    listed = {shard['file']: shard['records'] for split in document['splits'].values() for shard in split['shards']}
    run = subprocess.run([sys.executable, '-m', 'imgrec.versions.verify', str(version)], cwd=ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 1 and run.stdout == ''
    lines = run.stderr.splitlines()
    assert len(lines) == 3, run.stderr
    assert lines[0].startswith('verify-dataset: train-00001-of-00003.tfrecord record ')
    assert lines[0].endswith('; the shard cannot be read past it')
    assert lines[1] == 'verify-dataset: validation-00000-of-00002.tfrecord: missing'
    read = int(lines[0].split(' record ')[1].split(':')[0])  # the records before the fault were read
    lost_train = listed['train-00001-of-00003.tfrecord'] - read
    lost_validation = listed['validation-00000-of-00002.tfrecord']
    assert lines[2].startswith(f'verify-dataset: 2 damaged shards: {lost_train + lost_validation} of the 60 records '
                               f'dataset.json lists cannot be read (train {lost_train}, validation {lost_validation}); ')
    details = lines[2].split('every problem is in ')[1]
    try:
        kept = open(details).read().splitlines()
    finally:
        os.remove(details)
    follows = int(lines[2].split('; ')[1].split(' more lines')[0])
    assert len(kept) == follows + 3 and kept[:2] == [line[len('verify-dataset: '):] for line in lines[:2]]
    assert 'split train: ' in kept[2] and any(' says validation-00000-of-00002.tfrecord offset ' in line
                                              for line in kept)


def test_an_edited_count_is_named(version, capsys):
    path = version / layout.DATASET_JSON
    document = json.loads(path.read_text())
    shard = document['splits']['train']['shards'][0]
    shard['records'] += 1
    path.write_text(json.dumps(document))
    status, _, err = _verify(version, capsys)
    assert status == 1
    assert (f"verify-dataset: train-00000-of-00003.tfrecord: {shard['records'] - 1} records, "
            f"dataset.json says {shard['records']}") in err


def test_no_dataset_is_a_one_line_error(tmp_path, capsys):
    status, _, err = _verify(tmp_path, capsys)
    assert status == 2 and err == [f'verify-dataset: error: no dataset found at {tmp_path}: '
                                   f'expected {layout.DATASET_JSON} or {layout.LATEST} there']


def test_a_gcs_version_passes_and_a_damaged_one_fails(gcs_emulator, built_dataset, capsys):  # noqa: F811
    bucket = gcs_emulator.create_bucket('verify-me')
    gcs_emulator.upload_folder(built_dataset, f'{bucket}/out')
    status, out, err = _verify(f'{bucket}/out', capsys)
    assert status == 0, err
    assert out[0].startswith('verify-dataset: OK: 60 records') and out[0].endswith(f'{bucket}/out/v1')
    shard = f'{bucket}/out/v1/train-00000-of-00003.tfrecord'
    gcs_emulator.upload_bytes(shard, gcs_emulator.read_bytes(shard)[:-1])
    status, _, err = _verify(f'{bucket}/out/v1', capsys)
    assert status == 1 and any(line.startswith('verify-dataset: train-00000-of-00003.tfrecord record ') for line in err)


@pytest.mark.parametrize('args', [[], ['--sample', '0', 'OUT'], ['OUT', '--bogus']])
def test_a_usage_mistake_is_one_line(args, capsys):
    assert verify.main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith('verify-dataset: error: ') and len(err.splitlines()) == 1, err


def test_records_that_frame_well_but_break_the_contract_are_named(version, capsys):
    """A record with good checksums that is no Example, one of another size, one whose label disagrees."""
    shard = version / 'train-00000-of-00003.tfrecord'
    records = list(tfrecord.read_records(io.BytesIO(shard.read_bytes())))
    values = decode_example(records[2])
    records[0] = b'\x0a\x03not an example'
    records[1] = encode_example(dict(values, **{F.IMAGE_WIDTH: 33}))
    records[2] = encode_example(dict(values, **{F.LABEL_TEXT: b'unicorn'}))
    shard.write_bytes(b''.join(tfrecord.frame(record) for record in records))
    document = json.loads((version / layout.DATASET_JSON).read_text())
    document['splits']['train']['shards'][0]['bytes'] = shard.stat().st_size
    (version / layout.DATASET_JSON).write_text(json.dumps(document))
    status, _, err = _verify(version, capsys)
    assert status == 1
    name = 'verify-dataset: train-00000-of-00003.tfrecord'
    assert err[0].startswith(f"{name} record 0: does not parse with the contract's features: ")
    assert err[1] == f'{name} record 1: image/height, width, channels are 32x33x3, dataset.json says 32x32x3'
    label = values[F.LABEL]
    assert err[2] == (f"{name} record 2: label {label} is {document['labels'][label]!r} in labels.txt, "
                      "but the record says 'unicorn'")
    # The unparsable record is missing from the class counts.
    assert any(line.startswith('verify-dataset: split train: ') for line in err[3:])


def test_an_index_row_that_points_elsewhere_is_named(version, capsys):
    import pyarrow.parquet as pq
    document = json.load(open(version / layout.DATASET_JSON))
    part = version / document['index']['files'][0]
    rows = pq.read_table(part).to_pylist()
    rows[0]['offset'] += 1
    pq.write_table(pq.read_table(part).from_pylist(rows, schema=pq.read_table(part).schema), part)
    status, _, err = _verify(version, capsys)
    assert status == 1
    assert any(line.startswith(f"verify-dataset: {document['index']['files'][0]}: row of {rows[0]['source']!r} says")
               for line in err), err
