"""Serialises ``tf.train.Example`` protos without TensorFlow or generated protobuf code.

Beam workers should not need TensorFlow, and protobuf's own map serialisation order is not
guaranteed, so the wire format is written by hand with features in sorted key order. The output is
therefore a pure function of the feature values: byte-identical across runs, workers and machines.

Wire layout (example.proto): Example{1: Features{1: map<string, Feature>}}, where
Feature{1: BytesList{1: repeated bytes}, 3: Int64List{1: packed int64}}.
"""
from contract import features as F

_LENGTH_DELIMITED = 2


def _varint(value):
    if value < 0:
        value += 1 << 64  # int64 is encoded as its unsigned two's complement
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _field(number, payload):
    return _varint(number << 3 | _LENGTH_DELIMITED) + _varint(len(payload)) + payload


def _feature(dtype, value):
    if dtype == F.BYTES:
        if isinstance(value, str):
            value = value.encode('utf-8')
        return _field(1, _field(1, bytes(value)))
    if dtype == F.INT64:
        return _field(3, _field(1, _varint(int(value))))
    raise ValueError(f'unknown feature type {dtype!r}')


def encode_example(values, spec=None):
    """Returns serialised Example bytes for ``values`` (feature key -> one value).

    Every key of ``spec`` (default: the contract's ``FEATURES``) must be present, and no other.
    """
    spec = F.FEATURES if spec is None else spec
    if set(values) != set(spec):
        missing, extra = sorted(set(spec) - set(values)), sorted(set(values) - set(spec))
        raise ValueError(f'Example features do not match the contract: missing {missing}, extra {extra}')
    entries = b''.join(
        _field(1, _field(1, key.encode('utf-8')) + _field(2, _feature(spec[key], values[key])))
        for key in sorted(spec))
    return _field(1, entries)


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
