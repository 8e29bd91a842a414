"""--stratify: each split gets its share of every class, within one image, or within one group of
near-duplicates where groups are kept together."""
import collections
import os
import random

from tests.conftest import build
from tests.test_near_duplicates_build import (  # noqa: F401  (fixtures)
    OPTIONS,
    document_of,
    groups_of,
    index_of,
    planted,
    rows_of,
)
from imgrec.transforms.splits import apportion, deal_groups, singleton_quotas, split_of_rank, targets_for

WEIGHTS = (('train', 80), ('validation', 20))


def test_apportion_gives_each_split_its_share_within_one():
    rng = random.Random(1)
    for _ in range(500):
        weights = tuple((f's{i}', rng.randint(1, 9)) for i in range(rng.randint(1, 5)))
        total = rng.randint(0, 300)
        counts = apportion(total, weights)
        whole = sum(weight for _, weight in weights)
        assert sum(counts.values()) == total
        assert all(abs(counts[name] - total * weight / whole) < 1 for name, weight in weights)
    assert apportion(5, WEIGHTS) == {'train': 4, 'validation': 1}
    assert apportion(1, (('a', 1), ('b', 1))) == {'a': 1, 'b': 0}  # equal remainders: the first named
    assert apportion(3, (('a', 0), ('b', 0))) == {'a': 3, 'b': 0}


def test_ranks_are_cut_into_one_run_a_split():
    quotas = {'train': 3, 'validation': 2}
    assert [split_of_rank(rank, quotas, WEIGHTS) for rank in range(5)] == ['train'] * 3 + ['validation'] * 2


def test_groups_then_singletons_give_each_split_its_share_within_one_group():
    """Any weights, any mix of groups and images alone: each split ends within the class's largest group
    of its share (within 1 with no group)."""
    rng = random.Random(7)
    for _ in range(3000):
        weights = tuple((f's{i}', rng.randint(1, 10)) for i in range(rng.randint(2, 4)))
        groups = [(rng.randint(2, 6), (rng.random(), f'g{i}'), f'g{i}') for i in range(rng.randint(0, 8))]
        alone = rng.randint(0, 80)
        size = alone + sum(n for n, _, _ in groups)
        if not size:
            continue
        targets = targets_for(size, weights)
        decided = deal_groups(groups, targets, {}, weights)
        in_groups = collections.Counter()
        for n, _, group in groups:
            in_groups[decided[group]] += n
        quotas = singleton_quotas(targets, in_groups, alone, weights)
        assert sum(quotas.values()) == alone and min(quotas.values()) >= 0
        largest = max((n for n, _, _ in groups), default=1)
        whole = sum(weight for _, weight in weights)
        for name, weight in weights:
            assert abs(in_groups[name] + quotas[name] - size * weight / whole) < largest


def test_groups_are_dealt_largest_first_against_what_each_split_lacks():
    """Each group, largest first, goes to the split that lacks most; what is already placed counts."""
    weights = (('train', 50), ('validation', 50))
    groups = [(20, (0, 'c'), 'c'), (50, (2, 'big'), 'big'), (30, (1, 'b'), 'b')]
    assert deal_groups(groups, targets_for(100, weights), {}, weights) == {
        'big': 'train', 'b': 'validation', 'c': 'validation'}
    assert deal_groups(groups, targets_for(100, weights), {'validation': 40}, weights) == {
        'big': 'train', 'b': 'validation', 'c': 'train'}


def test_with_stratify_every_split_gets_one_image_of_a_class_that_has_enough():
    weights = (('train', 90), ('validation', 5), ('test', 5))
    assert apportion(3, weights) == {'train': 3, 'validation': 0, 'test': 0}
    assert targets_for(3, weights, at_least_one=True) == {'train': 1, 'validation': 1, 'test': 1}
    assert targets_for(2, weights, at_least_one=True) == apportion(2, weights)  # too few: named in the summary
    rng = random.Random(3)
    for _ in range(300):
        weights = tuple((f's{i}', rng.randint(1, 9)) for i in range(rng.randint(1, 4)))
        total = rng.randint(0, 40)
        counts = targets_for(total, weights, at_least_one=True)
        assert sum(counts.values()) == total
        if total >= len(weights):
            assert min(counts.values()) >= 1


def _class_counts(version_dir):
    counts = collections.Counter((row['source'].split('/')[0], row['split']) for row in index_of(version_dir).values())
    return counts


def _assert_shares(version_dir, within):
    counts = _class_counts(version_dir)
    for label in {label for label, _ in counts}:
        size = counts[(label, 'train')] + counts[(label, 'validation')]
        for split, weight in WEIGHTS:
            assert abs(counts[(label, split)] - size * weight / 100) < within(label), (label, split, counts)


def test_stratify_without_groups_gives_every_class_its_share_within_one(planted, tmp_path):
    output = build(planted[0], tmp_path / 'out', *OPTIONS, '--version', 'v1', '--stratify', '--near_duplicates',
                   'off')
    version_dir = os.path.join(output, 'v1')
    _assert_shares(version_dir, lambda label: 1)
    document = document_of(version_dir)
    assert document['options']['stratify'] is True
    for info in document['splits'].values():  # the accounting follows the images that were dealt elsewhere
        assert info['inputs'] == info['num_examples'] + info['quarantined'] + info['duplicates']


def test_stratify_with_groups_keeps_groups_whole_within_one_group_of_each_share(planted, tmp_path):
    _, pairs = planted
    output = build(planted[0], tmp_path / 'out', *OPTIONS, '--version', 'v1', '--stratify')
    version_dir = os.path.join(output, 'v1')
    index, rows = index_of(version_dir), rows_of(version_dir)
    largest = collections.Counter()
    for members in groups_of(rows).values():
        assert len({index[source]['split'] for source in members}) == 1
        for label, n in collections.Counter(source.split('/')[0] for source in members).items():
            largest[label] = max(largest[label], n)
    group_of = {row['source']: row['group'] for row in rows}
    found = [p for p in pairs if group_of.get(p['original']) is not None
             and group_of.get(p['original']) == group_of.get(p['twin'])]
    assert len(found) >= 0.95 * len(pairs)  # at these 32x32 records the pixel check refuses a crop or two
    assert all(index[p['original']]['split'] == index[p['twin']]['split'] for p in found)
    _assert_shares(version_dir, lambda label: max(1, largest[label]))
    assert document_of(version_dir)['near_duplicates']['pairs_across_splits'] == 0
