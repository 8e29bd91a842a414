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
