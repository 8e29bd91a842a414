"""Writes one TFRecord file per (split, shard), streaming frames copied by reference, in order-key order.

A writer holds its shard's light references and one window of frames, never the shard: frames are
fetched a window at a time (``frames.FrameReader``: coalesced, parallel ranged reads) and streamed to
the file. Every record written also gives its index row (``imgrec.contract.index``), and a shard's rows
leave its writer as one list: one element a shard crosses to the index's writers, not one a record.
With ArrayRecord shards (``--formats tfrecord,array_record``), the same writer unframes each record and
appends it to the ArrayRecord shard of the same name too (``imgrec.storage.array_records``): the same
records, in the same order, from the same frames; the TFRecord bytes do not change.
"""
import collections

import apache_beam as beam
from apache_beam.metrics import Metrics

from imgrec.contract import counters, index as I, layout, tfrecord
from imgrec.console.errors import BuildFailed
from imgrec.storage.array_records import ArrayRecordFile
from imgrec.storage.frames import FrameReader
from imgrec.storage.storage import Storage

INDEX_ROWS = 'index_rows'
# A writer fetches at most this many bytes of frames (or records) before streaming them out.
WINDOW_BYTES = 8 * 1024 * 1024
WINDOW_RECORDS = 1024


def windows(records, max_bytes, max_records):
    """Consecutive runs of ``records`` of bounded total payload."""
    window: list = []
    size = 0
    for record in records:
        if window and (size + record.payload_length > max_bytes or len(window) >= max_records):
            yield window
            window, size = [], 0
        window.append(record)
        size += record.payload_length
    if window:
        yield window


def _payload(record):
    return record.payload_file, record.payload_offset, record.payload_length


def index_row(record, shard_file, offset, array_record_position=None):
    """The record's index row: a tuple in ``imgrec.contract.index.COLUMNS`` order (a dict's keys would cross
    the shuffle with every row, and the local runner copies each row whole through its grouping)."""
    return I.row({I.SOURCE: record.source, I.SHA256: record.sha256, I.SOURCE_SIZE: record.source_size,
                  I.SOURCE_MTIME_NS: record.mtime_ns, I.SOURCE_CTIME_NS: record.ctime_ns,
                  I.SOURCE_INODE: record.inode, I.SOURCE_GENERATION: record.generation, I.SPLIT: record.split,
                  I.LABEL: record.label, I.SHARD: shard_file, I.OFFSET: offset, I.LENGTH: record.payload_length,
                  I.DECISIONS: ','.join(record.decisions), I.PERCEPTUAL_HASH: record.perceptual_hash,
                  I.ENCODED_SHA256: record.encoded_sha256,
                  I.SOURCE_WIDTH: record.source_width, I.SOURCE_HEIGHT: record.source_height,
                  I.UPSCALED: record.upscaled, I.ARRAY_RECORD_POSITION: array_record_position})


def _unframed(data, record, array_record):
    try:
        return tfrecord.unframe(data)
    except ValueError as error:
        raise BuildFailed(f'cannot write {array_record.path}: the frame of {record.source} at '
                          f'{record.payload_file} offset {record.payload_offset} is damaged ({error})') from None


def write_shard(path, records, reader, storage: Storage, array_record=None, reuse_check=None, damaged=None):
    """Streams the frames of ``records`` (sorted here by order key) into ``path``, and each record, unframed,
    into ``array_record`` (an open ``ArrayRecordFile``) when given.

    With ``reuse_check`` (a ``imgrec.transforms.previous.ReuseCheck``), each frame copied from the previous version
    is checked first, and one that is damaged or cannot be read is decoded again from its source; those
    records are appended to ``damaged`` (a list). Returns (bytes written, [(record, offset in the shard)]).
    """
    placed, offset = [], 0
    with storage.open_write(path) as stream:
        for window in windows(sorted(records, key=lambda r: r.order_key), WINDOW_BYTES, WINDOW_RECORDS):
            refs = [_payload(record) for record in window]
            # A refresh's frames may lie in a damaged previous shard: their errors come back to be mended.
            frames = reader.read(refs, failures=True) if reuse_check is not None else reader.read(refs)
            for record in window:
                data = frames[_payload(record)]
                if reuse_check is not None and reuse_check.copies(record):
                    data, was_damaged = reuse_check.checked(record, data)
                    if was_damaged:
                        record = record._replace(payload_length=len(data))
                        damaged.append(record)
                elif isinstance(data, Exception):  # this build's own frame: no other copy of it
                    raise data
                stream.write(data)
                if array_record is not None:
                    array_record.write(_unframed(data, record, array_record))
                placed.append((record, offset))
                offset += len(data)
    return offset, placed


def write_shards(path, records, reader, storage: Storage, array_record_path=None, reuse_check=None, damaged=None):
    """``write_shard``, and the ArrayRecord shard at ``array_record_path`` too when given.

    Returns (TFRecord bytes, [(record, offset)], ArrayRecord bytes or None).
    """
    if array_record_path is None:
        return (*write_shard(path, records, reader, storage, reuse_check=reuse_check, damaged=damaged), None)
    with ArrayRecordFile(array_record_path, storage) as array_record:
        size, placed = write_shard(path, records, reader, storage, array_record, reuse_check, damaged)
        return size, placed, array_record.close()


