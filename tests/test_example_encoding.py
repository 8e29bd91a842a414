"""The contract's hand-written Example encoder gives exactly protobuf's deterministic bytes.

``imgrec.contract.example.encode_example`` writes the wire format itself (no TensorFlow, no generated code on
Beam workers), so it is pinned here against protobuf's own ``SerializeToString(deterministic=True)`` of
TensorFlow's ``tf.train.Example``, on random Examples whose lengths and integers cross every varint
boundary, with random keys and Unicode text, and read back by both decoders.
"""
import random

import pytest
from tensorflow.core.example import example_pb2

from imgrec.contract import features as F
from imgrec.contract.example import decode_example, encode_example

# Lengths and integers on both sides of each varint size change (1, 2, 3, 4 bytes), and the int64 extremes.
LENGTHS = (0, 1, 127, 128, 129, 16383, 16384, 2097151, 2097152)
INTEGERS = (0, 1, -1, 127, 128, 16383, 16384, 2 ** 31 - 1, -2 ** 31, 2 ** 63 - 1, -2 ** 63)


def protobuf_bytes(values, spec):
    """protobuf's deterministic serialisation of the same Example."""
    example = example_pb2.Example()
    for key, value in values.items():
        feature = example.features.feature[key]
        if spec[key] == F.INT64:
            feature.int64_list.value.append(value)
        else:
            feature.bytes_list.value.append(value.encode('utf-8') if isinstance(value, str) else value)
    return example.SerializeToString(deterministic=True)


def random_text(rng, length):
    alphabet = 'abcXYZ019_/.-é漢字🙂'
    return ''.join(rng.choice(alphabet) for _ in range(length))


def random_value(rng, dtype):
    if dtype == F.INT64:
        return rng.choice(INTEGERS) if rng.random() < 0.5 else rng.randint(-2 ** 63, 2 ** 63 - 1)
    if rng.random() < 0.3:
        return random_text(rng, rng.randint(0, 40))
    length = rng.choice(LENGTHS[:-2]) if rng.random() < 0.5 else rng.randint(0, 70_000)
    return rng.randbytes(length)


def random_spec(rng):
    """Random keys, none a prefix of another: there protobuf's implementations disagree (``test_prefix_keys``)."""
    keys = {random_text(rng, rng.randint(1, 30)) for _ in range(rng.randint(1, 12))}
    keys = {key for key in keys if not any(other != key and other.startswith(key) for other in keys)}
    return {key: rng.choice((F.BYTES, F.INT64)) for key in keys}


def test_the_contract_examples_equal_protobuf_bytes():
    rng = random.Random(20)
    for _ in range(1000):
        values = {key: random_value(rng, dtype) for key, dtype in F.FEATURES.items()}
        assert encode_example(values) == protobuf_bytes(values, F.FEATURES)


def test_random_specs_equal_protobuf_bytes_and_read_back():
    rng = random.Random(7)
    for _ in range(1000):
        spec = random_spec(rng)
        values = {key: random_value(rng, dtype) for key, dtype in spec.items()}
        encoded = encode_example(values, spec)
        assert encoded == protobuf_bytes(values, spec)
        parsed = example_pb2.Example.FromString(encoded)
        expected = {key: value.encode('utf-8') if isinstance(value, str) else value for key, value in values.items()}
        assert {key: (feature.int64_list.value or feature.bytes_list.value)[0]
                for key, feature in parsed.features.feature.items()} == expected
        assert decode_example(encoded) == expected


@pytest.mark.parametrize('length', LENGTHS)
def test_every_varint_boundary_of_a_length(length):
    spec = {'image/encoded': F.BYTES, 'n': F.INT64}
    for number in INTEGERS:
        values = {'image/encoded': b'\xff' * length, 'n': number}
        assert encode_example(values, spec) == protobuf_bytes(values, spec)


def test_no_contract_key_is_a_prefix_of_another():
    """protobuf's upb backend (the one Beam installs) puts 'ab' before 'a' in deterministic output, its C++
    backend after: the contract's keys never meet that case, so its bytes are protobuf's under both."""
    assert not [(a, b) for a in F.FEATURES for b in F.FEATURES if a != b and b.startswith(a)]


def test_prefix_keys_sort_by_code_point():
    """Where one key is a prefix of another, the encoder keeps plain sorted order (as protobuf's C++ backend does)."""
    spec = {'a': F.INT64, 'ab': F.INT64, 'b': F.INT64}
    encoded = encode_example({'a': 1, 'ab': 2, 'b': 3}, spec)
    assert encoded.index(b'\x0a\x01a') < encoded.index(b'\x0a\x02ab') < encoded.index(b'\x0a\x01b')
    assert decode_example(encoded) == {'a': 1, 'ab': 2, 'b': 3}


def test_features_other_than_the_contract_are_refused():
    values = {key: random_value(random.Random(1), dtype) for key, dtype in F.FEATURES.items()}
    with pytest.raises(ValueError, match='missing'):
        encode_example({key: value for key, value in values.items() if key != F.LABEL})
    with pytest.raises(ValueError, match='extra'):
        encode_example(dict(values, extra=b''))
