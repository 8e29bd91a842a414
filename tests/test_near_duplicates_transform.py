"""The grouping transforms on hand-made records: Beam's TestPipeline (DirectRunner) and assert_that."""
import collections
import random

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from imgrec_imaging import perceptual_hash as ph
from transforms.elements import RecordRef
from transforms.near_duplicates import GROUP, OFF, REPORT, FindGroups, NearDuplicates
from transforms.splits import split_for

WEIGHTS = (('train', 50), ('validation', 50))
THRESHOLD = ph.threshold_for(45)  # the records of _corpus
LINK = THRESHOLD // 2 + 1


def _record(source, value, label=0, published=None):
    return RecordRef(source, source, f'class{label}', split_for(source, WEIGHTS), label, 'sha-' + source, 1, None,
                     None, (), 'spill', 0, 1, perceptual_hash=None if value is None else ph.to_hex(value),
                     published_split=published)


def _flip(value, *bits):
    for bit in bits:
        value ^= 1 << bit
    return value


def _corpus():
    """Far-apart hashes, one pair, one chain of five (each link just over half the threshold, so only
    neighbours are within it), one pair of identical hashes, one image just over the threshold from
    another (a bit in every band), and one with no hash."""
    rng = random.Random(3)
    bases = [rng.getrandbits(64) for _ in range(40)]
    records = [_record(f'solo/{i:02d}.jpg', value) for i, value in enumerate(bases[:30])]
    records.append(_record('pair/a.jpg', bases[30]))
    records.append(_record('pair/b.jpg', _flip(bases[30], 0, 9, 18)))
    chain = bases[31]
    for i in range(5):
        records.append(_record(f'chain/{i}.jpg', chain))
        chain = _flip(chain, *range(i * LINK, (i + 1) * LINK))
    records.append(_record('same/x.jpg', bases[32]))
    records.append(_record('same/y.jpg', bases[32]))
    records.append(_record('far/a.jpg', bases[33]))
    records.append(_record('far/b.jpg', _flip(bases[33], *(ph.BITS - 1 - start for start, _ in ph.band_edges(ph.bands_for(THRESHOLD))))))
    records.append(_record('nohash.jpg', None))
    return records


GROUPS = {'pair/a.jpg': 'pair/a.jpg', 'pair/b.jpg': 'pair/a.jpg',
          **{f'chain/{i}.jpg': 'chain/0.jpg' for i in range(5)},
          'same/x.jpg': 'same/x.jpg', 'same/y.jpg': 'same/x.jpg'}


def test_groups_are_the_connected_components_of_pairs_within_the_threshold():
    records = _corpus()
    with TestPipeline() as p:
        nodes = p | beam.Create(records) | FindGroups(THRESHOLD)
        assert_that(nodes | beam.Map(lambda kv: (kv[0], kv[1].group)), equal_to(sorted(GROUPS.items())))
        assert_that(nodes | 'Nearest' >> beam.Map(lambda kv: (kv[0], kv[1].nearest, kv[1].distance))
                    | beam.Filter(lambda row: not row[0].startswith('chain/')),
                    equal_to([('pair/a.jpg', 'pair/b.jpg', 3), ('pair/b.jpg', 'pair/a.jpg', 3),
                              ('same/x.jpg', 'same/y.jpg', 0), ('same/y.jpg', 'same/x.jpg', 0)]),
                    label='nearest')


def test_a_chain_longer_than_the_rounds_is_still_one_group():
    """One round of label passing cannot reach the chain's end: the union-find of unsettled labels does."""
    records = _corpus()
    with TestPipeline() as p:
        nodes = p | beam.Create(records) | FindGroups(THRESHOLD, rounds=1)
        assert_that(nodes | beam.Map(lambda kv: (kv[0], kv[1].group)), equal_to(sorted(GROUPS.items())))


def _splits_of(result):
    return result['records'] | 'SplitOf' >> beam.Map(lambda r: (r.source, r.split))