class _WriteShardFn(beam.DoFn):
    def __init__(self, version_dir, storage, array_record=False, reuse_check=None):
        self._version_dir = version_dir
        self._storage = storage
        self._array_record = array_record
        self._reuse_check = reuse_check
        self._reader = None
        self.reuse_damaged = Metrics.counter(*counters.REUSE_DAMAGED)
        self.shards = Metrics.counter(*counters.SHARDS_WRITTEN)
        self.records = Metrics.counter(*counters.RECORDS_WRITTEN)
        self.bytes = Metrics.counter(*counters.BYTES_WRITTEN)

    def setup(self):
        self._reader = FrameReader(self._storage)

    def teardown(self):
        if self._reader is not None:
            self._reader.close()

    def process(self, keyed_records, shard_counts, unchanged):
        (split, index), records = keyed_records
        records = [record for record in records if record is not None]
        name = layout.shard_file_name(split, index, shard_counts[split])
        array_record_name = layout.array_record_file_name(name) if self._array_record else None
        damaged: list = []
        if unchanged:  # nothing will be published: count the records, copy no bytes
            size, placed, array_record_size = 0, [], 0
        else:
            size, placed, array_record_size = write_shards(
                layout.join(self._version_dir, name), records, self._reader, self._storage,
                array_record_name and layout.join(self._version_dir, array_record_name), self._reuse_check, damaged)
        self.reuse_damaged.inc(len(damaged))
        self.shards.inc()
        self.records.inc(len(records))
        self.bytes.inc(size)
        if placed:
            yield beam.pvalue.TaggedOutput(INDEX_ROWS, [
                index_row(record, name, offset, position if self._array_record else None)
                for position, (record, offset) in enumerate(placed)])
        stats = {
            'split': split,
            'index': index,
            'file': name,
            'records': len(records),
            'bytes': size,
            'label_counts': dict(collections.Counter(record.label for record in records)),
            'reuse_damaged': len(damaged),  # frames of the previous version decoded again
        }
        if self._array_record:
            stats[layout.ARRAY_RECORD] = {'file': array_record_name, 'records': len(records),
                                          'bytes': array_record_size}
        yield stats


class WriteShards(beam.PTransform):
    """((split, shard), RecordRef) -> {'stats': one dict per shard file, 'index_rows': a list of rows a shard
    written (``index_row``), one row per record}.

    ``shard_counts`` (one-element PCollection {split: count}) also names shards that received no
    record, so they are written too, empty, and every file of ``-of-N`` exists. ``unchanged`` (a
    singleton side input): a refresh that will publish nothing writes nothing. With ``array_record``, each
    shard's records also go to its ArrayRecord shard, and its stats name it under ``layout.ARRAY_RECORD``.
    With ``reuse_check`` (a refresh's ``imgrec.transforms.previous.ReuseCheck``), every frame copied from the
    previous version is checked, a damaged one decoded again, and the stats count them (``reuse_damaged``).
    ``storage``: the output's (spill files, the previous version's shards and the new ones all lie there).
    """

    def __init__(self, version_dir: str, shard_counts, storage: Storage, unchanged, array_record: bool = False,
                 reuse_check=None):
        super().__init__()
        self._version_dir = version_dir
        self._shard_counts = shard_counts
        self._storage = storage
        self._unchanged = unchanged
        self._array_record = array_record
        self._reuse_check = reuse_check

    def _writer(self):
        return _WriteShardFn(self._version_dir, self._storage, self._array_record, self._reuse_check)

    def expand(self, assigned):
        shard_counts = beam.pvalue.AsSingleton(self._shard_counts)
        # The records go straight to their shard's group: a Flatten with the empty shards' keys would be
        # written out and read back whole by Beam's local runner (one more pass of every record), and each
        # worker keeps the buffer of each stage's last output.
        results = (assigned
                   | 'GroupByShard' >> beam.GroupByKey()
                   | 'Write' >> beam.ParDo(self._writer(), shard_counts, self._unchanged).with_outputs(
                       INDEX_ROWS, main='stats'))
        # Shards that received no record (a split with none, or more shards asked than records): written once
        # the others are, from the shard counts and the keys of the shards written.
        written = beam.pvalue.AsList(results.stats | 'ShardsWritten' >> beam.Map(lambda stats: (stats['split'],
                                                                                                stats['index'])))
        empty = (assigned.pipeline
                 | 'Once' >> beam.Impulse()
                 | 'EmptyShards' >> beam.FlatMap(_empty_shards, shard_counts, written)
                 | 'WriteEmpty' >> beam.ParDo(self._writer(), shard_counts, self._unchanged).with_outputs(
                     INDEX_ROWS, main='stats'))
        stats = (results.stats, empty.stats) | 'AllShards' >> beam.Flatten()
        return {'stats': stats, INDEX_ROWS: results[INDEX_ROWS]}


def _empty_shards(_, shard_counts, written):
    """((split, index), []) for every shard of ``shard_counts`` ({split: count}) not in ``written``."""
    written = set(map(tuple, written))
    return [((split, index), []) for split, count in sorted(shard_counts.items()) for index in range(count)
            if (split, index) not in written]
