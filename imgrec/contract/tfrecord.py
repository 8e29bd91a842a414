"""TFRecord framing: length, masked CRC32C of the length, data, masked CRC32C of the data."""
import struct

import google_crc32c

_MASK_DELTA = 0xA282EAD8
# Bytes a frame adds to its record: the length (8), its checksum (4) and the data's checksum (4).
FRAME_OVERHEAD = 16


def _masked_crc(data):
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame(record):
    """Returns ``record`` framed as one TFRecord entry."""
    length = struct.pack('<Q', len(record))
    return length + struct.pack('<I', _masked_crc(length)) + record + struct.pack('<I', _masked_crc(record))


def read_records(stream):
    """Yields the records of a TFRecord stream, checking both checksums."""
    while True:
        header = stream.read(12)
        if not header:
            return
        if len(header) != 12:
            raise ValueError('truncated TFRecord header')
        length_bytes, length_crc = header[:8], struct.unpack('<I', header[8:])[0]
        if _masked_crc(length_bytes) != length_crc:
            raise ValueError('corrupt TFRecord length checksum')
        (length,) = struct.unpack('<Q', length_bytes)
        data = stream.read(length)
        footer = stream.read(4)
        if len(data) != length or len(footer) != 4:
            raise ValueError('truncated TFRecord')
        if _masked_crc(data) != struct.unpack('<I', footer)[0]:
            raise ValueError('corrupt TFRecord data checksum')
        yield data


def unframe(frame):
    """The record of one whole TFRecord entry (as ``frame`` gives it), both checksums checked."""
    if len(frame) < FRAME_OVERHEAD:
        raise ValueError('truncated TFRecord')
    length_bytes, length_crc = frame[:8], struct.unpack('<I', frame[8:12])[0]
    if _masked_crc(length_bytes) != length_crc:
        raise ValueError('corrupt TFRecord length checksum')
    (length,) = struct.unpack('<Q', length_bytes)
    if length + FRAME_OVERHEAD != len(frame):
        raise ValueError(f'a TFRecord entry of {len(frame)} bytes holds a record of {length}')
    data = frame[12:12 + length]
    if _masked_crc(data) != struct.unpack('<I', frame[-4:])[0]:
        raise ValueError('corrupt TFRecord data checksum')
    return data