def test_group_mode_puts_each_group_in_one_split_and_leaves_the_others():
    records = _corpus()
    by_source = {r.source: r for r in records}
    expected = {}
    for source, record in by_source.items():
        group = GROUPS.get(source)
        if group is None:
            expected[source] = record.split
        else:
            members = [by_source[s] for s, g in GROUPS.items() if g == group]
            expected[source] = min(members, key=lambda r: r.order_key).split
    assert len({split_for(s, WEIGHTS) for s in GROUPS if GROUPS[s] == 'chain/0.jpg'}) == 2  # the chain needs it
    with TestPipeline() as p:
        result = p | beam.Create(records) | NearDuplicates(GROUP, WEIGHTS)
        assert_that(_splits_of(result), equal_to(sorted(expected.items())))
        moved = {s for s in expected if expected[s] != by_source[s].split}
        assert_that(result['near_duplicates'] | beam.Map(lambda row: (row.source, row.group, row.moved_from)),
                    equal_to([(s, GROUPS[s], by_source[s].split if s in moved else None) for s in GROUPS]),
                    label='rows')
        assert_that(result['moves'] | beam.CombinePerKey(sum),
                    equal_to(sorted(_net_moves(by_source, expected).items())), label='moves')
        assert_that(result['summary'], equal_to([{
            'mode': 'group', 'hash': ph.ALGORITHM, 'threshold': THRESHOLD, 'bands': THRESHOLD + 1, 'groups': 3,
            'images': 9, 'pairs': 1 + 4 + 1, 'pairs_across_splits': 0, 'pairs_across_labels': 0,
            'images_moved': len(moved), 'largest_group': 5}]), label='summary')


def _net_moves(by_source, expected):
    net = collections.Counter()
    for source, split in expected.items():
        if split != by_source[source].split:
            net[by_source[source].split] -= 1
            net[split] += 1
    return net


def test_report_mode_lists_groups_and_moves_nothing():
    records = _corpus()
    crossing = sum(1 for a, b in [('pair/a.jpg', 'pair/b.jpg'), ('same/x.jpg', 'same/y.jpg')]
                   + [(f'chain/{i}.jpg', f'chain/{i + 1}.jpg') for i in range(4)]
                   if split_for(a, WEIGHTS) != split_for(b, WEIGHTS))
    assert crossing
    with TestPipeline() as p:
        result = p | beam.Create(records) | NearDuplicates(REPORT, WEIGHTS)
        assert_that(_splits_of(result), equal_to([(r.source, r.split) for r in records]))
        assert_that(result['near_duplicates'] | beam.Map(lambda row: (row.source, row.split, row.moved_from)),
                    equal_to([(s, split_for(s, WEIGHTS), None) for s in GROUPS]), label='rows')
        assert_that(result['summary'] | beam.Map(lambda s: (s['groups'], s['pairs_across_splits'], s['images_moved'])),
                    equal_to([(3, crossing, 0)]), label='summary')
        assert_that(result['moves'], equal_to([]), label='moves')


def test_off_mode_passes_records_through():
    records = _corpus()
    with TestPipeline() as p:
        result = p | beam.Create(records) | NearDuplicates(OFF, WEIGHTS)
        assert_that(result['records'], equal_to(records))
        assert_that(result['near_duplicates'], equal_to([]), label='rows')
        assert_that(result['summary'] | beam.Map(lambda s: (s['mode'], s['hash'], s['groups'])),
                    equal_to([('off', None, 0)]), label='summary')


def test_on_a_refresh_published_images_keep_their_split_where_groups_allow():
    """The pair was published in validation (against its hash); an image alone keeps its published split;
    a new image joining the pair follows it; and without the same splits, published splits are ignored."""
    rng = random.Random(11)
    value, lone = rng.getrandbits(64), rng.getrandbits(64)
    records = [_record('p/a.jpg', value, published='validation'), _record('p/b.jpg', _flip(value, 3),
                                                                         published='validation'),
               _record('p/new.jpg', _flip(value, 5)), _record('lone.jpg', lone, published='validation')]
    with TestPipeline() as p:
        result = p | beam.Create(records) | NearDuplicates(GROUP, WEIGHTS, keep_published=True)
        assert_that(_splits_of(result), equal_to([(r.source, 'validation') for r in records]))
    with TestPipeline() as p:
        result = p | beam.Create(records) | NearDuplicates(GROUP, WEIGHTS, keep_published=False)
        first = min(records[:3], key=lambda r: r.order_key).split
        assert_that(_splits_of(result), equal_to([('p/a.jpg', first), ('p/b.jpg', first), ('p/new.jpg', first),
                                                  ('lone.jpg', records[3].split)]))
