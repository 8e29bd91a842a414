"""train-model on damaged datasets and runaway losses: one line on stderr, exit 1, nothing exported.

Every case runs the real command in a subprocess, so the lines TensorFlow itself prints (which differ
between CPUs) would show up in stderr if they reached the user.
"""
import json
import os
import subprocess
import sys

import pytest

from imgrec.contract import layout
from tests import training_fixtures as fixtures

SHARD = layout.shard_file_name('train', 1, 2)


@pytest.fixture
def data(tmp_path):
    """A small published dataset: 2 train shards of 12 records, 1 validation shard of 8."""
    fixtures.write_dataset(str(tmp_path / 'data'), {'train': (24, 2), 'validation': (8, 1)})
    return tmp_path / 'data'


def _train(data, model_dir, *argv):
    return subprocess.run([sys.executable, '-m', 'imgrec.training.train', '--data', str(data), '--epochs', '1',
                           '--batch_size', '4', '--model_dir', str(model_dir), *argv],
                          capture_output=True, text=True, timeout=300, cwd=fixtures.REPO_ROOT)


def _one_line_error(result):
    assert result.returncode == 1, result.stderr[-3000:]
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr[-3000:]
    assert lines[0].startswith('train-model: error: ')
    return lines[0]


def _edit_train_count(data, index, delta):
    path = data / 'v1' / layout.DATASET_JSON
    document = json.loads(path.read_text())
    document['splits']['train']['shards'][index]['records'] += delta
    document['splits']['train']['num_examples'] += delta
    path.write_text(json.dumps(document))


def _record_offsets(path):
    """Byte offset of every record of a TFRecord file (length header, its CRC, data, data CRC)."""
    offsets, data = [], path.read_bytes()
    offset = 0
    while offset < len(data):
        offsets.append(offset)
        offset += 12 + int.from_bytes(data[offset:offset + 8], 'little') + 4
    return offsets


def test_a_flipped_byte_names_the_shard_record_and_offset(data, tmp_path):
    shard = data / 'v1' / SHARD
    record_3 = _record_offsets(shard)[3]
    raw = bytearray(shard.read_bytes())
    raw[record_3 + 12 + 40] ^= 0xFF  # inside record 3's data: its CRC no longer matches
    shard.write_bytes(bytes(raw))
    line = _one_line_error(_train(data, tmp_path / 'model'))
    assert f'{SHARD}: corrupt TFRecord data checksum at record 3 (byte offset {record_3})' in line
    assert not (tmp_path / 'model' / 'export').exists()


def test_a_truncated_shard_is_refused_before_training(data, tmp_path):
    shard = data / 'v1' / SHARD
    size = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[:size - 100])
    line = _one_line_error(_train(data, tmp_path / 'model'))
    assert f'{SHARD} holds {size - 100} bytes but dataset.json says {size}' in line
    assert not (tmp_path / 'model').exists()


def test_a_missing_shard_is_refused_before_training(data, tmp_path):
    (data / 'v1' / SHARD).unlink()
    line = _one_line_error(_train(data, tmp_path / 'model'))
    assert f'{SHARD} is missing' in line
    assert not (tmp_path / 'model').exists()


@pytest.mark.parametrize('delta', [+4, -4], ids=['raised', 'lowered'])
def test_an_edited_record_count_names_the_shard(data, tmp_path, delta):
    _edit_train_count(data, 1, delta)
    line = _one_line_error(_train(data, tmp_path / 'model'))
    assert f'{SHARD} holds 12 records but dataset.json says {12 + delta}' in line
    assert not (tmp_path / 'model' / 'export').exists()


def test_a_loss_that_becomes_nan_stops_training_naming_the_step_and_exports_nothing(data, tmp_path):
    line = _one_line_error(_train(data, tmp_path / 'model', '--learning_rate', '1e38'))
    assert 'the training loss became nan at step ' in line
    assert not (tmp_path / 'model' / 'export').exists()


def test_a_flipped_byte_on_a_remote_filesystem_is_named_too(data, tmp_path, capsys):
    """TensorFlow's in-memory ram:// filesystem stands in for gs://: the shard is re-read through tf.io.gfile."""
    import tensorflow as tf

    from imgrec.training import train

    shard = data / 'v1' / SHARD
    record_2 = _record_offsets(shard)[2]
    raw = bytearray(shard.read_bytes())
    raw[record_2 + 12 + 30] ^= 0x01
    shard.write_bytes(bytes(raw))
    tf.io.gfile.makedirs('ram://damaged/data/v1')
    for name in [layout.LATEST] + [f'v1/{name}' for name in os.listdir(data / 'v1')]:
        tf.io.gfile.copy(str(data / name), f'ram://damaged/data/{name}', overwrite=True)
    assert train.main(['--data', 'ram://damaged/data', '--epochs', '1', '--batch_size', '4',
                       '--model_dir', 'ram://damaged/model']) == 1
    err = capsys.readouterr().err
    assert err.count('\n') == 1
    assert f'ram://damaged/data/v1/{SHARD}: corrupt TFRecord data checksum at record 2 (byte offset {record_2})' in err
    assert not tf.io.gfile.exists('ram://damaged/model/export')
