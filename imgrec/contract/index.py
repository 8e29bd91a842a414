"""The record index: one row per written record, saying which shard holds it and where.

A version's index is ``index/part-{i:05d}-of-{n:05d}.parquet`` (``layout.index_file_name``), listed in
``dataset.json`` under ``index``. A source's row lives in part ``index_part(source, n)``, and each part is
sorted by source, so finding a record reads one small file, and reading it is one ranged read of
``length`` bytes at ``offset`` in ``shard``: a whole TFRecord frame (length, CRC, Example, CRC). With
ArrayRecord shards, ``array_record_position`` is the record's position in the ArrayRecord shard of the
same name (``layout.array_record_file_name``): ``reader.read([position])`` gives the same Example.
Reading the index needs pyarrow (which Apache Beam brings), not TensorFlow.
"""
import json
import zlib

from imgrec.contract import layout
from imgrec.contract.hashing import stable_hash

FORMAT = 'parquet'
# Rows per index part to aim for: a lookup reads one part, and a part writer holds its rows (about 5 kB
# a row while it builds the part), so parts stay small.
ROWS_PER_PART = 10_000

SOURCE = 'source'
SHA256 = 'sha256'
SOURCE_SIZE = 'source_size'
SOURCE_MTIME_NS = 'source_mtime_ns'      # local inputs: modification time, ns since the epoch
SOURCE_CTIME_NS = 'source_ctime_ns'      # local inputs: inode change time, ns since the epoch
SOURCE_INODE = 'source_inode'            # local inputs: inode number (with the two times, docs/reuse.md)
SOURCE_GENERATION = 'source_generation'  # gs:// inputs: the object's generation
SPLIT = 'split'
LABEL = 'label'
SHARD = 'shard'                          # shard file name, relative to the version folder
OFFSET = 'offset'                        # of the record's TFRecord frame in the shard
LENGTH = 'length'                        # of the whole frame: 16 bytes of framing + the Example
DECISIONS = 'decisions'                  # what decoding did, comma-separated (dataset.json decoding.decisions)
PERCEPTUAL_HASH = 'perceptual_hash'      # two 64-bit hashes of the decoded image (whole, centre), 16 hex digits each (docs/near-duplicates.md)
ENCODED_SHA256 = 'encoded_sha256'        # sha256 of the written JPEG (the Example's image/encoded): the exact check's key
SOURCE_WIDTH = 'source_width'            # of the source image, upright (after its EXIF orientation), in pixels
SOURCE_HEIGHT = 'source_height'
UPSCALED = 'upscaled'                    # the source was enlarged to reach the target size
ARRAY_RECORD_POSITION = 'array_record_position'  # of the record in its ArrayRecord shard (null: none built)
# A checksum binding the facts a refresh copies from a row (FACTS) to the record's own sha256: a row whose facts
# were damaged or copied from another row does not check, and its image is decoded again (docs/contract.md).
FACTS_CHECKSUM = 'facts_checksum'
FACTS = (SHA256, SOURCE_SIZE, LABEL, DECISIONS, PERCEPTUAL_HASH, SOURCE_WIDTH, SOURCE_HEIGHT, UPSCALED)
# Facts recorded since the checksum was: they join it only where a row has them, so older rows still check.
LATER_FACTS = (ENCODED_SHA256,)

# Column -> type; the source stamps (mtime, ctime and inode; generation) are null where they do not apply; the
# perceptual hash where the build did not compute it (--near_duplicate_check exact, --near_duplicates off), the
# encoded sha256 where it did not group (--near_duplicates off).
COLUMNS = {
    SOURCE: 'string', SHA256: 'string', SOURCE_SIZE: 'int64', SOURCE_MTIME_NS: 'int64',
    SOURCE_CTIME_NS: 'int64', SOURCE_INODE: 'int64', SOURCE_GENERATION: 'int64', SPLIT: 'string', LABEL: 'int64', SHARD: 'string', OFFSET: 'int64',
    LENGTH: 'int64', DECISIONS: 'string', PERCEPTUAL_HASH: 'string', ENCODED_SHA256: 'string', SOURCE_WIDTH: 'int64',
    SOURCE_HEIGHT: 'int64', UPSCALED: 'bool', ARRAY_RECORD_POSITION: 'int64', FACTS_CHECKSUM: 'int64',
}


def row(values):
    """``values`` ({column: value}, every column but FACTS_CHECKSUM, which is computed) as a row: a tuple in
    ``COLUMNS`` order."""
    values = {**values, FACTS_CHECKSUM: facts_checksum(values)}
    return tuple(values[name] for name in COLUMNS)


def facts_checksum(values):
    """CRC-32 of the FACTS of a row (a mapping: a dict row, or ``row``'s values), in a fixed text form: what a
    refresh recomputes before it reuses them (``imgrec.transforms.previous``)."""
    facts = [values.get(name) for name in FACTS]
    facts += [values[name] for name in LATER_FACTS if values.get(name) is not None]
    text = json.dumps(facts, separators=(',', ':'), ensure_ascii=True,
                      default=lambda value: value.item())  # numpy's scalars, as their Python values
    return zlib.crc32(text.encode('ascii'))


def source_of(row_):
    return row_[_SOURCE_AT]


_SOURCE_AT = list(COLUMNS).index(SOURCE)


def num_parts(num_records):
    return max(1, -(-num_records // ROWS_PER_PART))


def index_part(source, parts):
    """The part that holds ``source``'s row: a stable hash, the same on every machine."""
    return stable_hash('index', source) % parts


_ARROW_TYPES = {'bool': 'bool_'}  # pyarrow's name where it is not the type's


def schema():
    import pyarrow  # pylint: disable=import-outside-toplevel
    return pyarrow.schema([(name, getattr(pyarrow, _ARROW_TYPES.get(kind, kind))()) for name, kind in COLUMNS.items()])


def describe(files, num_records):
    """The ``index`` entry of dataset.json."""
    return {'format': FORMAT, 'files': list(files), 'num_records': num_records, 'columns': dict(COLUMNS),
            'partition': 'part index_part(source, len(files)): sha256 of "index\\0" + source, first 8 bytes '
                         'big-endian, modulo the number of parts'}


def find_record(version_dir, document, source, open_file):
    """The index row of ``source`` (a dict), or None. ``open_file(path)`` returns a binary stream."""
    import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel
    files = document['index']['files']
    with open_file(layout.join(version_dir, files[index_part(source, len(files))])) as stream:
        table = pq.read_table(stream, filters=[(SOURCE, '=', source)])
    rows = table.to_pylist()
    return rows[0] if rows else None
