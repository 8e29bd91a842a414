"""Balanced, stratified shard assignment: unit tests of the transform and of a real build."""
import collections
import math
import random

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from imgrec.contract import features as F
from tests.conftest import build
from tests.contract_checks import check_version
from imgrec.transforms import sharding
from imgrec.transforms.elements import RecordRef

LABELS = ['a', 'b', 'c', 'd']


def _records(counts_per_label, split='train', seed=0):
    rng = random.Random(seed)
    records = []
    for label, count in enumerate(counts_per_label):
        for i in range(count):
            source = f'{LABELS[label]}/{i}.jpg'
            records.append(RecordRef(
                source=source, path=source, label_text=LABELS[label], split=split, label=label,
                sha256='0' * 64, source_size=1, mtime_ns=None,
                generation=None, decisions=(), payload_file='spill', payload_offset=0,
                payload_length=rng.randint(10, 200)))
    return records


def _assert_balanced(assigned, shards):
    """Shard totals within 1, and each label's count per shard within 1."""
    def check(elements):
        totals = collections.Counter(shard for (_, shard), _ in elements)
        per_label = collections.defaultdict(collections.Counter)
        for (_, shard), record in elements:
            per_label[record.label][shard] += 1
        assert set(totals) <= set(range(shards))
        counts = [totals[s] for s in range(shards)]
        assert max(counts) - min(counts) <= 1, counts
        for label, by_shard in per_label.items():
            label_counts = [by_shard[s] for s in range(shards)]
            assert max(label_counts) - min(label_counts) <= 1, (label, label_counts)
    assert_that(assigned, check)


@pytest.mark.parametrize('bucket_target', [4096, 3])  # one bucket per label, and many
def test_shards_are_balanced_and_stratified(monkeypatch, bucket_target):
    monkeypatch.setattr(sharding, 'BUCKET_TARGET', bucket_target)
    records = _records([37, 5, 101, 12])
    with TestPipeline() as p:
        labels = p | 'Labels' >> beam.Create([LABELS])
        result = (p | beam.Create(records)
                  | sharding.AssignBalancedShards(['train'], beam.pvalue.AsSingleton(labels),
                                                sharding.ShardConfig(fixed={'train': 7})))
        _assert_balanced(result['assigned'], 7)
        assert_that(result['shard_counts'], equal_to([{'train': 7}]), label='ShardCount')


def _reference_assignment(records, shards):
    """The algorithm in one process: rank per label by order key, labels end to end, deal round-robin."""
    position, assignment = 0, {}
    for label in range(len(LABELS)):
        for record in sorted((r for r in records if r.label == label), key=lambda r: r.order_key):
            assignment[record.order_key[1]] = position % shards
            position += 1
    return assignment


@pytest.mark.parametrize('bucket_target', [4096, 2])
def test_bucketed_ranking_matches_a_global_sort(monkeypatch, bucket_target):
    monkeypatch.setattr(sharding, 'BUCKET_TARGET', bucket_target)
    records = _records([40, 9, 23, 0])
    expected = _reference_assignment(records, 5)
    with TestPipeline() as p:
        labels = p | 'Labels' >> beam.Create([LABELS])
        result = (p | beam.Create(records)
                  | sharding.AssignBalancedShards(['train'], beam.pvalue.AsSingleton(labels),
                                                sharding.ShardConfig(fixed={'train': 5})))
        assert_that(result['assigned'] | beam.Map(lambda kv: (kv[1].order_key[1], kv[0][1])),
                    equal_to(sorted(expected.items())))


def test_shard_count_follows_target_size():
    config = sharding.ShardConfig(fixed={'test': 8}, target_bytes=100e6, min_shards=1)
    assert config.num_shards('train', 1000, 250e6) == 3
    assert config.num_shards('train', 2, 250e6) == 2  # never more shards than records
    assert config.num_shards('train', 0, 0) == 1
    assert config.num_shards('test', 5, 10) == 8


def test_default_shard_counts_serve_parallel_reads():
    config = sharding.ShardConfig()  # 100 MB, at least 16 shards of at least 64 records
    assert config.num_shards('train', 1_800, 60e6) == 16   # a few thousand images: 16 shards, not 1
    assert config.num_shards('train', 3_300, 110e6) == 16
    assert config.num_shards('validation', 200, 6e6) == 3  # no shard cut to a handful of records
    assert config.num_shards('validation', 40, 1e6) == 1
    assert config.num_shards('train', 1_000_000, 150e9) == 1_500  # large splits follow the byte target
    assert config.num_shards('train', 10**9, 10**14) == sharding.MAX_SHARDS
    for records in (1, 63, 64, 65, 1_023, 1_024, 5_000):  # every shard keeps 64 records or the split is small
        shards = config.num_shards('train', records, records * 30e3)
        assert shards == 1 or records // shards >= 64, (records, shards)


def test_bucket_bits_keep_buckets_near_the_target():
    assert sharding.bucket_bits(sharding.BUCKET_TARGET) == 0
    for count in (10_000, 1_000_000, 50_000_000):
        per_bucket = count / 2 ** sharding.bucket_bits(count)
        assert sharding.BUCKET_TARGET / 2 < per_bucket <= sharding.BUCKET_TARGET


def test_built_shards_are_balanced_stratified_and_shuffled(sample_images, tmp_path):
    output = build(sample_images, tmp_path, '--splits', 'train=1', '--num_shards', 'train=4')
    document, by_split = check_version(output, input_root=sample_images)
    records = by_split['train']
    sizes = collections.Counter(r['shard'] for r in records)
    assert max(sizes.values()) - min(sizes.values()) <= 1 and len(sizes) == 4
    for label in range(len(document['labels'])):
        per_shard = [sum(1 for r in records if r['shard'] == s and r[F.LABEL] == label) for s in range(4)]
        assert max(per_shard) - min(per_shard) <= 1, per_shard
    for shard in range(4):
        sources = [r[F.SOURCE].decode() for r in records if r['shard'] == shard]
        assert sources != sorted(sources)  # shuffled, not in listing order
        labels = [r[F.LABEL] for r in records if r['shard'] == shard]
        assert labels != sorted(labels)  # classes interleaved


def test_target_shard_size_sets_the_shard_count(sample_images, tmp_path):
    output = build(sample_images, tmp_path, '--splits', 'train=1', '--target_shard_mb', '0.02')
    document, by_split = check_version(output)
    total = sum(s['bytes'] for s in document['splits']['train']['shards'])
    assert document['splits']['train']['num_shards'] == math.ceil(total / 20_000) > 1


def test_a_split_without_records_still_gets_its_shard_files(sample_images, tmp_path):
    output = build(sample_images, tmp_path, '--splits', 'train=1000000,test=1', '--num_shards', 'train=2,test=2')
    document, by_split = check_version(output)
    assert document['splits']['test']['num_shards'] == 2
    assert document['splits']['test']['num_examples'] == len(by_split['test'])
