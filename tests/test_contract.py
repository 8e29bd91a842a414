"""The hand-written Example and TFRecord encoders against TensorFlow's own."""
import io
import random

import pytest
import tensorflow as tf

from imgrec.contract import features as F, layout
from imgrec.contract.example import encode_example
from imgrec.contract.tfrecord import frame, read_records

SPEC = {'a/int': F.INT64, 'b/bytes': F.BYTES, 'c/int': F.INT64, 'z/text': F.BYTES}


def _tf_example(values):
    feature = {}
    for key, dtype in SPEC.items():
        value = values[key]
        if dtype == F.INT64:
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=[value]))
        else:
            raw = value.encode() if isinstance(value, str) else value
            feature[key] = tf.train.Feature(bytes_list=tf.train.BytesList(value=[raw]))
    return tf.train.Example(features=tf.train.Features(feature=feature))


@pytest.mark.parametrize('seed', range(20))
def test_examples_equal_protobufs_deterministic_serialisation(seed):
    rng = random.Random(seed)
    values = {
        'a/int': rng.choice([0, 1, -1, 127, 128, 2 ** 63 - 1, -2 ** 63, rng.randint(-2 ** 40, 2 ** 40)]),
        'b/bytes': bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 127, 128, 300, 70000]))),
        'c/int': rng.randint(0, 1000),
        'z/text': 'ünïcode/path ' * rng.randint(0, 3),
    }
    assert encode_example(values, SPEC) == _tf_example(values).SerializeToString(deterministic=True)


def test_missing_or_extra_features_are_refused():
    with pytest.raises(ValueError, match='missing'):
        encode_example({'a/int': 1}, SPEC)


def test_tfrecord_framing_reads_back_in_tensorflow_and_in_python(tmp_path):
    records = [b'', b'x', bytes(range(256)) * 100]
    path = tmp_path / 'r.tfrecord'
    path.write_bytes(b''.join(frame(r) for r in records))
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(path))] == records
    assert list(read_records(io.BytesIO(path.read_bytes()))) == records
    corrupt = bytearray(path.read_bytes())
    corrupt[20] ^= 1
    with pytest.raises(ValueError, match='checksum'):
        list(read_records(io.BytesIO(bytes(corrupt))))


def test_shard_names_round_trip():
    assert layout.shard_file_name('train', 3, 12) == 'train-00003-of-00012.tfrecord'
    assert layout.parse_shard_file_name('train-00003-of-00012.tfrecord') == ('train', 3, 12)
    assert layout.parse_shard_file_name('dataset.json') is None
