"""The grouping rule of ``imgrec.transforms.near_duplicate_groups``: stars that cannot chain, the same whatever the
order, every member a confirmed near-duplicate of its leader, and Beam's ``FindGroups`` giving the same
groups as the benchmark's in-memory grouping (``benchmarks.near_duplicate_groups.group_in_memory``)."""
import collections
import random

import apache_beam as beam
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from benchmarks.near_duplicate_groups import group_in_memory, synthetic
from imgrec.imaging import perceptual_hash as ph
from imgrec.transforms.elements import RecordRef
from imgrec.transforms.near_duplicate_groups import FindGroups, star_groups

CHAIN = ('chain/a.jpg', 'chain/b.jpg', 'chain/c.jpg', 'chain/d.jpg', 'chain/e.jpg')


def _flip(value, bits):
    for bit in bits:
        value ^= 1 << bit
    return value


def _groups(leader_of):
    members = collections.defaultdict(set)
    for source, leader in leader_of.items():
        members[leader].add(source)
    return members


def _corpus(count=300, seed=5):
    """(sources, hashes (ints), thumbnails (bytes), threshold): ``synthetic`` hashes with 10% planted copies,
    plus a chain A-B-C-D-E whose neighbours only are within the threshold, and a cloud of 12 copies of one
    image, each within the threshold of some of the others but not of all, all with one picture's thumbnail."""
    sources, hashes, thumbnails, _ = synthetic(count, seed, planted_share=0.1)
    sources, hashes, thumbnails = list(sources), [int(h) for h in hashes], [t.tobytes() for t in thumbnails]
    threshold = ph.threshold_for(count + len(CHAIN) + 12)
    rng = random.Random(seed)
    step = threshold // 2 + 1  # two steps are over the threshold
    value, picture = rng.getrandbits(64), thumbnails[0]
    for i, source in enumerate(CHAIN):
        sources.append(source)
        hashes.append(_flip(value, range(i * step, (i + 1) * step)))
        thumbnails.append(picture)
        value = hashes[-1]
    base, pool = rng.getrandbits(64), rng.sample(range(ph.BITS), 3 * threshold)
    for i in range(12):  # each ``step`` bits from the pool flipped: no copy of the base itself, no hub
        sources.append(f'cloud/{i:02d}.jpg')
        hashes.append(_flip(base, rng.sample(pool, step)))
        thumbnails.append(thumbnails[1])
    return sources, hashes, thumbnails, threshold


def _chain_links():
    links = collections.defaultdict(list)
    for a, b in zip(CHAIN, CHAIN[1:]):
        links[a].append((b, 7))
        links[b].append((a, 7))
    return {source: tuple(sorted(neighbours)) for source, neighbours in links.items()}


def test_a_chain_of_candidates_is_cut_into_stars_never_one_group_with_both_ends():
    leader_of = star_groups(_chain_links())
    assert set(leader_of) == set(CHAIN)
    for members in _groups(leader_of).values():
        assert not {CHAIN[0], CHAIN[-1]} <= members
        assert len(members) <= 3
    links = _chain_links()
    for source, leader in leader_of.items():
        assert source == leader or leader in dict(links[source])


def test_the_whole_rule_cuts_a_chain_of_hashes_into_stars():
    sources, hashes, thumbnails, threshold = _corpus()
    result = group_in_memory(sources, hashes, thumbnails, threshold)
    chain = [c for c in result['components'] if set(CHAIN) & set(c)]
    assert chain == [sorted(CHAIN)]  # one component, as connected components would make one group
    assert all(not {CHAIN[0], CHAIN[-1]} <= members for members in _groups(result['leader_of']).values())


def test_star_groups_does_not_depend_on_the_order_of_its_input():
    rng = random.Random(8)
    nodes = [f'n/{i:02d}.jpg' for i in range(40)]
    edges = {tuple(sorted(rng.sample(nodes, 2))) for _ in range(90)}
    cycle = {(nodes[i], nodes[(i + 1) % 10]) for i in range(10)}  # equal degrees: the order key decides
    links = collections.defaultdict(list)
    for a, b in edges | cycle:
        links[a].append((b, 5))
        links[b].append((a, 5))
    expected = star_groups({s: tuple(sorted(n)) for s, n in links.items()})
    for _ in range(5):
        order = list(links)
        rng.shuffle(order)
        shuffled = {}
        for source in order:
            neighbours = list(links[source])
            rng.shuffle(neighbours)
            shuffled[source] = tuple(neighbours)
        assert star_groups(shuffled) == expected


