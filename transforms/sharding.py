"""Balanced, stratified, deterministic shard assignment without gathering a split on one worker.

Within a split, the records of each label are ranked by their order key; the labels are laid end to
end in label order, giving every record a position ``g`` in one sequence, and record ``g`` goes to
shard ``g mod S``. Dealing one sequence round-robin keeps shard sizes within 1 of each other, and
each label's count per shard within 1 too. Ranking needs no global sort: records are bucketed by the
top bits of their hash (enough buckets that each holds about ``BUCKET_TARGET`` records), buckets are
sorted locally, and a record's rank is the count of its label's records in earlier buckets (a small
side input) plus its position in its bucket. Only counts are global.

How many shards a split gets is the ``ShardConfig``'s decision, from the split's record count and bytes.
"""
import dataclasses
import math
import typing

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.transforms.combiners import TupleCombineFn

from imgrec.contract import counters
from imgrec.contract.layout import MAX_SHARDS

BUCKET_TARGET = 4096
_HASH_BITS = 64


def bucket_bits(count):
    """Top hash bits to bucket ``count`` records by so buckets hold about ``BUCKET_TARGET``."""
    return max(0, math.ceil(math.log2(count / BUCKET_TARGET))) if count > BUCKET_TARGET else 0


def bucket_of(hash_value, count):
    bits = bucket_bits(count)
    return hash_value >> (_HASH_BITS - bits) if bits else 0


@dataclasses.dataclass(frozen=True)
class ShardConfig:
    """How many shards each split gets.

    A split named in ``fixed`` gets that count. Any other split gets the larger of:
    - enough shards to keep each near ``target_bytes`` (record bytes include the TFRecord framing), and
    - ``min_shards``, for parallel interleaved reads and one shard per host on a multi-host TPU, but
      only as far as every shard keeps at least ``min_records_per_shard`` records;
    never more than the split's records or ``MAX_SHARDS``, and at least one, so every split has a file.
    """
    fixed: dict[str, int] = dataclasses.field(default_factory=dict)
    target_bytes: float = 100e6
    min_shards: int = 16
    min_records_per_shard: int = 64

    def num_shards(self, split: str, num_records: int, num_bytes: float) -> int:
        if split in self.fixed:
            return self.fixed[split]
        by_size = math.ceil(num_bytes / self.target_bytes)
        for_reads = min(self.min_shards, num_records // self.min_records_per_shard)
        return max(1, min(max(by_size, for_reads), num_records, MAX_SHARDS))


def label_offsets(label_counts, split, num_labels):
    """Start of each label's run in the split's sequence: labels laid end to end in index order."""
    offsets, position = {}, 0
    for label in range(num_labels):
        offsets[label] = position
        position += label_counts.get((split, label), 0)
    return offsets


class Sized(typing.NamedTuple):
    """A key of the sizes AssignBalancedShards sums, (Sized, (records, bytes)) pairs: of a ``split``, or of one
    ``label`` (its index) in it (its bytes not counted)."""
    split: str
    label: int | None = None


def _sizes(record):
    """What one record adds to the sizes: (records, bytes) of its (split, label) and of its split."""
    return [(Sized(record.split, record.label), (1, 0)), (Sized(record.split), (1, record.payload_length))]


def label_counts(sizes):
    """{(split, label): records} of the summed ``_sizes``."""
    return {(key.split, key.label): count for key, (count, _) in sizes.items() if key.label is not None}


_BUCKET_COUNTS = 'bucket_counts'


def _key_by_bucket(record, sizes):
    """((split, label, bucket), record), and (that key, 1) as _BUCKET_COUNTS."""
    key = (record.split, record.label, bucket_of(record.order_key[0], sizes[Sized(record.split, record.label)][0]))
    yield beam.pvalue.TaggedOutput(_BUCKET_COUNTS, (key, 1))
    yield key, record


class _RankInBucketFn(beam.DoFn):
    """Sorts one bucket and sends each record to its shard: ((split, shard), record)."""

    def __init__(self):
        self.records = Metrics.counter(*counters.RECORDS_ASSIGNED)
        self._side_inputs = None
        self._starts: dict[tuple, int] = {}

    @staticmethod
    def bucket_starts(label_counts, bucket_counts, num_labels):
        """(split, label, bucket) -> position of the bucket's first record in its split's sequence."""
        starts: dict[tuple, int] = {}
        offsets: dict[str, dict] = {}
        running: dict[tuple, int] = {}
        for key in sorted(bucket_counts):
            split, label, _ = key
            if split not in offsets:
                offsets[split] = label_offsets(label_counts, split, num_labels)
            running.setdefault((split, label), offsets[split][label])
            starts[key] = running[(split, label)]
            running[(split, label)] += bucket_counts[key]
        return starts

    def process(self, keyed_bucket, sizes, bucket_counts, shard_counts, labels):
        if self._side_inputs is not bucket_counts:  # side inputs are the same objects all bundle long
            self._side_inputs = bucket_counts
            self._starts = self.bucket_starts(label_counts(sizes), bucket_counts, len(labels))
        (split, label, bucket), records = keyed_bucket
        start = self._starts[(split, label, bucket)]
        shards = shard_counts[split]
        for position, record in enumerate(sorted(records, key=lambda r: r.order_key)):
            self.records.inc()
            yield (split, (start + position) % shards), record


class AssignBalancedShards(beam.PTransform):
    """RecordRef -> ((split, shard index), RecordRef), plus the shard count of every split.

    ``labels`` is a singleton side input of the ordered class list; ``config`` a ShardConfig. Returns
    {'assigned': ..., 'shard_counts': one-element PCollection {split: count}}. Every split in ``splits``
    gets at least one shard, even when it received no record.
    """

    def __init__(self, splits, labels, config):
        super().__init__()
        self._splits = tuple(splits)
        self._labels = labels
        self._config = config

    def expand(self, records):
        splits, config = self._splits, self._config
        # The counts of each (split, label) and the records and bytes of each split, in one combine.
        sizes = beam.pvalue.AsDict(
            records
            | 'Sizes' >> beam.FlatMap(_sizes)
            | 'SumSizes' >> beam.CombinePerKey(TupleCombineFn(sum, sum)))

        def count_shards(_, sizes):
            return {split: config.num_shards(split, *sizes.get(Sized(split), (0, 0))) for split in splits}

        # One element made once the sizes are known (side inputs cost no steps; a ToList costs nine).
        shard_counts = (records.pipeline
                        | 'Once' >> beam.Impulse()
                        | 'ShardCounts' >> beam.Map(count_shards, sizes))
        # Each record keyed by its bucket, and a count of one for its bucket, told by one step.
        keyed = records | 'KeyByBucket' >> beam.FlatMap(_key_by_bucket, sizes=sizes).with_output_types(
            typing.Tuple[typing.Any, typing.Any]).with_outputs(_BUCKET_COUNTS, main='keyed')
        bucket_counts = beam.pvalue.AsDict(keyed[_BUCKET_COUNTS] | 'CountPerBucket' >> beam.CombinePerKey(sum))
        assigned = (keyed.keyed
                    | 'GroupBuckets' >> beam.GroupByKey()
                    | 'Rank' >> beam.ParDo(_RankInBucketFn(), sizes, bucket_counts,
                                           beam.pvalue.AsSingleton(shard_counts), self._labels))
        return {'assigned': assigned, 'shard_counts': shard_counts}
