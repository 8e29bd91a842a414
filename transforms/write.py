"""Writes one TFRecord file per (split, shard), streaming frames copied by reference, in order-key order.

A writer holds its shard's light references and one window of frames, never the shard: frames are
fetched a window at a time (``frames.FrameReader``: coalesced, parallel ranged reads) and streamed to
the file. Every record written also gives its index row (``contract.index``).
"""
import collections

import apache_beam as beam
from apache_beam.metrics import Metrics

from contract import index as I, layout
from imgrec_storage import fileio
from imgrec_storage.frames import FrameReader

INDEX_ROWS = 'index_rows'
# A writer fetches at most this many bytes of frames (or records) before streaming them out.
WINDOW_BYTES = 8 * 1024 * 1024
WINDOW_RECORDS = 1024


def windows(records, max_bytes, max_records):
    """Consecutive runs of ``records`` of bounded total payload."""
    window, size = [], 0
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


def index_row(record, shard_file, offset):
    return {I.SOURCE: record.source, I.SHA256: record.sha256, I.SOURCE_SIZE: record.source_size,
            I.SOURCE_MTIME_NS: record.mtime_ns, I.SOURCE_GENERATION: record.generation, I.SPLIT: record.split,
            I.LABEL: record.label, I.SHARD: shard_file, I.OFFSET: offset, I.LENGTH: record.payload_length,
            I.DECISIONS: ','.join(record.decisions)}


def write_shard(path, records, reader, policy=None):
    """Streams the frames of ``records`` (sorted here by order key) into ``path``.

    Returns (bytes written, [(record, offset in the shard)]).
    """
    placed, offset = [], 0
    with fileio.StreamedFile(path, policy) as stream:
        for window in windows(sorted(records, key=lambda r: r.order_key), WINDOW_BYTES, WINDOW_RECORDS):
            frames = reader.read([_payload(record) for record in window])
            for record in window:
                data = frames[_payload(record)]
                stream.write(data)
                placed.append((record, offset))
                offset += len(data)
    return offset, placed


class _WriteShardFn(beam.DoFn):
    def __init__(self, version_dir, policy):
        self._version_dir = version_dir
        self._policy = policy
        self._reader = None
        self.shards = Metrics.counter('write', 'shards_written')
        self.records = Metrics.counter('write', 'records_written')
        self.bytes = Metrics.counter('write', 'bytes_written')

    def setup(self):
        self._reader = FrameReader(self._policy)

    def teardown(self):
        if self._reader is not None:
            self._reader.close()

    def process(self, keyed_records, shard_counts, unchanged):
        (split, index), records = keyed_records
        records = [record for record in records if record is not None]
        name = layout.shard_file_name(split, index, shard_counts[split])
        if unchanged:  # nothing will be published: count the records, copy no bytes
            size, placed = 0, []
        else:
            size, placed = write_shard(layout.join(self._version_dir, name), records, self._reader, self._policy)
        self.shards.inc()
        self.records.inc(len(records))
        self.bytes.inc(size)
        for record, offset in placed:
            yield beam.pvalue.TaggedOutput(INDEX_ROWS, index_row(record, name, offset))
        yield {
            'split': split,
            'index': index,
            'file': name,
            'records': len(records),
            'bytes': size,
            'label_counts': dict(collections.Counter(record.label for record in records)),
        }


class WriteShards(beam.PTransform):
    """((split, shard), RecordRef) -> {'stats': one dict per shard file, 'index_rows': one dict per record}.

    ``shard_counts`` (one-element PCollection {split: count}) also names shards that received no
    record, so they are written too, empty, and every file of ``-of-N`` exists. ``unchanged`` (a
    singleton side input): a refresh that will publish nothing writes nothing.
    """

    def __init__(self, version_dir, shard_counts, retry_policy, unchanged):
        super().__init__()
        self._version_dir = version_dir
        self._shard_counts = shard_counts
        self._policy = retry_policy
        self._unchanged = unchanged

    def expand(self, assigned):
        slots = self._shard_counts | 'AllShardSlots' >> beam.FlatMap(
            lambda counts: [((split, index), None) for split, n in counts.items() for index in range(n)])
        results = ((assigned, slots)
                   | 'WithEmptyShards' >> beam.Flatten()
                   | 'GroupByShard' >> beam.GroupByKey()
                   | 'Write' >> beam.ParDo(_WriteShardFn(self._version_dir, self._policy),
                                           beam.pvalue.AsSingleton(self._shard_counts), self._unchanged).with_outputs(
                       INDEX_ROWS, main='stats'))
        return {'stats': results.stats, INDEX_ROWS: results[INDEX_ROWS]}
