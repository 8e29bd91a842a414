"""Writes one TFRecord file per (split, shard), records sorted by their order key."""
import collections

import apache_beam as beam
from apache_beam.metrics import Metrics

from contract import layout
from contract.tfrecord import frame
from transforms import storage


def shard_bytes(records):
    """The file content of one shard: its records in order-key order, TFRecord-framed."""
    return b''.join(frame(record.example) for record in sorted(records, key=lambda r: r.order_key))


class _WriteShardFn(beam.DoFn):
    def __init__(self, version_dir):
        self._version_dir = version_dir
        self.shards = Metrics.counter('write', 'shards_written')
        self.records = Metrics.counter('write', 'records_written')
        self.bytes = Metrics.counter('write', 'bytes_written')

    def process(self, keyed_records, shard_counts):
        (split, index), records = keyed_records
        records = [record for record in records if record is not None]
        name = layout.shard_file_name(split, index, shard_counts[split])
        data = shard_bytes(records)
        storage.write_bytes(layout.join(self._version_dir, name), data)
        self.shards.inc()
        self.records.inc(len(records))
        self.bytes.inc(len(data))
        yield {
            'split': split,
            'index': index,
            'file': name,
            'records': len(records),
            'bytes': len(data),
            'label_counts': dict(collections.Counter(record.label for record in records)),
        }


class WriteShards(beam.PTransform):
    """((split, shard), ShardRecord) -> one stats dict per shard file written.

    ``shard_counts`` (one-element PCollection {split: count}) also names shards that received no
    record, so they are written too, empty, and every file of ``-of-N`` exists.
    """

    def __init__(self, version_dir, shard_counts):
        super().__init__()
        self._version_dir = version_dir
        self._shard_counts = shard_counts

    def expand(self, assigned):
        slots = self._shard_counts | 'AllShardSlots' >> beam.FlatMap(
            lambda counts: [((split, index), None) for split, n in counts.items() for index in range(n)])
        return ((assigned, slots)
                | 'WithEmptyShards' >> beam.Flatten()
                | 'GroupByShard' >> beam.GroupByKey()
                | 'Write' >> beam.ParDo(_WriteShardFn(self._version_dir),
                                        beam.pvalue.AsSingleton(self._shard_counts)))
