"""Serialises ``tf.train.Example`` protos without TensorFlow or generated protobuf code.

Beam workers should not need TensorFlow, and protobuf's own map serialisation order is not
guaranteed unless asked for, so the wire format is written by hand with features in sorted key order.
The output is therefore a pure function of the feature values: byte-identical across runs, workers and
machines, and equal to protobuf's ``SerializeToString(deterministic=True)`` of the same Example
(tests/test_example_encoding.py compares the two on thousands of random Examples).

Wire layout (example.proto): Example{1: Features{1: map<string, Feature>}}, where
Feature{1: BytesList{1: repeated bytes}, 3: Int64List{1: packed int64}}. Each message's length is
computed before its bytes, so the image bytes are copied once, by the final join.
"""
import functools

from imgrec.contract import features as F

_LENGTH_DELIMITED = 2
_FIELD_1 = b'\x0a'  # field 1, length-delimited: Example.features, Features.feature, the entry's key, the lists
_FIELD_2 = b'\x12'  # field 2, length-delimited: the entry's value (a Feature)
_FIELD_3 = b'\x1a'  # field 3, length-delimited: Feature.int64_list


def _varint(value):
    if value < 0:
        value += 1 << 64  # int64 is encoded as its unsigned two's complement
    if value < 0x80:
        return _SMALL[value]
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL = [bytes([value]) for value in range(0x80)]


def _field(number, payload):
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(payload)) + payload


@functools.lru_cache(maxsize=256)
def _key_field(key):
    """The map entry's key field (field 1) of ``key``, made once a key."""
    return _field(1, key.encode('utf-8'))


def _feature_parts(dtype, value):
    """The parts of one Feature message, and their length: [kind tag, list length, list tag, value
    length, value]. ``value`` itself is not copied."""
    if dtype == F.BYTES:
        if isinstance(value, str):
            value = value.encode('utf-8')
        elif not isinstance(value, bytes):
            value = bytes(value)
        kind, payload = _FIELD_1, value
    elif dtype == F.INT64:
        kind, payload = _FIELD_3, _varint(int(value))
    else:
        raise ValueError(f'unknown feature type {dtype!r}')
    value_length = _varint(len(payload))
    list_length = 1 + len(value_length) + len(payload)
    list_prefix = _varint(list_length)
    return [kind, list_prefix, _FIELD_1, value_length, payload], 1 + len(list_prefix) + list_length


def encode_example(values, spec=None):
    """Returns serialised Example bytes for ``values`` (feature key -> one value).

    Every key of ``spec`` (default: the contract's ``FEATURES``) must be present, and no other.
    """
    spec = F.FEATURES if spec is None else spec
    if values.keys() != spec.keys():
        missing, extra = sorted(set(spec) - set(values)), sorted(set(values) - set(spec))
        raise ValueError(f'Example features do not match the contract: missing {missing}, extra {extra}')
    parts, features_length = [], 0
    for key in sorted(spec):
        feature, feature_length = _feature_parts(spec[key], values[key])
        key_field = _key_field(key)
        feature_prefix = _varint(feature_length)
        entry_length = len(key_field) + 1 + len(feature_prefix) + feature_length
        entry_prefix = _varint(entry_length)
        parts += [_FIELD_1, entry_prefix, key_field, _FIELD_2, feature_prefix, *feature]
        features_length += 1 + len(entry_prefix) + entry_length
    return b''.join([_FIELD_1, _varint(features_length), *parts])


def _read_varint(data, position):
    value = shift = 0
    while True:
        if position >= len(data):
            raise ValueError('truncated varint')
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


def _fields(data):
    """Yields (field number, payload) of the length-delimited and varint fields of one message."""
    position = 0
    while position < len(data):
        tag, position = _read_varint(data, position)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, position = _read_varint(data, position)
            yield number, value
        elif wire_type == _LENGTH_DELIMITED:
            length, position = _read_varint(data, position)
            if position + length > len(data):
                raise ValueError('truncated field')
            yield number, data[position:position + length]
            position += length
        else:
            raise ValueError(f'unexpected wire type {wire_type}')


def _signed(value):
    return value - (1 << 64) if value >= 1 << 63 else value


def _feature_values(payload):
    """The first value of a Feature: bytes of a BytesList, int of an Int64List (packed or not)."""
    for kind, values in _fields(payload):
        for number, value in _fields(values):
            if number != 1:
                continue
            if kind == 1:
                return bytes(value)
            if kind == 3:
                return _signed(value if isinstance(value, int) else _read_varint(value, 0)[0])
    return None


def decode_example(data):
    """Reads serialised Example bytes back into {feature key: first value}, without TensorFlow.

    The inverse of ``encode_example`` for readers that cannot import TensorFlow (the build report on a
    Beam worker); it reads any Example of bytes and int64 features, not only ours.
    """
    values = {}
    for number, features in _fields(data):
        if number != 1:
            continue
        for entry_number, entry in _fields(features):
            if entry_number != 1:
                continue
            key = feature = None
            for field, payload in _fields(entry):
                if field == 1:
                    key = bytes(payload).decode('utf-8')
                elif field == 2:
                    feature = payload
            if key is not None and feature is not None:
                values[key] = _feature_values(feature)
    return values