def test_the_in_memory_grouping_does_not_depend_on_the_order_of_the_images():
    sources, hashes, thumbnails, threshold = _corpus()
    expected = group_in_memory(sources, hashes, thumbnails, threshold)['leader_of']
    order = list(range(len(sources)))
    random.Random(2).shuffle(order)
    shuffled = group_in_memory([sources[i] for i in order], [hashes[i] for i in order],
                               [thumbnails[i] for i in order], threshold)['leader_of']
    assert shuffled == expected


def _violations(leader_of, hash_of, thumbnail_of, threshold):
    """Members farther than the threshold from their leader, or not the same picture."""
    return sorted(source for source, leader in leader_of.items()
                  if ph.distance(hash_of[source], hash_of[leader]) > threshold
                  or not ph.same_picture(thumbnail_of[source], thumbnail_of[leader]))


def test_every_member_is_within_the_threshold_of_its_leader_and_the_same_picture():
    sources, hashes, thumbnails, threshold = _corpus(count=3000, seed=9)
    result = group_in_memory(sources, hashes, thumbnails, threshold)
    leader_of = result['leader_of']
    groups = _groups(leader_of)
    assert max(len(members) for members in groups.values()) > 2  # the cloud makes groups beyond pairs
    cloud = [c for c in result['components'] if any(s.startswith('cloud/') for s in c)]
    assert len(cloud) == 1 and len({leader_of[s] for s in cloud[0]}) > 1  # ... and more than one star
    assert _violations(leader_of, dict(zip(sources, hashes)), dict(zip(sources, thumbnails)), threshold) == []


def _record(source, value, thumbnail):
    return RecordRef(source, source, 'class0', 'train', 0, 'sha-' + source, 1, None, None, (), 'spill', 0, 1,
                     perceptual_hash=ph.to_hex(value), thumbnail=thumbnail)


def test_find_groups_on_beam_gives_the_in_memory_groups():
    sources, hashes, thumbnails, threshold = _corpus()
    expected = group_in_memory(sources, hashes, thumbnails, threshold)['leader_of']
    assert len(_groups(expected)) > 25 and set(CHAIN) <= set(expected)
    records = [_record(*fields) for fields in zip(sources, hashes, thumbnails)]
    hash_of, thumbnail_of = dict(zip(sources, hashes)), dict(zip(sources, thumbnails))
    options = PipelineOptions(direct_running_mode='in_memory')
    with TestPipeline(runner='DirectRunner', options=options) as p:
        nodes = p | beam.Create(records) | FindGroups(threshold)
        groups = nodes | beam.Map(lambda kv: (kv[0], kv[1].group))
        assert_that(groups, equal_to(sorted(expected.items())))
        assert_that(groups | beam.combiners.ToDict()
                    | beam.FlatMap(lambda leader_of: _violations(leader_of, hash_of, thumbnail_of, threshold)),
                    equal_to([]), label='members')


def test_the_benchmark_draws_planted_copies_within_reach_and_unrelated_hashes_as_coin_flips():
    sources, hashes, thumbnails, planted = synthetic(20_000, 1)
    assert len(planted) == 200 and len(set(sources)) == 20_000
    index_of = {source: i for i, source in enumerate(sources)}
    confirmed = sum(1 for a, b in planted if ph.same_picture(thumbnails[index_of[a]].tobytes(),
                                                              thumbnails[index_of[b]].tobytes()))
    assert confirmed >= 0.9 * len(planted)
    unrelated = np.bitwise_count(hashes[:5000] ^ hashes[5000:10000])
    assert abs(unrelated.mean() - 32) < 0.3 and abs(unrelated.std() - 4) < 0.3
